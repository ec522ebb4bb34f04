import type { Socket } from 'node:net';
import { finished, PassThrough } from 'node:stream';
import { killProcessGroup } from './process-group';
import type { LaunchedProcess, ProcessExit } from './spawn.types';

/** fds the engine writes (stdin, bubblewrap's `--args`) and reads (stdout, stderr, bubblewrap's status). */
const WRITTEN = new Set([0, 4]);
const FDS = 5;

/**
 * A process the spawner started, as the engine sees it: its five stdio streams exist from the start (what is written
 * early waits in them) and are joined to the process's sockets as they arrive from the spawner. `closed` resolves
 * once the spawner has reported the exit and stdout, stderr and status have ended, as `child_process`'s 'close' does.
 */
export class SpawnedProcess implements LaunchedProcess {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly status = new PassThrough();
  readonly control = new PassThrough();
  readonly started: Promise<number | undefined>;
  readonly closed: Promise<ProcessExit>;
  private currentPid: number | undefined;
  private killWhenStarted = false;
  private ended = false;
  private resolveStarted!: (pid: number | undefined) => void;
  private resolveExit!: (exit: ProcessExit) => void;
  private readonly sockets: (Socket | undefined)[] = new Array<Socket | undefined>(FDS);
  /** Per fd: its socket has closed, or will never come. */
  private readonly gone: (() => void)[] = [];

  constructor() {
    this.started = new Promise((resolve) => (this.resolveStarted = resolve));
    const exited = new Promise<ProcessExit>((resolve) => (this.resolveExit = resolve));
    const drained = [1, 2, 3].map((fd) => this.drained(fd));
    this.closed = Promise.all([exited, ...drained]).then(([exit]) => exit);
  }

  /**
   * Resolves once what the process wrote on `fd` has reached the engine's reader: the stream has ended, or its socket
   * has closed and nobody is reading the stream (a warm slot's unread stdout), which would otherwise hold `closed`.
   */
  private drained(fd: number): Promise<void> {
    const stream = this.stream(fd);
    return new Promise<void>((resolve) => {
      finished(stream, { writable: false }, () => resolve());
      new Promise<void>((gone) => (this.gone[fd] = gone))
        .then(() => {
          if (stream.readableFlowing !== true) resolve();
        })
        .catch(() => undefined);
    });
  }

  get pid(): number | undefined {
    return this.currentPid;
  }

  /** The stream of fd `fd` on the engine's side. */
  private stream(fd: number): PassThrough {
    return [this.stdin, this.stdout, this.stderr, this.status, this.control][fd];
  }

  /** SIGKILLs the process group, now or as soon as its pid is known. Safe to call repeatedly and after exit. */
  killGroup(): void {
    if (this.currentPid !== undefined) killProcessGroup(this.currentPid);
    else if (!this.ended) this.killWhenStarted = true;
  }

  /** The spawner started it. */
  onStarted(pid: number): void {
    this.currentPid = pid;
    this.resolveStarted(pid);
    if (this.killWhenStarted) killProcessGroup(pid);
  }

  /** The spawner handed over the socket of `fd`. */
  onSocket(fd: number, socket: Socket): void {
    if (fd < 0 || fd >= FDS || this.sockets[fd]) {
      socket.destroy();
      return;
    }
    this.sockets[fd] = socket;
    socket.once('close', () => this.gone[fd]?.());
    const stream = this.stream(fd);
    const fail = (err: Error) => stream.destroy(stream.listenerCount('error') > 0 ? err : undefined);
    socket.on('error', fail);
    if (WRITTEN.has(fd)) {
      // Nothing comes back on these: reading lets the socket see the process's end and close.
      socket.resume();
      stream.pipe(socket);
      stream.on('close', () => socket.end());
    } else {
      socket.pipe(stream);
      // The engine stopped reading (an output cap): nothing more is wanted from the process.
      stream.on('close', () => socket.destroy());
    }
  }

  /** The process exited. */
  onExit(exit: ProcessExit): void {
    this.ended = true;
    this.resolveExit(exit);
  }

  /**
   * It could not be started, or the spawner was lost before it reported the exit: `error` says which. A process that
   * may still run is killed, and streams whose sockets never came are ended, so that `closed` resolves.
   */
  onFailed(error: Error, exit: Omit<ProcessExit, 'error'> = { code: null, signal: null }): void {
    if (this.ended) return;
    if (this.currentPid !== undefined) killProcessGroup(this.currentPid);
    this.ended = true;
    this.resolveStarted(undefined);
    for (let fd = 0; fd < FDS; fd++) {
      if (this.sockets[fd]) continue;
      const stream = this.stream(fd);
      if (WRITTEN.has(fd)) stream.resume();
      else stream.end();
      this.gone[fd]?.();
    }
    this.resolveExit({ ...exit, error });
  }
}
