import type { DatabaseSync } from 'node:sqlite';

interface PendingWrite {
  write: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };
type BatchResult =
  { committed: true; outcomes: Outcome[] } | { committed: false; error: unknown; begun: boolean };

export interface GroupCommitStats {
  /** Committed transactions (each one made durable by one fsync). */
  transactions: number;
  /** Writes committed by them; `writes / transactions` is the mean batch size. */
  writes: number;
}

/**
 * Group commit for a synchronous SQLite connection.
 *
 * Every durable commit costs an fsync, which caps one-write-per-transaction at a few hundred
 * writes/s. Instead, writes requested during one turn of the event loop are applied in a single
 * transaction on `setImmediate`, and their promises settle only after that transaction commits.
 *
 * Each write runs inside its own SAVEPOINT, so a write that throws (constraint, domain error) is rolled
 * back alone and rejects alone. If the transaction as a whole fails (COMMIT error, or SQLite aborting the
 * transaction), the batch is rolled back and its writes are replayed one transaction each, so one bad
 * write cannot fail its neighbours. Writes must therefore be re-runnable closures over the database.
 */
export class GroupCommitQueue {
  private pending: PendingWrite[] = [];
  private timer: NodeJS.Immediate | undefined;
  private readonly counters: GroupCommitStats = { transactions: 0, writes: 0 };

  constructor(
    private readonly db: DatabaseSync,
    /** Bounds how long one flush blocks the event loop. */
    private readonly maxBatch = 500,
    /**
     * Makes committed transactions durable off the event loop (an fdatasync of the WAL on the thread pool).
     * When given, a batch's promises settle only after a sync that began after its COMMIT has finished.
     */
    private readonly sync?: () => Promise<void>,
  ) {}

  /** Queues `write`; resolves with its return value once the transaction holding it has committed. */
  enqueue<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ write, resolve: resolve as (value: unknown) => void, reject });
      this.timer ??= setImmediate(() => this.flushOne());
    });
  }

  /** Commits everything queued, synchronously. Used by `close()`. */
  drain(): void {
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
    while (this.pending.length > 0) this.run(this.pending.splice(0, this.maxBatch));
  }

  stats(): GroupCommitStats {
    return { ...this.counters };
  }

  private flushOne(): void {
    this.timer = undefined;
    this.run(this.pending.splice(0, this.maxBatch));
    // Yield between batches so reads and I/O are not starved behind a long queue.
    if (this.pending.length > 0) this.timer = setImmediate(() => this.flushOne());
  }

  private run(batch: PendingWrite[]): void {
    const result = this.commit(batch);
    if (result.committed) {
      const settle = (): void =>
        batch.forEach((w, i) => {
          const outcome = result.outcomes[i];
          if (outcome.ok) w.resolve(outcome.value);
          else w.reject(outcome.error);
        });
      if (!this.sync) return settle();
      this.sync().then(settle, (error: unknown) => batch.forEach((w) => w.reject(error)));
    } else if (batch.length > 1 && result.begun) {
      for (const w of batch) this.run([w]);
    } else {
      // BEGIN itself failed (e.g. locked past busy_timeout): replaying one by one would only wait longer.
      for (const w of batch) w.reject(result.error);
    }
  }

  private commit(batch: PendingWrite[]): BatchResult {
    let begun = false;
    try {
      this.db.exec('BEGIN IMMEDIATE');
      begun = true;
      const outcomes: Outcome[] = [];
      for (const w of batch) {
        this.db.exec('SAVEPOINT w');
        try {
          outcomes.push({ ok: true, value: w.write() });
          this.db.exec('RELEASE w');
        } catch (error) {
          // Some errors (SQLITE_FULL, IOERR, …) make SQLite roll back the whole transaction,
          // taking the earlier writes of the batch with it: treat that as a batch failure.
          if (!this.db.isTransaction) throw error;
          this.db.exec('ROLLBACK TO w; RELEASE w');
          outcomes.push({ ok: false, error });
        }
      }
      this.db.exec('COMMIT');
      this.counters.transactions++;
      this.counters.writes += outcomes.filter((o) => o.ok).length;
      return { committed: true, outcomes };
    } catch (error) {
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      return { committed: false, error, begun };
    }
  }
}
