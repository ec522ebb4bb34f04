import { Injectable } from '@nestjs/common';

/** A running (or queued) action: how to stop it, and when it has been recorded as ended. */
export interface InFlightAction {
  abort: AbortController;
  done: Promise<unknown>;
}

/** Every action of this engine that is admitted and not yet recorded as ended, by session. */
@Injectable()
export class InFlightActions {
  private readonly bySession = new Map<string, Map<string, InFlightAction>>();

  add(sessionId: string, actionId: string, entry: InFlightAction): void {
    let m = this.bySession.get(sessionId);
    if (!m) {
      m = new Map<string, InFlightAction>();
      this.bySession.set(sessionId, m);
    }
    m.set(actionId, entry);
  }

  delete(sessionId: string, actionId: string): void {
    const m = this.bySession.get(sessionId);
    m?.delete(actionId);
    if (m?.size === 0) this.bySession.delete(sessionId);
  }

  get(sessionId: string, actionId: string): InFlightAction | undefined {
    return this.bySession.get(sessionId)?.get(actionId);
  }

  get size(): number {
    let n = 0;
    for (const m of this.bySession.values()) n += m.size;
    return n;
  }

  /** Aborts a session's actions and waits until each has been recorded. */
  async cancelSession(sessionId: string, reason: Error): Promise<void> {
    const entries = [...(this.bySession.get(sessionId)?.values() ?? [])];
    for (const e of entries) e.abort.abort(reason);
    await Promise.allSettled(entries.map((e) => e.done));
  }

  /**
   * Lets every action finish for up to `graceMs`, then aborts the rest and waits until each is recorded. Answers how
   * many finished within the grace period and how many were cancelled.
   */
  async drain(graceMs: number, reason: Error): Promise<{ finished: number; cancelled: number }> {
    const all = [...this.bySession.values()].flatMap((m) => [...m.values()]);
    if (all.length === 0) return { finished: 0, cancelled: 0 };
    let ended = 0;
    for (const a of all) void a.done.finally(() => ended++);
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([Promise.allSettled(all.map((a) => a.done)), grace]);
    clearTimeout(timer);
    const finished = ended;
    for (const a of all) a.abort.abort(reason);
    await Promise.allSettled(all.map((a) => a.done));
    return { finished, cancelled: all.length - finished };
  }
}
