import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { distinctSessionIds } from '../context-graph.activity';
import { checkpointNodeId, checkpointState } from '../context-graph.checkpoints';
import { ContextGraphClosedError } from '../context-graph.errors';
import { ContextGraph } from '../context-graph.port';
import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  ApprovalDecision,
  FailureContext,
  FailureContextQuery,
  FileLineage,
  GraphFilter,
  GraphHealth,
  GraphView,
  ListActionsQuery,
  Page,
  PlanGraphRecord,
  SessionActivity,
  SessionRecord,
} from '../context-graph.types';
import type { CheckpointRecord, CheckpointState, ForkRecord, RestoreRecord } from '../checkpoint.types';
import type { OutboxBatch } from '../replication/replication.types';
import { GroupCommitQueue, type GroupCommitStats } from './group-commit-queue';
import { decideApproval } from './sqlite-approvals';
import {
  insertCheckpoint,
  insertFork,
  insertRestore,
  markCheckpointDeleted,
  readCheckpoints,
} from './sqlite-checkpoints';
import {
  appendRunningActions,
  appendToOutbox,
  countOutbox,
  deleteOutboxUpTo,
  outboxHoldsOwn,
  outboxHoldsRelated,
  type OutboxKind,
  readOutboxBatch,
  setUpOutbox,
} from './sqlite-outbox';
import {
  readActionPage,
  readFailureContext,
  readFileLineage,
  readLastActionSeq,
  readSessionActivity,
  readSessionGraph,
} from './sqlite-queries';
import { readAction } from './sqlite-rows';
import { applySchema } from './sqlite-schema';
import {
  completeAction,
  insertActionStart,
  insertSession,
  interruptRunning,
  markSessionEnded,
  writePlan,
} from './sqlite-writes';
import { WalSync } from './wal-sync';

export interface SqliteContextGraphOptions {
  /** Database file; its parent directory is created. */
  sqlitePath: string;
  /** How long a write waits for a lock held by another connection. Default 5000. */
  busyTimeoutMs?: number;
  /** Most writes committed in one transaction. Default 500. */
  maxBatchSize?: number;
  /**
   * Keep a replication outbox: every write also appends, in its own transaction, the ids of what it changed,
   * for a forwarder to copy to another store (see `ReplicatedContextGraph`). Turning it on for a file that
   * already holds records queues all of them once.
   */
  outbox?: boolean;
}

/** Connection settings as SQLite reports them, for diagnostics. */
export interface SqlitePragmas {
  journalMode: string;
  /** 2 = FULL. */
  synchronous: number;
  foreignKeys: boolean;
  busyTimeoutMs: number;
}

/**
 * Embedded `ContextGraph` adapter: one SQLite file in WAL mode; every acknowledged write is on disk
 * (`synchronous=NORMAL` plus an fdatasync of the WAL after each group commit, see `WalSync`).
 *
 * Writes go through a {@link GroupCommitQueue} (one fsync per batch of concurrent writes); reads run
 * directly on the same connection and see every write whose promise has resolved.
 *
 * With `outbox: true` it is also the durable outbox of a replicated graph: each write appends the ids it
 * changed to the `outbox` table in the same transaction, and `outboxBatch`/`outboxAck` let a forwarder copy
 * them elsewhere in order.
 *
 * This class owns the connection, the write queue and the statement cache; the SQL lives in the files beside
 * it: the tables (sqlite-schema), rows to records (sqlite-rows), writes (sqlite-writes), queries
 * (sqlite-queries), the outbox (sqlite-outbox), kernels and processes (sqlite-stateful), checkpoints and forks
 * (sqlite-checkpoints), approvals and calls (sqlite-approvals).
 */
export class SqliteContextGraph extends ContextGraph {
  private db: DatabaseSync | undefined;
  private wal: WalSync | undefined;
  private queue: GroupCommitQueue | undefined;
  private readonly statements = new Map<string, StatementSync>();
  /** `sql` as a function, for the readers and writers kept in the files beside this one. */
  private readonly prepared = (sql: string): StatementSync => this.sql(sql);
  private closed = false;

  constructor(private readonly options: SqliteContextGraphOptions) {
    super();
  }

