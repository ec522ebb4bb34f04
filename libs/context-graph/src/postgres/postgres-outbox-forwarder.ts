import { Logger } from '@nestjs/common';
import { SwitchyardError } from '@switchyard/common';
import type { ContextGraph } from '../context-graph.port';
import {
  type ForwarderTimers,
  retryDelay,
  type RetryBackoffOptions,
  SYSTEM_TIMERS,
} from '../replication/forwarder-retry';
import type { ReplicaTarget } from '../replication/replication.types';
import { applyEntry, type OutboxEntry } from './outbox-ops';
import type { OutboxTransaction, PostgresOutbox } from './postgres-outbox';

export interface PostgresForwarderOptions extends RetryBackoffOptions {
  /** Most entries applied in one pass (one Postgres transaction holding the apply lock). Default 100. */
  batchEntries?: number;
  /**
   * How often to look for entries nobody announced to this replica (a notification missed while reconnecting,
   * a writer that died before forwarding). Default 250 ms.
   */
  pollIntervalMs?: number;
  timers?: ForwarderTimers;
}

/** Whether Neo4j is being kept up to date: `degraded` from a failed pass until one succeeds. */
export interface PostgresForwarderState {
  status: 'ok' | 'degraded';
  /** Failed passes in a row. */
  failures: number;
  error?: string;
}

type Pass = 'idle' | 'busy' | 'failed' | 'closed';

interface BatchOutcome {
  read: number;
  failure?: unknown;
}

/**
 * Applies the Postgres outbox to Neo4j: in a transaction holding the apply lock (so one replica at a time, and
 * strictly in id order), reads the oldest entries, calls each one's write on Neo4j with its arguments, and deletes
 * the entries applied. A crash between applying and deleting applies them again: every Neo4j write is idempotent
 * (see `PostgresOutboxGraph`). A write Neo4j refuses (a `SwitchyardError` such as `SessionNotRecordedError`: the
 * caller's mistake, or an entry applied once already) is logged and dropped, as retrying cannot change it; any other
 * failure stops the pass, keeps the entry and retries with backoff and jitter (logged once per outage).
 *
 * Wakes on `wake()` (a local write), on the listener (a write of any replica) and on a poll; while failing it only
 * retries on its backoff timer, checking Neo4j answers before taking the lock, so a replica cut off from Neo4j
 * does not hold up the others.
 */
export class PostgresOutboxForwarder {
  private readonly logger = new Logger('PostgresOutboxForwarder');
  private readonly timers: ForwarderTimers;
  private pumping: Promise<Pass> | undefined;
  private again = false;
  private retryTimer: unknown;
  private pollTimer: unknown;
  private failures = 0;
  private lastError: string | undefined;
  private started = false;
  private closed = false;

  constructor(
    private readonly outbox: PostgresOutbox,
    private readonly target: ContextGraph & Pick<ReplicaTarget, 'ping'>,
    private readonly options: PostgresForwarderOptions = {},
  ) {
    this.timers = options.timers ?? SYSTEM_TIMERS;
  }

  /** Starts polling and forwards what the outbox already holds. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.schedulePoll();
    this.wake();
  }

  /** Entries were written (here or by another replica): forward them now, unless waiting out a failure. */
  wake(): void {
    if (!this.started || this.closed || this.retryTimer !== undefined) return;
    void this.pump();
  }

  state(): PostgresForwarderState {
    return {
      status: this.failures > 0 ? 'degraded' : 'ok',
      failures: this.failures,
      ...(this.lastError !== undefined && { error: this.lastError }),
    };
  }

