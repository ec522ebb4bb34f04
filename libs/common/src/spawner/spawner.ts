import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Socket } from 'node:net';
import * as path from 'node:path';
import type { LaunchSpec } from './spawn.types';
import { SpawnedProcess } from './spawned-process';

/** One message from the spawner process (see `spawner-main.ts`). */
interface SpawnerMessage {
  id?: number;
  pid?: number;
  fd?: number;
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  error?: string;
  errno?: string;
}

/** A running spawner process and what it started that has not closed yet. */
interface Connection {
  readonly child: ChildProcess;
  readonly procs: Map<number, SpawnedProcess>;
  idleTimer?: NodeJS.Timeout;
}

/** A spawner process with nothing in flight this long is let go; the next launch starts another. */
const IDLE_MS = 30_000;

/**
 * Starts processes without forking the caller. A fork copies the forking process's page tables while its event loop
 * waits, in proportion to its memory: Node 24 here blocks 1.6 ms at 50 MB resident, 14 ms at 550 MB and 31 ms at 1 GB
 * for each `spawn`. The spawner is a small Node process, started on demand, that forks instead and hands each
 * process's pipes back over its IPC channel (`spawner-main.ts`); its waits are not the engine's.
 *
 * A spawner process that dies is started again at the next launch; what it had started is killed and each such
 * process closes with an error saying so. Its channel holds the caller's event loop only while a process is in flight,
 * and a spawner idle for 30 s is let go (`release` lets it go as soon as it is idle).
 */
export class Spawner {
  private connection?: Connection;
  private nextId = 1;
  private releasing = false;

  /** Told when a spawner process ends with processes in flight (they are killed); the engine logs it. */
  onLost: (message: string) => void = () => undefined;

  /** The spawner process's pid, while one runs. */
  get pid(): number | undefined {
    return this.connection?.child.pid;
  }

  launch(spec: LaunchSpec): SpawnedProcess {
    const proc = new SpawnedProcess();
    this.releasing = false;
    const connection = this.connection ?? this.start();
    const id = this.nextId++;
    connection.procs.set(id, proc);
    clearTimeout(connection.idleTimer);
    held(connection, true);
    void proc.closed.then(() => this.forget(connection, id));
    const request = { id, ...spec };
    const unreachable = (err: Error) =>
      proc.onFailed(new Error(`cannot reach the process spawner: ${err.message}`, { cause: err }));
    try {
      connection.child.send(request, (err) => err && unreachable(err));
    } catch (err) {
      unreachable(err as Error);
    }
    return proc;
  }

  /** Lets the spawner process go as soon as nothing it started is open (a later launch starts a new one). */
  release(): void {
    this.releasing = true;
    if (this.connection && this.connection.procs.size === 0) this.stop(this.connection);
  }

  private start(): Connection {
    const env = { ...process.env };
    delete env.NODE_OPTIONS; // the caller's flags (a debugger, preloads) are not the spawner's
    const child = spawn(process.execPath, [spawnerMain()], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env,
    });
    const connection: Connection = { child, procs: new Map() };
    this.connection = connection;
    child.on('message', (message: SpawnerMessage, handle?: Socket) =>
      this.route(connection, message, handle),
    );
    child.once('error', (err) => this.lost(connection, err.message));
    child.once('exit', (code, signal) => this.lost(connection, signal ?? `exit code ${code}`));
    child.unref();
    held(connection, false);
    return connection;
  }

  private route(connection: Connection, message: SpawnerMessage, handle?: Socket): void {
    const proc = message.id === undefined ? undefined : connection.procs.get(message.id);
    if (!proc) {
      handle?.destroy();
      return;
    }
    if (message.pid !== undefined) proc.onStarted(message.pid);
    else if (message.fd !== undefined && handle) proc.onSocket(message.fd, handle);
    else if (message.exit) proc.onExit(message.exit);
    else if (message.error !== undefined) {
      proc.onFailed(Object.assign(new Error(message.error), { code: message.errno }));
    }
  }

  private forget(connection: Connection, id: number): void {
    connection.procs.delete(id);
    if (connection.procs.size > 0) return;
    held(connection, false);
    if (this.releasing) this.stop(connection);
    else {
      clearTimeout(connection.idleTimer);
      connection.idleTimer = setTimeout(() => this.stop(connection), IDLE_MS).unref();
    }
  }

  /** The spawner process exited or could not start: what it had started is killed and closes with the reason. */
  private lost(connection: Connection, why: string): void {
    clearTimeout(connection.idleTimer);
    if (this.connection === connection) this.connection = undefined;
    if (connection.procs.size === 0) return;
    this.onLost(
      `the process spawner ended (${why}); ${connection.procs.size} process(es) it started are killed`,
    );
    const error = new Error(`the process spawner ended (${why}) before the process did`);
    for (const proc of connection.procs.values()) proc.onFailed(error, { code: null, signal: 'SIGKILL' });
  }

  private stop(connection: Connection): void {
    clearTimeout(connection.idleTimer);
    if (connection.procs.size > 0) return;
    if (this.connection === connection) this.connection = undefined;
    if (connection.child.connected) connection.child.disconnect();
  }
}

/**
 * The spawner's program: compiled beside this file, or, where this runs from its TypeScript source (the tests), that
 * source itself, which Node 24 runs by stripping its types.
 */
export function spawnerMain(): string {
  const compiled = path.join(__dirname, 'spawner-main.js');
  return existsSync(compiled) ? compiled : path.join(__dirname, 'spawner-main.ts');
}

/** Whether the spawner's channel keeps the caller's event loop alive: only while a process is in flight. */
function held(connection: Connection, yes: boolean): void {
  const channel = connection.child.channel as { ref(): void; unref(): void } | null | undefined;
  if (yes) channel?.ref();
  else channel?.unref();
}

let shared: Spawner | undefined;

/** The process's one spawner, shared by everything in it that starts processes. */
export function sharedSpawner(): Spawner {
  return (shared ??= new Spawner());
}