  override async init(): Promise<void> {
    if (this.closed) throw new ContextGraphClosedError();
    if (this.db) return;
    const path = resolve(this.options.sqlitePath);
    mkdirSync(dirname(path), { recursive: true });
    const db = new DatabaseSync(path);
    try {
      db.exec(`PRAGMA journal_mode = WAL;
        PRAGMA synchronous = NORMAL;
        PRAGMA foreign_keys = ON;
        PRAGMA busy_timeout = ${Math.trunc(this.options.busyTimeoutMs ?? 5000)};`);
      db.exec('BEGIN IMMEDIATE');
      applySchema(db);
      setUpOutbox(db, this.options.outbox);
      db.exec('COMMIT');
    } catch (error) {
      if (db.isTransaction) db.exec('ROLLBACK');
      db.close();
      throw error;
    }
    this.db = db;
    this.wal = new WalSync(`${path}-wal`);
    await this.wal.open();
    this.queue = new GroupCommitQueue(db, this.options.maxBatchSize ?? 500, () => this.wal!.sync());
  }

  override recordSession(session: SessionRecord): Promise<void> {
    return this.write(() => {
      insertSession(this.prepared, session);
      this.queueForReplica('session', session.id, session.id);
    });
  }

  override recordActionStarted(a: ActionStart): Promise<void> {
    return this.write(() => {
      insertActionStart(this.prepared, a);
      this.queueForReplica('action', a.id, a.sessionId);
    });
  }

  override recordActionWhole(a: ActionStart, c: ActionCompletion): Promise<void> {
    return this.write(() => {
      insertActionStart(this.prepared, a);
      completeAction(this.prepared, a.id, c);
      this.queueForReplica('action', a.id, a.sessionId);
    });
  }

  /** The decision travels with its action: the action's outbox entry carries its approval. */
  override recordApprovalDecision(actionId: string, decision: ApprovalDecision): Promise<void> {
    return this.write(() => {
      const sessionId = decideApproval(this.prepared, actionId, decision);
      this.queueForReplica('action', actionId, sessionId);
    });
  }

  override recordActionCompleted(actionId: string, c: ActionCompletion): Promise<void> {
    return this.write(() => {
      const sessionId = completeAction(this.prepared, actionId, c);
      this.queueForReplica('action', actionId, sessionId);
    });
  }

  override recordPlan(record: PlanGraphRecord): Promise<void> {
    return this.write(() => {
      const plan = writePlan(this.prepared, record);
      this.queueForReplica('plan', plan.id, plan.sessionId);
    });
  }

  override recordCheckpoint(c: CheckpointRecord): Promise<void> {
    return this.write(() => {
      if (insertCheckpoint(this.prepared, c)) {
        this.queueForReplica('checkpoint', checkpointNodeId(c.id), c.sessionId);
      }
    });
  }

  override recordCheckpointDeleted(
    sessionId: string,
    checkpointId: string,
    deletedAt: string,
    reason: 'deleted' | 'pruned',
  ): Promise<void> {
    return this.write(() => {
      markCheckpointDeleted(this.prepared, sessionId, checkpointId, deletedAt, reason);
      this.queueForReplica('checkpoint', checkpointNodeId(checkpointId), sessionId);
    });
  }

  /** Restores travel with their checkpoint: its outbox entry carries every restore of it. */
  override recordRestore(r: RestoreRecord): Promise<void> {
    return this.write(() => {
      if (insertRestore(this.prepared, r)) {
        this.queueForReplica('checkpoint', checkpointNodeId(r.checkpointId), r.sessionId);
      }
    });
  }

  override recordFork(f: ForkRecord): Promise<void> {
    return this.write(() => {
      if (insertFork(this.prepared, f)) this.queueForReplica('fork', f.sessionId, f.sessionId);
    });
  }

  override async getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined> {
    return readAction(this.prepared, sessionId, actionId);
  }

  override async lastActionSeq(sessionId: string): Promise<number> {
    return readLastActionSeq(this.prepared, sessionId);
  }

  override async getCheckpoint(
    sessionId: string,
    checkpointId: string,
  ): Promise<CheckpointState | undefined> {
    const [stored] = readCheckpoints(this.prepared, 'id', checkpointNodeId(checkpointId));
    return stored && stored.sessionId === sessionId ? checkpointState(stored) : undefined;
  }

  override async listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>> {
    return readActionPage(this.prepared, sessionId, query);
  }

  override async sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView> {
    return readSessionGraph(this.prepared, sessionId, filter);
  }

  override async failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined> {
    return readFailureContext(this.prepared, sessionId, actionId, query);
  }

  override async fileLineage(sessionId: string, path: string): Promise<FileLineage> {
    return readFileLineage(this.prepared, sessionId, path);
  }