  /**
   * Waits until every entry the outbox holds now has been applied (by this replica or another), for at most
   * `timeoutMs`; true if they have. Forwards itself when it can take the lock, else waits for whoever holds it.
   */
  async catchUp(timeoutMs: number): Promise<boolean> {
    const last = await this.outbox.lastId();
    if (last === undefined) return true;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.closed) return false;
      // Joins a pass in flight without asking for another: the check below says whether one is needed.
      const pass = this.retryTimer === undefined ? await (this.pumping ?? this.pump()) : undefined;
      if (!(await this.outbox.holdsUpTo(last))) return true;
      const left = deadline - Date.now();
      if (this.closed || left <= 0) return false;
      // An idle pass missed entries committed after it looked: look again at once. Otherwise another replica is
      // applying, or applying fails here: give it a moment.
      if (pass !== 'idle')
        await new Promise<void>((resolve) => this.timers.setTimeout(resolve, Math.min(20, left)));
    }
  }

  /** Stops: no new passes, the one in flight finishes. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of [this.retryTimer, this.pollTimer]) {
      if (timer !== undefined) this.timers.clearTimeout(timer);
    }
    this.retryTimer = this.pollTimer = undefined;
    await this.pumping;
  }

  /** Runs passes until the outbox is empty (or another replica is applying, or a pass fails); joins a running one. */
  private pump(): Promise<Pass> {
    if (this.pumping) {
      this.again = true;
      return this.pumping;
    }
    const run = this.loop().finally(() => {
      this.pumping = undefined;
      if (this.again && !this.closed && this.retryTimer === undefined) void this.pump();
    });
    this.pumping = run;
    return run;
  }

  private async loop(): Promise<Pass> {
    const batch = this.options.batchEntries ?? 100;
    for (;;) {
      if (this.closed) return 'closed';
      this.again = false;
      let outcome: { locked: false } | { locked: true; value: BatchOutcome };
      try {
        // While failing, check Neo4j answers before taking the lock another replica could use meanwhile.
        if (this.failures > 0) await this.target.ping();
        outcome = await this.outbox.withApplyLock((tx) => this.applyBatch(tx, batch));
      } catch (error) {
        this.failed(error);
        return 'failed';
      }
      if (!outcome.locked) return 'busy';
      const { read, failure } = outcome.value;
      if (failure !== undefined) {
        this.failed(failure);
        return 'failed';
      }
      if (this.failures > 0) this.recovered();
      if (read < batch && !this.again) return 'idle';
    }
  }

  /**
   * Applies the oldest entries and deletes those applied (or refused). Order matters within a session, not between
   * sessions: each session's entries are applied in order in a lane of its own, up to `LANES` sessions at once, so a
   * busy Neo4j round trip is paid once per session and not once per entry. A fork (or an entry of no session) links
   * sessions: it is applied alone, after everything before it, and before anything after it. A lane stops at its
   * first failure (its later entries stay for the next pass, still in order); the others finish their run, and the
   * batch stops at the next fork.
   */
  private async applyBatch(tx: OutboxTransaction, limit: number): Promise<BatchOutcome> {
    const entries = await tx.oldest(limit);
    const done: string[] = [];
    let failure: unknown;
    for (const run of runsBetweenBarriers(entries)) {
      if (this.closed || failure !== undefined) break;
      const lanes = [...groupBySession(run).values()];
      const next = (): OutboxEntry[] | undefined => lanes.shift();
      const worker = async (): Promise<void> => {
        for (let lane = next(); lane; lane = next()) {
          for (const entry of lane) {
            if (this.closed) return; // what is left stays for the next start, or another replica
            const outcome = await this.applyOne(entry);
            if (outcome !== 'applied') {
              failure ??= outcome.failure;
              break;
            }
            done.push(entry.id);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(LANES, lanes.length) }, worker));
    }
    await tx.remove(done);
    return { read: entries.length, failure };
  }

  /** One entry on Neo4j: applied (or refused by the graph, which is logged and counts as done), or a failure. */
  private async applyOne(entry: OutboxEntry): Promise<'applied' | { failure: unknown }> {
    try {
      await applyEntry(this.target, entry);
    } catch (error) {
      if (!refused(error)) return { failure: error };
      this.logger.warn({
        msg: 'Neo4j refused an outbox entry; dropped (a write the graph does not accept, or one applied already)',
        entry: entry.id,
        op: entry.op,
        sessionId: entry.sessionId,
        code: error.code,
        error: error.message,
      });
    }
    return 'applied';
  }

  private failed(error: unknown): void {
    this.failures++;
    this.lastError = error instanceof Error ? error.message : String(error);
    if (this.failures === 1) {
      this.logger.warn({
        msg: 'cannot apply the context graph outbox to Neo4j; records wait in Postgres, retrying with backoff',
        error: this.lastError,
      });
    }
    if (this.closed || this.retryTimer !== undefined) return;
    const delay = retryDelay(this.failures, this.options);
    this.retryTimer = this.timers.setTimeout(() => {
      this.retryTimer = undefined;
      void this.pump();
    }, delay);
  }

  private recovered(): void {
    this.logger.log({
      msg: 'applying the context graph outbox to Neo4j again',
      failuresBefore: this.failures,
    });
    this.failures = 0;
    this.lastError = undefined;
  }

  private schedulePoll(): void {
    if (this.closed) return;
    this.pollTimer = this.timers.setTimeout(() => {
      this.pollTimer = undefined;
      this.wake();
      this.schedulePoll();
    }, this.options.pollIntervalMs ?? 250);
  }
}

/**
 * A refusal by the graph itself: retrying the same write gives the same answer. An `unavailable` error (the store
 * closing, Neo4j unreachable) is a failure to retry instead.
 */
function refused(error: unknown): error is SwitchyardError {
  return error instanceof SwitchyardError && error.kind !== 'unavailable';
}

/** Sessions whose entries are applied at once, each in order. */
const LANES = 16;

/** Entries that link sessions (a fork names its origin) or belong to none: applied alone, in their place. */
function isBarrier(entry: OutboxEntry): boolean {
  return entry.op === 'recordFork' || entry.sessionId === null;
}

/** The entries cut into runs: a barrier is a run of its own. */
function runsBetweenBarriers(entries: readonly OutboxEntry[]): OutboxEntry[][] {
  const runs: OutboxEntry[][] = [];
  let current: OutboxEntry[] = [];
  for (const entry of entries) {
    if (isBarrier(entry)) {
      if (current.length > 0) runs.push(current);
      runs.push([entry]);
      current = [];
    } else current.push(entry);
  }
  if (current.length > 0) runs.push(current);
  return runs;
}

/** A run's entries by session, each session's in their order. */
function groupBySession(run: readonly OutboxEntry[]): Map<string | null, OutboxEntry[]> {
  const lanes = new Map<string | null, OutboxEntry[]>();
  for (const entry of run) {
    const lane = lanes.get(entry.sessionId);
    if (lane) lane.push(entry);
    else lanes.set(entry.sessionId, [entry]);
  }
  return lanes;
}
