import { abortable } from './deadlines';

/**
 * Runs each session's actions one at a time (a session's tabs are shared state), and knows which
 * sessions have actions queued or running: those are never evicted or idled out.
 */
export class SessionLock {
  /** The last action queued per session; the next one waits for it. */
  private readonly tails = new Map<string, Promise<void>>();
  /** Actions queued or running per session. */
  private readonly pending = new Map<string, number>();

  /** Whether the session has an action queued or running. */
  busy(sessionId: string): boolean {
    return this.pending.has(sessionId);
  }

  /**
   * Runs `fn` once the session's earlier actions are done. Waiting stops with `AbortedError` when
   * `signal` fires; the session counts as busy from the call until `fn` settles.
   */
  async run<T>(sessionId: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    this.pending.set(sessionId, (this.pending.get(sessionId) ?? 0) + 1);
    const previous = this.tails.get(sessionId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const chained = previous.then(() => mine);
    this.tails.set(sessionId, chained);
    try {
      await abortable(previous, signal);
      return await fn();
    } finally {
      release();
      if (this.tails.get(sessionId) === chained) this.tails.delete(sessionId);
      const n = (this.pending.get(sessionId) ?? 1) - 1;
      if (n <= 0) this.pending.delete(sessionId);
      else this.pending.set(sessionId, n);
    }
  }
}
