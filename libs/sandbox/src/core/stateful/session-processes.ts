import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { type Clock, InvalidInputError, NotFoundError } from '@switchyard/common';
import { RedactingDecoder } from '../output-collector';
import type { RunnerEvent } from '../runner/runner-protocol';
import { RunnerRefusedError } from '../runner/runner.errors';
import { SandboxCapacityError, SandboxInternalError, SandboxUnavailableError } from '../sandbox.errors';
import { adoptedProcess, processRecord } from './adopted-records';
import { ProcessLog } from './process-log';
import type { AdoptedBox, StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type {
  ProcessInfo,
  ProcessLogEntry,
  ProcessStart,
  StatefulListener,
  StatefulTier,
} from './stateful.types';

export const PROCESS_SIGNALS = ['TERM', 'INT', 'KILL', 'HUP', 'USR1', 'USR2'] as const;
export type ProcessSignal = (typeof PROCESS_SIGNALS)[number];

export interface SessionProcessesOptions {
  /** Running background processes a session may have at once. */
  maxPerSession: number;
  /** How the setting for `maxPerSession` is named in refusals. */
  maxPerSessionSetting: string;
  /** Output kept per process for `logs`. */
  logBytes: number;
  /** Secret patterns replaced in process output before anything keeps or streams it. */
  redact: readonly RegExp[];
}

/** A session at its limit of running background processes: the start is refused, naming the setting. */
export class ProcessLimitError extends SandboxCapacityError {
  readonly code = 'PROCESS_LIMIT';
}

interface Entry {
  info: ProcessInfo;
  box: StatefulBox;
  log: ProcessLog;
  streams: { stdout: RedactingDecoder; stderr: RedactingDecoder };
  exited: Promise<void>;
  markExited: () => void;
  unpin: () => void;
}

const newProcessId = (): string => `prc_${randomBytes(8).toString('hex')}`;

/**
 * The background processes of every session (`process` actions): long-running commands (a dev server, a watcher)
 * started in the session's stateful box of a tier, next to its kernels there, so code in that box reaches them on
 * localhost. Output is redacted and kept in a bounded log per process, and streamed to listeners (SSE). A process
 * ends with its command (whatever it left running is stopped with it), on `stop`, with its box (session end, a
 * lost runner, shutdown), and is then kept, ended, for `list` and `logs` until its session ends.
 */
export class SessionProcesses {
  private readonly logger = new Logger(SessionProcesses.name);
  private readonly hosts = new Map<StatefulTier, StatefulBoxHost>();
  private readonly sessions = new Map<string, Map<string, Entry>>();
  /**
   * Starts under way (a box opening, the runner asked), per session: each holds a slot of the limit, and its name,
   * from its check until it is registered or fails, so concurrent starts cannot all pass one check and overshoot.
   */
  private readonly starting = new Map<string, Set<{ name?: string }>>();
  private readonly watchedBoxes = new WeakSet<StatefulBox>();
  /**
   * Output and exit events of processes the runner has started but `launch` has not registered yet, by process id:
   * a command that ends at once (`printf …`) has its output and exit read in the same chunk as its `proc_started`,
   * before the start's promise lets `launch` go on. Replayed once it is registered; dropped if the start fails.
   */
  private readonly early = new Map<string, RunnerEvent[]>();
  private readonly listeners: StatefulListener[] = [];
  private closed = false;

  constructor(
    hosts: StatefulBoxHost[],
    private readonly options: SessionProcessesOptions,
    private readonly clock: Clock,
  ) {
    for (const host of hosts) {
      this.hosts.set(host.tier, host);
      host.onAdopted((adopted) => this.adopt(host, adopted));
    }
  }

  listen(listener: StatefulListener): void {
    this.listeners.push(listener);
  }

  /** Starts a process; refuses a name already used by a running process of the session, or one too many. */
  async start(spec: ProcessStart): Promise<ProcessInfo> {
    if (this.closed) throw new SandboxUnavailableError('the engine is shutting down');
    const host = this.hosts.get(spec.tier);
    if (!host) throw new SandboxUnavailableError(`the ${spec.tier} tier holds no processes in this engine`);
    this.checkStart(spec.sessionId, spec.name);
    const reservation = { ...(spec.name !== undefined && { name: spec.name }) };
    let pending = this.starting.get(spec.sessionId);
    if (!pending) this.starting.set(spec.sessionId, (pending = new Set()));
    pending.add(reservation);
    try {
      return await this.launch(spec, host);
    } finally {
      // Registered by now when it started: the slot passes from the reservation to the entry with no gap between.
      pending.delete(reservation);
      if (pending.size === 0 && this.starting.get(spec.sessionId) === pending)
        this.starting.delete(spec.sessionId);
    }
  }

  /** Opens the box, asks its runner to start the command, and registers the running process. */
  private async launch(spec: ProcessStart, host: StatefulBoxHost): Promise<ProcessInfo> {
    const box = await host.box(spec.sessionId, spec.workspaceDir, spec.egress, spec.image);
    this.watch(box);
    const id = newProcessId();
    const startedAt = this.clock.now().toISOString();
    let pid: number;
    this.early.set(id, []);
    try {
      ({ pid } = await box.connection.procStart({
        proc: id,
        command: spec.command,
        cwd: spec.cwd ?? '.',
        env: { ...spec.baseEnv, ...spec.env },
        workspace: box.workspace,
        meta: processRecord({ ...spec, startedAt }),
      }));
    } catch (err) {
      this.early.delete(id);
      if (err instanceof RunnerRefusedError && err.code === 'cwd') {
        throw new InvalidInputError('cwd', err.message.replace(/^runner refused: /, ''), 'INVALID_CWD');
      }
      throw new SandboxInternalError(
        'PROCESS_START',
        `could not start the process: ${(err as Error).message}`,
        {
          retriable: !(err instanceof RunnerRefusedError),
          cause: err,
        },
      );
    }
    const info: ProcessInfo = {
      id,
      sessionId: spec.sessionId,
      ...(spec.name !== undefined && { name: spec.name }),
      command: spec.command,
      tier: spec.tier,
      pid,
      startedAt,
      running: true,
    };
    const entry = this.register(info, box);
    const early = this.early.get(id) ?? [];
    this.early.delete(id);
    for (const event of early) this.onEvent(box, event);
    return { ...entry.info };
  }

  private register(info: ProcessInfo, box: StatefulBox): Entry {
    let markExited!: () => void;
    const exited = new Promise<void>((resolve) => (markExited = resolve));
    const entry: Entry = {
      info,
      box,
      log: new ProcessLog(this.options.logBytes),
      streams: {
        stdout: new RedactingDecoder(this.options.redact),
        stderr: new RedactingDecoder(this.options.redact),
      },
      exited,
      markExited,
      unpin: box.pin(),
    };
    let processes = this.sessions.get(info.sessionId);
    if (!processes) this.sessions.set(info.sessionId, (processes = new Map<string, Entry>()));
    processes.set(info.id, entry);
    return entry;
  }

  /**
   * Processes running in a box the host adopted (their runner outlived the engine that started them): registered
   * again under their ids, names and commands, running. Their log starts empty: what they wrote while no engine
   * was attached went to the pod's log only.
   */
  private adopt(host: StatefulBoxHost, { box, processes }: AdoptedBox): void {
    if (this.closed) return;
    this.watch(box);
    for (const found of processes) {
      const info = adoptedProcess(found, box, host.tier, this.clock);
      if (!info || this.sessions.get(box.sessionId)?.has(info.id)) continue;
      this.register(info, box);
      this.logger.log(`process ${info.id} (session ${box.sessionId}) adopted`);
    }
  }

  /**
   * Fails fast (before a box is opened) for a taken name or a session at its limit. Starts under way count as
   * running: they hold their slot and name until they end.
   */
  checkStart(sessionId: string, name?: string): void {
    const running = [
      ...[...(this.sessions.get(sessionId)?.values() ?? [])].filter((e) => e.info.running).map((e) => e.info),
      ...(this.starting.get(sessionId) ?? []),
    ];
    if (name !== undefined && running.some((e) => e.name === name)) {
      throw new InvalidInputError(
        'name',
        `a process named "${name}" is already running in this session`,
        'PROCESS_NAME_TAKEN',
      );
    }
    if (running.length >= this.options.maxPerSession) {
      throw new ProcessLimitError(
        `the session already runs ${running.length} background processes (the limit); stop one or raise ` +
          this.options.maxPerSessionSetting,
        { limit: this.options.maxPerSession },
      );
    }
  }

  list(sessionId: string): ProcessInfo[] {
    return [...(this.sessions.get(sessionId)?.values() ?? [])].map((e) => ({ ...e.info }));
  }

  /** Tiers in which the session has a running process. */
  liveTiers(sessionId: string): StatefulTier[] {
    const entries = [...(this.sessions.get(sessionId)?.values() ?? [])];
    return [...new Set(entries.flatMap((e) => (e.info.running ? [e.info.tier] : [])))];
  }

  /** A process by id, or by name (the running one, else the latest started). */
  get(sessionId: string, idOrName: string): ProcessInfo {
    return { ...this.entry(sessionId, idOrName).info };
  }

  logs(
    sessionId: string,
    idOrName: string,
    options: { tail?: number; sinceSeq?: number } = {},
  ): { info: ProcessInfo; entries: ProcessLogEntry[]; nextSeq: number; dropped: number } {
    const entry = this.entry(sessionId, idOrName);
    return { info: { ...entry.info }, ...entry.log.read(options) };
  }

  /** Writes to the process's stdin (closing it after, with `eof`). */
  async write(sessionId: string, idOrName: string, data: string, eof = false): Promise<ProcessInfo> {
    const entry = this.running(sessionId, idOrName);
    try {
      await entry.box.connection.procWrite(entry.info.id, data, eof);
    } catch (err) {
      if (err instanceof RunnerRefusedError && err.code === 'closed') {
        throw new InvalidInputError(
          'processId',
          `the standard input of ${entry.info.id} is already closed`,
          'STDIN_CLOSED',
        );
      }
      throw err;
    }
    return { ...entry.info };
  }

  /** Sends a signal to the process and everything it started. */
  async signal(sessionId: string, idOrName: string, signal: ProcessSignal): Promise<ProcessInfo> {
    const entry = this.running(sessionId, idOrName);
    await entry.box.connection.procSignal(entry.info.id, signal);
    return { ...entry.info };
  }

  /** TERM to the process and everything it started, KILL after `graceMs`; answers once it has exited. */
  async stop(sessionId: string, idOrName: string, graceMs: number): Promise<ProcessInfo> {
    const entry = this.entry(sessionId, idOrName);
    if (!entry.info.running) return { ...entry.info };
    entry.info.endReason = 'stopped';
    await entry.box.connection.procSignal(entry.info.id, 'TERM').catch(() => undefined);
    if (!(await this.settles(entry.exited, graceMs))) {
      await entry.box.connection.procSignal(entry.info.id, 'KILL').catch(() => undefined);
      // KILL cannot be ignored; a box that does not report the exit soon is itself gone or hung.
      if (!(await this.settles(entry.exited, 5000))) this.ended(entry, { exitCode: null, signal: 'SIGKILL' });
    }
    return { ...entry.info };
  }

  /** Waits until the process exits, `timeoutMs` passes or `signal` fires; answers whether it exited. */
  async wait(
    sessionId: string,
    idOrName: string,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ exited: boolean; info: ProcessInfo }> {
    const entry = this.entry(sessionId, idOrName);
    const aborted = new Promise<void>((resolve) => {
      if (signal?.aborted) resolve();
      signal?.addEventListener('abort', () => resolve(), { once: true });
    });
    const exited = await this.settles(Promise.race([entry.exited, aborted]), timeoutMs);
    return { exited: exited && !entry.info.running, info: { ...entry.info } };
  }

  /** The session ended: its processes die with its box; their records go too. */
  releaseSession(sessionId: string): Promise<void> {
    const processes = this.sessions.get(sessionId);
    this.sessions.delete(sessionId);
    const stops = [...(processes?.values() ?? [])]
      .filter((e) => e.info.running)
      .map((e) => {
        e.info.endReason = 'session_ended';
        return e.box.connection.procSignal(e.info.id, 'KILL').catch(() => undefined);
      });
    for (const e of processes?.values() ?? [])
      if (e.info.running) this.ended(e, { exitCode: null, signal: 'SIGKILL' });
    return Promise.allSettled(stops).then(() => undefined);
  }

  /** Shutdown: no process starts after this; the tiers kill the boxes. */
  close(): void {
    this.closed = true;
    for (const processes of this.sessions.values()) {
      for (const e of processes.values()) {
        if (!e.info.running) continue;
        e.info.endReason = 'shutdown';
        this.ended(e, { exitCode: null, signal: 'SIGKILL' });
      }
    }
  }

  private entry(sessionId: string, idOrName: string): Entry {
    const processes = [...(this.sessions.get(sessionId)?.values() ?? [])];
    const byId = processes.find((e) => e.info.id === idOrName);
    const named = processes.filter((e) => e.info.name === idOrName);
    const found = byId ?? named.find((e) => e.info.running) ?? named.at(-1);
    if (!found) {
      throw new NotFoundError(`no process "${idOrName}" in session ${sessionId}`, { processId: idOrName });
    }
    return found;
  }

  private running(sessionId: string, idOrName: string): Entry {
    const entry = this.entry(sessionId, idOrName);
    if (!entry.info.running) {
      throw new InvalidInputError(
        'processId',
        `process ${entry.info.id} has already exited (${exitWords(entry.info)})`,
        'PROCESS_EXITED',
      );
    }
    return entry;
  }

  private settles(p: Promise<unknown>, ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      p.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
    ]).finally(() => clearTimeout(timer));
  }

  /** Output and exits come from the box's runner, for all of its processes. */
  private watch(box: StatefulBox): void {
    if (this.watchedBoxes.has(box)) return;
    this.watchedBoxes.add(box);
    box.connection.onEvent((event) => this.onEvent(box, event));
    void box.closed.then(() => {
      for (const e of this.sessions.get(box.sessionId)?.values() ?? []) {
        if (e.box !== box || !e.info.running) continue;
        e.info.endReason ??= 'sandbox_lost';
        this.ended(e, { exitCode: null, signal: 'SIGKILL' });
      }
    });
  }

  private onEvent(box: StatefulBox, event: RunnerEvent): void {
    if (event.ev !== 'pout' && event.ev !== 'pexit') return;
    const entry = this.sessions.get(box.sessionId)?.get(event.proc);
    if (!entry) {
      this.early.get(event.proc)?.push(event);
      return;
    }
    if (event.ev === 'pout') {
      const stream = event.fd === 2 ? 'stderr' : 'stdout';
      this.record(entry, stream, entry.streams[stream].write(event.data));
    } else {
      this.ended(entry, { exitCode: event.exitCode, signal: event.signal });
    }
  }

  private record(entry: Entry, stream: 'stdout' | 'stderr', text: string): void {
    if (text.length === 0) return;
    const logged = entry.log.append(stream, text);
    for (const l of this.listeners) this.safely(() => l.processOutput?.({ ...entry.info }, logged));
  }

  private ended(entry: Entry, exit: { exitCode: number | null; signal: string | null }): void {
    if (!entry.info.running) return;
    for (const stream of ['stdout', 'stderr'] as const)
      this.record(entry, stream, entry.streams[stream].end());
    entry.info.running = false;
    entry.info.endedAt = this.clock.now().toISOString();
    if (exit.exitCode !== null) entry.info.exitCode = exit.exitCode;
    if (exit.signal !== null) entry.info.signal = exit.signal;
    entry.unpin();
    entry.markExited();
    for (const l of this.listeners) this.safely(() => l.processExited?.({ ...entry.info }));
  }

  private safely(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.warn(`process listener failed: ${(err as Error).message}`);
    }
  }
}

/** "exit code 0", "signal SIGTERM". */
export function exitWords(info: ProcessInfo): string {
  if (info.exitCode !== undefined) return `exit code ${info.exitCode}`;
  return info.signal ? `signal ${info.signal}` : 'ended';
}
