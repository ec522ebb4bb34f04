import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import type { Logger } from '@nestjs/common';

/** Raised when the helper cannot answer (cannot start, died, hung): the caller falls back to another way. */
export class HelperUnavailable extends Error {}

export interface JsonLineHelperOptions {
  /** For messages: `the <name> exited…`. */
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** How long it may take to say it is ready; past that it is killed and counted as unable to run here. */
  startTimeoutMs: number;
  /** How long one request may wait for its reply; past that the helper is killed (a fresh one serves the next). */
  requestTimeoutMs: number;
  logger: Logger;
}

interface Pending {
  resolve(reply: object): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  /** The process it was sent to: a helper that dies takes only its own requests with it. */
  child: ChildProcessWithoutNullStreams;
}

/**
 * A long-lived child process that answers JSON requests: one per line on its stdin, each carrying an `id`; one reply
 * per line on its stdout with the same `id`, in any order. It writes `{"ready":true}` once it can serve. Started on
 * first use and again after it dies; one that cannot start (no interpreter) is not tried again, and every call
 * rejects with `HelperUnavailable` so that the caller falls back. Its pipes do not keep the event loop alive while
 * nothing is pending.
 *
 * @internal The process client under `HelperLoopHost`; the pooled tier's mount helper (`libs/sandbox`) speaks the
 * same protocol.
 */
export class JsonLineHelper<Request extends object, Reply extends object> {
  private child?: ChildProcessWithoutNullStreams;
  private starting?: Promise<ChildProcessWithoutNullStreams | undefined>;
  private unavailable = false;
  private closed = false;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(private readonly options: JsonLineHelperOptions) {}

  /** Starts the helper unless it runs; false when it cannot run here. */
  async start(): Promise<boolean> {
    return (await this.running()) !== undefined;
  }

  /** True once closed, or once the helper turned out unable to run here: calls reject at once. */
  get gone(): boolean {
    return this.closed || this.unavailable;
  }

  /** Sends one request; rejects with `HelperUnavailable` when the helper cannot answer it. */
  async call(request: Request): Promise<Reply> {
    const child = await this.running();
    if (!child) throw new HelperUnavailable(`the ${this.options.name} is not running`);
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new HelperUnavailable(
            `the ${this.options.name} did not answer within ${this.options.requestTimeoutMs} ms`,
          ),
        );
        // Stuck in a syscall: a fresh one serves the next request.
        if (this.child === child) this.child = undefined;
        child.kill('SIGKILL');
      }, this.options.requestTimeoutMs);
      this.pending.set(id, { resolve, reject, timer, child });
      this.setBusy(child, true);
      child.stdin.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  /** Stops the helper (it exits once its stdin ends); later calls reject. */
  close(): void {
    this.closed = true;
    this.child?.stdin.end();
    this.child = undefined;
  }

  private running(): Promise<ChildProcessWithoutNullStreams | undefined> {
    if (this.closed || this.unavailable) return Promise.resolve(undefined);
    if (this.child) return Promise.resolve(this.child);
    this.starting ??= this.spawnHelper().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private spawnHelper(): Promise<ChildProcessWithoutNullStreams | undefined> {
    const { name, command, args, env, startTimeoutMs, logger } = this.options;
    return new Promise((resolve) => {
      const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
      let ready = false;
      let settled = false;
      let stderr = '';
      let buffered = '';
      const giveUp = (why: string) => {
        if (ready || settled) return;
        settled = true;
        this.unavailable = true;
        logger.warn(`no ${name} (${why}): using the slower way from now on`);
        resolve(undefined);
      };
      const startTimer = setTimeout(() => child.kill('SIGKILL'), startTimeoutMs);
      child.on('error', (err) => giveUp(err.message));
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-1000)));
      child.stdin.on('error', () => undefined); // reported through 'close'
      child.on('close', (code, signal) => {
        clearTimeout(startTimer);
        if (this.child === child) this.child = undefined;
        const why = `the ${name} exited (${signal ?? `code ${code}`})${stderr ? `: ${stderr.trim()}` : ''}`;
        giveUp(why);
        if (ready && !this.closed) logger.warn(`${why}; started again on the next call`);
        for (const [id, p] of this.pending) {
          if (p.child !== child) continue;
          clearTimeout(p.timer);
          p.reject(new HelperUnavailable(why));
          this.pending.delete(id);
        }
      });
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          let message: { id?: number; ready?: boolean };
          try {
            message = JSON.parse(line) as typeof message;
          } catch {
            stderr += `unexpected output: ${line.slice(0, 200)}`;
            child.kill('SIGKILL');
            return;
          }
          if (message.ready) {
            ready = true;
            clearTimeout(startTimer);
            this.child = child;
            resolve(child);
          } else this.settle(message);
        }
        if (![...this.pending.values()].some((p) => p.child === child)) this.setBusy(child, false);
      });
    });
  }

  private settle(message: { id?: number }): void {
    const p = this.pending.get(message.id ?? -1);
    if (!p) return;
    this.pending.delete(message.id!);
    clearTimeout(p.timer);
    p.resolve(message);
  }

  /** An idle helper must not keep a process alive that has nothing else to do (a script, a test run). */
  private setBusy(child: ChildProcessWithoutNullStreams, busy: boolean): void {
    const handles = [child, child.stdin, child.stdout, child.stderr] as unknown as Socket[];
    for (const h of handles) {
      if (busy) h.ref();
      else h.unref();
    }
  }
}
