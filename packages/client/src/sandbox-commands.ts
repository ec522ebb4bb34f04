import { constants } from 'node:os';
import type { SwitchyardClient } from './client';
import { SwitchyardError } from './errors';
import type { OutputChunk, SandboxEvents, StreamEnd, StreamListener } from './sandbox-events';
import type { components } from './generated/schema';
import type { Action } from './types';

type Process = components['schemas']['Process'];
type ProcessOutput = components['schemas']['ProcessOutput'];
type ProcessLogs = Extract<ProcessOutput, { nextSeq: number }>;
type LogEntry = ProcessLogs['entries'][number];

const isLogs = (output: Action['output']): output is ProcessLogs =>
  typeof output === 'object' && output !== null && 'nextSeq' in output;

export interface CommandOptions {
  /** Working directory, relative to the workspace root. */
  cwd?: string;
  /** Extra environment variables (loader and interpreter hooks such as `LD_*` are refused by the engine). */
  env?: Record<string, string>;
  /** Foreground: the wall-clock limit of the run (engine default 30 s). Background: the default of `wait()`. */
  timeoutMs?: number;
  /** Called with each chunk of standard output as it comes. */
  onStdout?: (text: string) => void;
  /** Called with each chunk of standard error as it comes. */
  onStderr?: (text: string) => void;
}

/** A finished command. A non-zero exit is a result, not an exception. */
export interface CommandResult {
  /** The exit code; killed by a signal: 128 + its number, as a shell reports it (`signal` names it). */
  exitCode: number;
  stdout: string;
  stderr: string;
  signal?: string;
}

/** Background: the process runs on; `name` makes it addressable by name in process actions too. */
export type BackgroundOptions = CommandOptions & { background: true; name?: string };

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** 128 + the signal's number, a shell's `$?` for a process a signal ended. */
const signalExit = (signal: string): number =>
  128 + (constants.signals[signal as keyof typeof constants.signals] ?? 0);

/**
 * The sandbox's shell: `run(cmd)` runs a command to its end (a `bash` code action); `run(cmd, {background: true})`
 * starts it as a session process and answers a handle at once. `onStdout`/`onStderr` get the output as it comes,
 * from the session's event stream.
 */
export class Commands {
  constructor(
    private readonly client: SwitchyardClient,
    private readonly sessionId: string,
    private readonly events: SandboxEvents,
  ) {}

  run(command: string, options: BackgroundOptions): Promise<CommandHandle>;
  run(command: string, options?: CommandOptions & { background?: false }): Promise<CommandResult>;
  async run(
    command: string,
    options: CommandOptions & { background?: boolean; name?: string } = {},
  ): Promise<CommandResult | CommandHandle> {
    if (options.background) return this.start(command, { ...options, background: true });
    const code = options.cwd ? `cd -- ${quote(options.cwd)} && ${command}` : command;
    const action = {
      type: 'code',
      language: 'bash',
      code,
      env: options.env,
      timeoutMs: options.timeoutMs,
    } as const;
    if (!options.onStdout && !options.onStderr)
      return commandResult(await this.client.actions.run(this.sessionId, action));
    return this.follow(action, options);
  }

  /** A foreground run whose output goes to the callbacks as it comes (`action.output` events). */
  private async follow(
    action: {
      type: 'code';
      language: 'bash';
      code: string;
      env?: Record<string, string>;
      timeoutMs?: number;
    },
    options: CommandOptions,
  ): Promise<CommandResult> {
    const seen = { stdout: '', stderr: '' };
    const emit = (stream: 'stdout' | 'stderr', text: string) => {
      seen[stream] += text;
      (stream === 'stdout' ? options.onStdout : options.onStderr)?.(text);
    };
    const registration = this.events.expect();
    let id: string | undefined;
    try {
      const started = await this.client.actions.start(this.sessionId, action);
      id = started.id;
      const ended = new Promise<void>((resolve) => {
        this.events.attach(started.id, {
          output: (chunk) => emit(chunk.stream, chunk.text),
          ended: () => resolve(),
          lost: () => resolve(),
        });
      });
      registration.done();
      await ended;
      const final = await this.client.actions.waitFor(this.sessionId, started.id);
      // What the stream did not carry (it dropped, or the buffer lost it): the rest, once.
      for (const stream of ['stdout', 'stderr'] as const) {
        const all = final[stream] ?? '';
        if (all.startsWith(seen[stream]) && all.length > seen[stream].length)
          emit(stream, all.slice(seen[stream].length));
      }
      return commandResult(final);
    } finally {
      registration.done();
      if (id !== undefined) this.events.detach(id);
    }
  }

  private async start(command: string, options: BackgroundOptions): Promise<CommandHandle> {
    const registration = this.events.expect();
    try {
      const action = await this.client.actions.run(this.sessionId, {
        type: 'process',
        op: 'start',
        command,
        ...(options.name !== undefined && { name: options.name }),
        ...(options.cwd !== undefined && { cwd: options.cwd }),
        ...(options.env !== undefined && { env: options.env }),
      });
      const output = action.output;
      if (action.status !== 'succeeded' || !output || !('process' in output))
        throw actionError(action, `the process did not start (${action.status})`);
      const handle = new CommandHandle(this.client, this.sessionId, this.events, output.process, options);
      this.events.attach(handle.processId, handle.listener);
      return handle;
    } finally {
      registration.done();
    }
  }
}

/**
 * A background command: its output goes to `onStdout`/`onStderr` as it comes; `wait()` for its end, `kill()` to
 * stop it (TERM, then KILL), `logs()` for what it printed so far (the engine keeps the last
 * `SWITCHYARD_PROCESS_LOG_BYTES`).
 */
