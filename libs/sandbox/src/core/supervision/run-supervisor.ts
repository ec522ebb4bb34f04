import { type Clock, systemClock } from '@switchyard/common';
import { OutputCollector } from '../output-collector';
import type { TierJob, TierRunResult } from '../sandbox.types';

/** Why a tier ended a run before the code did. */
export type KillReason = 'timeout' | 'output' | 'abort';

export interface RunSupervisorOptions {
  /** The run's output caps, redaction and live output callback. */
  job: Pick<TierJob, 'output' | 'onOutput'>;
  /** Ends the run: called once, with the first reason; never for a run that ends by itself. */
  kill: (reason: KillReason) => void;
  /**
   * A backstop for a kill that does not take (a stuck pipe, a daemon hiccup): `close` is called once, `afterMs` past
   * the kill, unless the run was {@link RunSupervisor.stop}ped by then.
   */
  forceClose?: { afterMs: number; close: () => void };
  clock?: Clock;
  /** When the run began (`clock.monotonic()`), for `durationMs`. Default: now. */
  startedAt?: number;
}

/**
 * The supervision every tier gives a run: its stdout and stderr in `OutputCollector`s (caps, redaction, live
 * output), the timeout, the caller's abort, and the one reason the tier killed it. A tier makes one per run, feeds
 * it the output chunks, starts enforcing with {@link watch} once the code runs, and {@link stop}s it when the run
 * has ended; the supervisor calls the tier's kill function at most once.
 */
export class RunSupervisor {
  readonly stdout: OutputCollector;
  readonly stderr: OutputCollector;
  private readonly clock: Clock;
  private readonly startedAt: number;
  private killedFor?: KillReason;
  private timer?: NodeJS.Timeout;
  private forceTimer?: NodeJS.Timeout;
  private signal?: AbortSignal;
  private readonly onAbort = () => this.kill('abort');

  constructor(private readonly options: RunSupervisorOptions) {
    const { job } = options;
    this.stdout = new OutputCollector(job.output, (t) => job.onOutput?.('stdout', t));
    this.stderr = new OutputCollector(job.output, (t) => job.onOutput?.('stderr', t));
    this.clock = options.clock ?? systemClock;
    this.startedAt = options.startedAt ?? this.clock.monotonic();
  }

  /** Why the tier killed the run, if it did. */
  get reason(): KillReason | undefined {
    return this.killedFor;
  }

  /**
   * Takes a chunk of `stream`. Returns false once the stream is past a cap: the rest of it is unwanted, and the run
   * is killed (`output`).
   */
  push(stream: 'stdout' | 'stderr', chunk: Buffer): boolean {
    if ((stream === 'stdout' ? this.stdout : this.stderr).push(chunk)) return true;
    this.kill('output');
    return false;
  }

  /**
   * Starts enforcing: kills the run `timeoutMs` from now (when given) and when `signal` fires, at once if it has
   * already.
   */
  watch(limits: { timeoutMs?: number; signal?: AbortSignal }): void {
    if (limits.timeoutMs !== undefined) this.timer = setTimeout(() => this.kill('timeout'), limits.timeoutMs);
    const { signal } = limits;
    if (!signal) return;
    this.signal = signal;
    if (signal.aborted) this.onAbort();
    else signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Kills the run for `reason`, unless it was killed already. */
  kill(reason: KillReason): void {
    if (this.killedFor) return;
    this.killedFor = reason;
    const force = this.options.forceClose;
    if (force) this.forceTimer = setTimeout(force.close, force.afterMs);
    this.options.kill(reason);
  }

  /** The run has ended: clears the timers and the abort listener. Idempotent. */
  stop(): void {
    clearTimeout(this.timer);
    clearTimeout(this.forceTimer);
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  elapsedMs(): number {
    return Math.round(this.clock.monotonic() - this.startedAt);
  }

  /** What was collected so far (output, truncation, redaction) and the elapsed time; says nothing of a kill. */
  collected(): TierRunResult {
    return {
      timedOut: false,
      stdout: this.stdout.text(),
      stderr: this.stderr.text(),
      truncated: { stdout: this.stdout.truncated, stderr: this.stderr.truncated },
      redacted: this.stdout.redacted || this.stderr.redacted,
      durationMs: this.elapsedMs(),
    };
  }

  /** {@link collected}, plus the kill: `timedOut` when the timeout ended the run, `aborted` when the caller did. */
  result(): TierRunResult {
    const result = { ...this.collected(), timedOut: this.killedFor === 'timeout' };
    if (this.killedFor === 'abort') result.aborted = true;
    return result;
  }
}
