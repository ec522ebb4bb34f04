import type { Readable, Writable } from 'node:stream';
import type { Language } from '@switchyard/common';

/**
 * Protocol version this engine speaks; see docker/sandbox/runner/runner.py. 2: every run names the workspace the
 * runner must see (an older runner would ignore that, so it is refused at `hello`).
 */
export const RUNNER_PROTOCOL = 2;
/** Longest line the runner may send (an output event carries at most 64 KiB, base64-encoded). */
const MAX_LINE_BYTES = 1024 * 1024;

export interface RunnerHello {
  protocol: number;
  pid: number;
  python: string;
  /** The runner can read the container's OOM-kill counter, so out-of-memory is reported precisely. */
  oomCounter: boolean;
}

export interface RunnerPong {
  ok: boolean;
  busy: boolean;
  ms: number;
  /** `st_dev` and `st_ino` of /workspace as the container sees it. */
  workspace?: [number, number];
  error?: string;
}

export interface RunnerRunRequest {
  language: Language;
  code: string;
  stdin?: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** RLIMIT_CPU of the interpreter, 0 for none. */
  cpuSeconds: number;
  /** Per stream: the runner stops reading and ends the run past these (a backstop; the engine keeps the exact caps). */
  capBytes: number;
  capLines: number;
  /**
   * Device and inode (decimal) of the session workspace on the host. The runner refuses the run, before anything
   * starts, unless /workspace is that directory (`RunnerRefusedError` with code `workspace`).
   */
  workspace: [dev: string, ino: string];
}

export interface RunnerExit {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  ended: null | 'timeout' | 'output' | 'kill';
  capped: { stdout: boolean; stderr: boolean };
  oomKilled: boolean;
  pidsLimitHit: boolean;
  /** Processes still alive when the interpreter exited, all killed. */
  leftovers: number;
  durationMs: number;
  spawnError: string | null;
}

/** The runner's connection closed (runner exited, container stopped or removed, daemon gone). */
export class RunnerGoneError extends Error {}
/** The runner did not answer in time. */
export class RunnerTimeoutError extends Error {}
/** The runner refused a request or sent something that is not the protocol. */
export class RunnerProtocolError extends Error {}
/** The runner refused a request on purpose; `code` says why (`workspace`: /workspace is not the expected one). */
export class RunnerRefusedError extends RunnerProtocolError {
  constructor(
    message: string,
    readonly code?: string,
    /** For `workspace`: device and inode of what /workspace is in the container. */
    readonly workspace?: [string, string],
  ) {
    super(message);
  }
}

interface Pending {
  resolve(message: Record<string, unknown>): void;
  reject(err: Error): void;
  onOutput?: (fd: 1 | 2, data: Buffer, id: number) => void;
}

export interface RunnerStdio {
  stdin: Writable;
  stdout: Readable;
  /** Resolves when the underlying connection is gone. */
  closed: Promise<void>;
  close(): void;
}

/**
 * Engine side of the runner protocol: JSON lines over the container's attached stdin/stdout, requests correlated
 * by id. Once the connection closes, every pending and later request rejects with `RunnerGoneError`.
 */
export class RunnerConnection {
  readonly hello: Promise<RunnerHello>;
  /** Resolves once the connection is closed, for whatever reason. */
  readonly closed: Promise<void>;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private chunks: Buffer[] = [];
  private chunkBytes = 0;
  private gone?: Error;
  private resolveHello!: (hello: RunnerHello) => void;
  private rejectHello!: (err: Error) => void;

  constructor(private readonly stdio: RunnerStdio) {
    this.hello = new Promise<RunnerHello>((resolve, reject) => {
      this.resolveHello = resolve;
      this.rejectHello = reject;
    });
    this.hello.catch(() => undefined); // observed by whoever awaits it
    stdio.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    stdio.stdin.on('error', (err) => this.shutdown(new RunnerGoneError(`runner stdin: ${err.message}`)));
    this.closed = stdio.closed.then(() => this.shutdown(new RunnerGoneError('the runner connection closed')));
  }

  get isClosed(): boolean {
    return this.gone !== undefined;
  }