  override async sessionActivity(sessionIds: readonly string[]): Promise<Map<string, SessionActivity>> {
    const ids = distinctSessionIds(sessionIds);
    if (ids.length === 0) {
      this.conn(); // a closed store rejects every call, even one it need not query for
      return new Map();
    }
    return readSessionActivity(this.prepared, ids);
  }

  override async health(): Promise<GraphHealth> {
    if (this.closed) throw new ContextGraphClosedError();
    return { store: 'embedded', status: 'ok', backlog: 0 };
  }

  override markRunningInterrupted(endedAt: string, sessionIds?: readonly string[]): Promise<number> {
    return this.write(() => {
      if (this.options.outbox) appendRunningActions(this.prepared, sessionIds);
      return interruptRunning(this.prepared, endedAt, sessionIds);
    });
  }

  override endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void> {
    return this.write(() => {
      markSessionEnded(this.prepared, sessionId, endedAt, reason);
      this.queueForReplica('session', sessionId, sessionId);
    });
  }

  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true; // new writes reject from here; queued ones still commit below
    const { db, queue } = this;
    if (!db || !queue) return;
    try {
      queue.drain();
      // Let the syncs of the last batches finish before the connection goes.
      await this.wal?.close();
    } finally {
      this.statements.clear();
      this.db = this.queue = this.wal = undefined;
      db.close();
    }
  }

  /** What the connection actually runs with; pragmas fail silently, so this is how to check them. */
  pragmas(): SqlitePragmas {
    const get = (name: string): unknown =>
      Object.values(this.conn().prepare(`PRAGMA ${name}`).get() ?? {})[0];
    return {
      journalMode: String(get('journal_mode')),
      synchronous: Number(get('synchronous')),
      foreignKeys: Number(get('foreign_keys')) === 1,
      busyTimeoutMs: Number(get('busy_timeout')),
    };
  }

  /** Group-commit counters since `init()`. */
  writeStats(): GroupCommitStats {
    return this.queue?.stats() ?? { transactions: 0, writes: 0 };
  }

  /** Outbox entries not yet acknowledged (0 without an outbox). */
  outboxSize(): number {
    if (!this.options.outbox) return 0;
    return countOutbox(this.prepared);
  }

  /**
   * Whether any outbox entry is waiting that an answer about this session draws on: the session's own, or those
   * of its fork origins (its lineage) and of the sessions forked from it (its graph).
   */
  outboxHolds(sessionId: string): boolean {
    return this.options.outbox === true && outboxHoldsRelated(this.prepared, sessionId);
  }

  /**
   * Whether any outbox entry of these sessions themselves is waiting (their fork origins and forks aside): enough
   * for answers drawn from each session's own records only, such as `sessionActivity`.
   */
  outboxHoldsAny(sessionIds: readonly string[]): boolean {
    return this.options.outbox === true && sessionIds.length > 0 && outboxHoldsOwn(this.prepared, sessionIds);
  }

  /**
   * The oldest outbox entries, as the current state of what they name: sessions, then actions in entry
   * order, each once. Stops after `maxEntries` entries or once about `maxBytes` of action data is gathered
   * (always at least one entry). Acknowledge with `outboxAck(batch.lastId)` once copied.
   */
  outboxBatch(maxEntries: number, maxBytes = 8 * 1024 * 1024): OutboxBatch {
    return readOutboxBatch(this.prepared, maxEntries, maxBytes);
  }

  /** Drops the outbox entries up to `lastId` (durably), once they are copied. Returns how many. */
  outboxAck(lastId: number): Promise<number> {
    return this.write(() => deleteOutboxUpTo(this.prepared, lastId));
  }

  private async write<T>(apply: () => T): Promise<T> {
    if (this.closed || !this.queue) throw this.unavailable();
    return this.queue.enqueue(apply);
  }

  private conn(): DatabaseSync {
    if (!this.db) throw this.unavailable();
    return this.db;
  }

  private unavailable(): Error {
    return this.closed
      ? new ContextGraphClosedError()
      : new Error('SqliteContextGraph.init() must be called first');
  }

  /** Statements are prepared once per connection; SQL strings are constants, so the cache stays small. */
  private sql(sql: string): StatementSync {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.conn().prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** Inside a write: names what it changed for the forwarder (no-op without an outbox). */
  private queueForReplica(kind: OutboxKind, key: string, sessionId: string): void {
    if (!this.options.outbox) return;
    appendToOutbox(this.prepared, kind, key, sessionId);
  }
}
