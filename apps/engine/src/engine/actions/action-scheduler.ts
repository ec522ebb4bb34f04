import { SwitchyardError } from '@switchyard/common';

export interface SchedulerLimits {
  /** Actions running at once across all sessions. */
  maxRunning: number;
  /** Actions admitted but not yet running, across all sessions. */
  maxQueued: number;
  /** Actions admitted but not yet running, per session. */
  maxQueuedPerSession: number;
}

/** Too much work is waiting; the caller should come back later (HTTP 429 with `Retry-After`). */
export class ActionQueueFullError extends SwitchyardError {
  readonly code = 'QUEUE_FULL';
  readonly kind = 'rate_limited' as const;
  override readonly retriable = true;
}

/** A place in the queue. `turn()` resolves when the action may run; `release()` frees it (idempotent). */
export interface SchedulerTicket {
  turn(signal?: AbortSignal): Promise<void>;
  release(): void;
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface SessionLane {
  running: number;
  queued: number;
  waiters: Waiter[];
}

/**
 * Admission and fairness for actions. Admission is decided at once (a full queue throws instead of making the
 * caller wait), then each action waits for a slot of its session (a session runs `concurrency` actions at a time,
 * 1 by default, so shell state never interleaves) and then for one of the engine's `maxRunning` slots. Both waits
 * are FIFO. Session slot first, engine slot second: a session blocked on itself never holds an engine slot.
 */
export class ActionScheduler {
  private readonly lanes = new Map<string, SessionLane>();
  private readonly engineWaiters: Waiter[] = [];
  private running = 0;
  private queued = 0;

  constructor(private readonly limits: SchedulerLimits) {}

  /** Throws `ActionQueueFullError` when the engine's or the session's queue is full. */
  admit(sessionId: string, concurrency: number): SchedulerTicket {
    const lane = this.lanes.get(sessionId) ?? { running: 0, queued: 0, waiters: [] };
    if (lane.queued >= this.limits.maxQueuedPerSession) {
      throw new ActionQueueFullError(
        `session ${sessionId} already has ${lane.queued} actions waiting (SWITCHYARD_SESSION_MAX_QUEUED); retry later`,
        { retryAfterSeconds: 1, queued: lane.queued },
      );
    }
    if (this.queued >= this.limits.maxQueued) {
      throw new ActionQueueFullError(
        `the engine already has ${this.queued} actions waiting (SWITCHYARD_MAX_QUEUED_ACTIONS); retry later`,
        { retryAfterSeconds: 1, queued: this.queued },
      );
    }
    this.lanes.set(sessionId, lane);
    lane.queued++;
    this.queued++;
    let state: 'queued' | 'session' | 'running' | 'released' = 'queued';
    const unqueue = () => {
      lane.queued--;
      this.queued--;
    };

    return {
      turn: async (signal?: AbortSignal) => {
        if (state !== 'queued') throw new Error('turn() called twice');
        try {
          if (lane.running < concurrency && lane.waiters.length === 0) lane.running++;
          else await this.wait(lane.waiters, signal);
          state = 'session';
          if (this.running < this.limits.maxRunning && this.engineWaiters.length === 0) this.running++;
          else await this.wait(this.engineWaiters, signal);
          state = 'running';
        } finally {
          unqueue();
          if (state === 'session') this.releaseSession(sessionId, lane, concurrency);
          if (state !== 'running') state = 'released';
        }
      },
      release: () => {
        if (state === 'released') return;
        if (state === 'queued') unqueue();
        if (state === 'running') {
          this.releaseEngine();
          this.releaseSession(sessionId, lane, concurrency);
        }
        state = 'released';
      },
    };
  }

  stats(): { running: number; queued: number } {
    return { running: this.running, queued: this.queued };
  }

  private wait(queue: Waiter[], signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject,
      };
      const onAbort = () => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
    });
  }

  /** Hands the slot straight to the next waiter, so a newcomer cannot overtake the queue. */
  private releaseEngine(): void {
    const next = this.engineWaiters.shift();
    if (next) next.resolve();
    else this.running--;
  }

  private releaseSession(sessionId: string, lane: SessionLane, concurrency: number): void {
    const next = lane.running <= concurrency ? lane.waiters.shift() : undefined;
    if (next) next.resolve();
    else lane.running--;
    if (lane.running === 0 && lane.queued === 0 && lane.waiters.length === 0) this.lanes.delete(sessionId);
  }
}