export class CommandHandle {
  readonly processId: string;
  readonly name: string | undefined;
  private lastSeq = -1;
  private end: StreamEnd | undefined;
  private streamLost = false;
  private wake: (() => void) | undefined;
  /** What the event stream tells this handle; `Commands` attaches it. */
  readonly listener: StreamListener;

  constructor(
    private readonly client: SwitchyardClient,
    private readonly sessionId: string,
    private readonly events: SandboxEvents,
    process: Process,
    private readonly options: CommandOptions,
  ) {
    this.processId = process.id;
    this.name = process.name;
    this.listener = {
      output: (chunk) => this.deliver(chunk),
      ended: (end) => {
        this.end = end;
        // Its output came before its exit: nothing more to hear, so the stream may close.
        this.events.detach(this.processId);
        this.wake?.();
      },
      lost: () => {
        this.streamLost = true;
        this.wake?.();
      },
    };
  }

  /**
   * Waits for the process to exit (at most `timeoutMs`, default the run's `timeoutMs`, else no limit) and answers
   * its exit and output. Throws `SwitchyardError` `WAIT_TIMEOUT` when it is still running then.
   */
  async wait(options: { timeoutMs?: number } = {}): Promise<CommandResult> {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs;
    if (this.end === undefined && !this.streamLost) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (timeoutMs !== undefined) timer = setTimeout(resolve, timeoutMs);
      }).finally(() => clearTimeout(timer));
      this.wake = undefined;
    }
    if (this.end === undefined) {
      // The stream stopped or the time is up: ask the engine (a `wait` op; 0 ms answers at once).
      const waited = await this.processAction({
        op: 'wait',
        timeoutMs: this.streamLost ? Math.max(1, timeoutMs ?? 2 ** 31 - 1) : 1,
      });
      const output = waited.output;
      if (!output || !('exited' in output) || !output.exited)
        throw new SwitchyardError(
          `process ${this.processId} still running after ${timeoutMs} ms`,
          0,
          'WAIT_TIMEOUT',
        );
    }
    const logs = await this.logs();
    this.events.detach(this.processId);
    const process = logs.process;
    return {
      exitCode: process.exitCode ?? (process.signal ? signalExit(process.signal) : -1),
      stdout: logs.stdout,
      stderr: logs.stderr,
      ...(process.signal !== undefined && { signal: process.signal }),
    };
  }

  /** Stops the process and what it started (TERM, then KILL after `graceMs`, default 2000); true if it was running. */
  async kill(options: { graceMs?: number } = {}): Promise<boolean> {
    const action = await this.processAction({
      op: 'stop',
      ...(options.graceMs !== undefined && { graceMs: options.graceMs }),
    });
    return action.status === 'succeeded';
  }

  /**
   * Stops delivering its output to the callbacks; the process runs on. A running process's handle holds the
   * sandbox's event stream open (and so keeps Node running) until the process exits, `disconnect()` or `sbx.kill()`.
   */
  disconnect(): void {
    this.events.detach(this.processId);
  }

  /** Writes text to its standard input; `eof` closes it after. */
  async sendStdin(data: string, options: { eof?: boolean } = {}): Promise<void> {
    await this.processAction({ op: 'write', data, ...(options.eof && { eof: true }) });
  }

  /**
   * What it printed, as the engine keeps it; output the stream did not deliver to `onStdout`/`onStderr` (it
   * dropped) is delivered now, in order.
   */
  async logs(): Promise<{ stdout: string; stderr: string; entries: LogEntry[]; process: Process }> {
    const action = await this.processAction({ op: 'logs' });
    const output = action.output;
    if (!isLogs(output)) throw actionError(action, 'no logs');
    for (const entry of output.entries) this.deliver(entry);
    const join = (stream: 'stdout' | 'stderr') =>
      output.entries
        .filter((e) => e.stream === stream)
        .map((e) => e.text)
        .join('');
    return {
      stdout: join('stdout'),
      stderr: join('stderr'),
      entries: output.entries,
      process: output.process,
    };
  }

  private deliver(chunk: OutputChunk): void {
    if (chunk.seq === undefined || chunk.seq <= this.lastSeq) return;
    this.lastSeq = chunk.seq;
    (chunk.stream === 'stdout' ? this.options.onStdout : this.options.onStderr)?.(chunk.text);
  }

  private async processAction(
    op:
      | { op: 'wait'; timeoutMs: number }
      | { op: 'stop'; graceMs?: number }
      | { op: 'write'; data: string; eof?: boolean }
      | { op: 'logs' },
  ): Promise<Action> {
    const action = await this.client.actions.run(this.sessionId, {
      type: 'process',
      processId: this.processId,
      ...op,
    });
    if (action.status === 'denied' || action.status === 'error') throw actionError(action, action.status);
    return action;
  }
}

/** The result of a foreground run; outcomes without an exit (denied, timed out…) throw. */
function commandResult(action: Action): CommandResult {
  if ((action.status !== 'succeeded' && action.status !== 'failed') || action.exitCode === undefined)
    throw actionError(action, `the command ended ${action.status}`);
  return { exitCode: action.exitCode, stdout: action.stdout ?? '', stderr: action.stderr ?? '' };
}

/**
 * An action that did not give the answer asked for, as an error naming its status and the engine's reason; the
 * action's id, status and output so far are in `details`.
 */
export function actionError(action: Action, fallback: string): SwitchyardError {
  return new SwitchyardError(
    action.error?.message ?? fallback,
    0,
    action.error?.code ?? action.status.toUpperCase(),
    [],
    {
      actionId: action.id,
      status: action.status,
      ...(action.stdout && { stdout: action.stdout }),
      ...(action.stderr && { stderr: action.stderr }),
    },
  );
}