  /** Has the runner fork and exec `/bin/true`; rejects on timeout, close or a failed check. */
  async ping(timeoutMs: number): Promise<RunnerPong> {
    const { id, reply } = this.request({ op: 'ping' });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RunnerTimeoutError(`the runner did not answer a health check within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      const pong = (await Promise.race([reply, timeout])) as unknown as RunnerPong;
      if (!pong.ok) throw new RunnerProtocolError(`health check failed: ${pong.error ?? 'unknown'}`);
      return pong;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Starts a run; output arrives through `onOutput` (raw bytes, with the run's id) until `exit` resolves. */
  run(
    request: RunnerRunRequest,
    onOutput: (fd: 1 | 2, data: Buffer, id: number) => void,
  ): { id: number; exit: Promise<RunnerExit> } {
    const { id, reply } = this.request({ op: 'run', ...request }, onOutput);
    return { id, exit: reply as Promise<unknown> as Promise<RunnerExit> };
  }

  /** Asks the runner to end run `id` (kills everything it started). Fire and forget. */
  kill(id: number): void {
    this.write({ op: 'kill', id });
  }

  close(): void {
    this.stdio.close();
    this.shutdown(new RunnerGoneError('the runner connection was closed by the engine'));
  }

  private request(
    message: Record<string, unknown>,
    onOutput?: Pending['onOutput'],
  ): { id: number; reply: Promise<Record<string, unknown>> } {
    const id = this.nextId++;
    const reply = new Promise<Record<string, unknown>>((resolve, reject) => {
      if (this.gone) return reject(this.gone);
      this.pending.set(id, { resolve, reject, onOutput });
    });
    reply.catch(() => undefined); // observed by the caller
    this.write({ ...message, id });
    return { id, reply };
  }

  private write(message: Record<string, unknown>): void {
    if (this.gone) return;
    this.stdio.stdin.write(`${JSON.stringify(message)}\n`);
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      const line = this.chunks.length === 0 ? piece : Buffer.concat([...this.chunks, piece]);
      this.chunks = [];
      this.chunkBytes = 0;
      start = nl + 1;
      this.onLine(line);
      if (this.gone) return;
    }
    if (start < chunk.length) {
      this.chunks.push(chunk.subarray(start));
      this.chunkBytes += chunk.length - start;
      if (this.chunkBytes > MAX_LINE_BYTES) this.fail(`a runner message is over ${MAX_LINE_BYTES} bytes`);
    }
  }

  private onLine(line: Buffer): void {
    if (line.length === 0) return;
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line.toString('utf8')) as Record<string, unknown>;
    } catch {
      return this.fail(
        `the runner sent something that is not JSON: ${line.subarray(0, 80).toString('utf8')}`,
      );
    }
    const ev = message.ev;
    if (ev === 'hello') {
      if (message.protocol !== RUNNER_PROTOCOL) {
        return this.fail(`runner protocol ${String(message.protocol)}, engine speaks ${RUNNER_PROTOCOL}`);
      }
      return this.resolveHello(message as unknown as RunnerHello);
    }
    const pending = typeof message.id === 'number' ? this.pending.get(message.id) : undefined;
    if (!pending) return; // a late answer to a request given up on (timed-out ping)
    switch (ev) {
      case 'out':
        pending.onOutput?.(
          message.fd === 2 ? 2 : 1,
          Buffer.from(String(message.data), 'base64'),
          message.id as number,
        );
        return;
      case 'pong':
      case 'exit':
        this.pending.delete(message.id as number);
        return pending.resolve(message);
      case 'error':
        this.pending.delete(message.id as number);
        return pending.reject(
          new RunnerRefusedError(
            `runner refused: ${String(message.message)}`,
            typeof message.code === 'string' ? message.code : undefined,
            Array.isArray(message.workspace)
              ? [String(message.workspace[0]), String(message.workspace[1])]
              : undefined,
          ),
        );
      default:
        return this.fail(`unknown runner event ${JSON.stringify(ev)}`);
    }
  }

  private fail(reason: string): void {
    this.stdio.close();
    this.shutdown(new RunnerProtocolError(reason));
  }

  private shutdown(err: Error): void {
    if (this.gone) return;
    this.gone = err;
    this.rejectHello(err);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
