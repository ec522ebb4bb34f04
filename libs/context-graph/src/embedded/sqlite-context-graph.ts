import type {
  ActionError,
  ActionStatus,
  ActionTier,
  ActionType,
  FileTouch,
  RiskAssessment,
} from '@switchyard/common';
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { type ActivityRow, buildSessionActivity, distinctSessionIds } from '../context-graph.activity';
import { checkpointNodeId, checkpointState, type StoredCheckpoint } from '../context-graph.checkpoints';
import { assertLimit, decodeSeqCursor, encodeSeqCursor } from '../context-graph.cursor';
import {
  ActionAlreadyCompletedError,
  ActionNotRecordedError,
  ContextGraphClosedError,
  SessionNotRecordedError,
} from '../context-graph.errors';
import { ContextGraph } from '../context-graph.port';
import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  ActionSummary,
  CheckpointRecord,
  CheckpointRef,
  CheckpointState,
  FailureContext,
  FailureContextQuery,
  FileLineage,
  ForkRecord,
  GraphFilter,
  GraphHealth,
  GraphView,
  ListActionsQuery,
  Page,
  PlanGraphRecord,
  RestoreRecord,
  SandboxRef,
  SessionActivity,
  SessionRecord,
} from '../context-graph.types';
import {
  assertFailureContextQuery,
  buildFailureContext,
  buildFileLineage,
  buildGraphView,
  checkGraphFilter,
  fileNodeId,
  INTERRUPTED_ERROR,
  resolvePlan,
  sandboxNodeId,
  type SessionState,
  sortTouches,
  type StoredPlan,
  summarize,
} from '../context-graph.views';
import type { OutboxBatch, ReplicaAction } from '../replication/replication.types';
import { GroupCommitQueue, type GroupCommitStats } from './group-commit-queue';
import {
  CHECKPOINT_SCHEMA,
  FORK_RELATED_SESSIONS,
  insertCheckpoint,
  insertFork,
  insertRestore,
  markCheckpointDeleted,
  readCheckpointRefs,
  readCheckpoints,
  readFork,
  readForkOrigins,
  readSessionCheckpoints,
} from './sqlite-checkpoints';
import { readStatefulRefs, STATEFUL_SCHEMA, type StatefulRefs, writeStatefulRefs } from './sqlite-stateful';
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

/** The outbox as of this version: its CHECK names every kind of entry (SCHEMA runs at every open). */
const outboxTable = (name: string): string => `CREATE TABLE IF NOT EXISTS ${name} (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('session', 'action', 'plan', 'checkpoint', 'fork')),
  key TEXT NOT NULL,
  session_id TEXT NOT NULL
) STRICT;`;

// NEXT edges are not stored: seqs are gapless per session, so NEXT is seq n → n+1.
// STRICT tables reject values of the wrong type instead of silently storing them.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  created_at TEXT NOT NULL,
  metadata TEXT NOT NULL,
  ended_at TEXT,
  end_reason TEXT
) STRICT;
CREATE TABLE IF NOT EXISTS actions (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  operation TEXT NOT NULL,
  status TEXT NOT NULL,
  input TEXT NOT NULL,
  input_summary TEXT NOT NULL,
  input_hash TEXT NOT NULL,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  duration_ms REAL,
  tier TEXT NOT NULL,
  risk TEXT NOT NULL,
  exit_code INTEGER,
  error TEXT,
  output_excerpt TEXT,
  result TEXT,
  retry_of TEXT REFERENCES actions(id),
  sandbox_id TEXT,
  retry_reason TEXT,
  UNIQUE (session_id, seq)
) STRICT;
CREATE INDEX IF NOT EXISTS actions_running ON actions(status) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS files (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  path TEXT NOT NULL,
  UNIQUE (session_id, path)
) STRICT;
CREATE TABLE IF NOT EXISTS action_files (
  action_id TEXT NOT NULL REFERENCES actions(id),
  file_id TEXT NOT NULL REFERENCES files(id),
  access TEXT NOT NULL CHECK (access IN ('read', 'write')),
  PRIMARY KEY (action_id, file_id, access)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sandboxes (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  tier TEXT NOT NULL,
  container_id TEXT NOT NULL,
  runtime TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS actions_retry_of ON actions(retry_of) WHERE retry_of IS NOT NULL;
CREATE INDEX IF NOT EXISTS action_files_by_file ON action_files(file_id, access);
CREATE TABLE IF NOT EXISTS plans (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  goal TEXT,
  status TEXT NOT NULL,
  max_parallel INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  ended_at TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS plans_by_session ON plans(session_id);
CREATE TABLE IF NOT EXISTS plan_steps (
  id TEXT PRIMARY KEY,
  plan_id TEXT NOT NULL REFERENCES plans(id),
  step_id TEXT NOT NULL,
  version INTEGER NOT NULL,
  status TEXT NOT NULL,
  allow_failure INTEGER NOT NULL,
  depends_on TEXT NOT NULL,
  replaces TEXT,
  UNIQUE (plan_id, step_id, version)
) STRICT;
CREATE TABLE IF NOT EXISTS step_attempts (
  step_id TEXT NOT NULL REFERENCES plan_steps(id),
  action_id TEXT NOT NULL REFERENCES actions(id),
  n INTEGER NOT NULL,
  PRIMARY KEY (step_id, action_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS step_attempts_by_action ON step_attempts(action_id);
${STATEFUL_SCHEMA}
${CHECKPOINT_SCHEMA}
${outboxTable('outbox')}
CREATE INDEX IF NOT EXISTS outbox_by_session ON outbox(session_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
`;
const SCHEMA_VERSION = 7;
/**
 * Steps from each older `user_version` to the next (new tables and indexes come from SCHEMA's IF NOT EXISTS).
 * Version 1 had no sandboxes; version 2 had no retry reasons, outbox, or indexes for retry chains and lineage;
 * version 3 had no plans, and its outbox took no `plan` entries (a CHECK, so the table is rebuilt, keeping its
 * entries; SCHEMA then recreates its index); version 4 had no kernels or processes (new tables only: the
 * actions it holds have neither, and kernels and processes travel in their action's outbox entry); version 5 kept
 * no container runtime on sandboxes (its sandboxes keep none: runc was the only one then); version 6 had no
 * checkpoints, restores or forks (new tables), and its outbox took no `checkpoint` or `fork` entries (rebuilt as
 * for version 3, keeping its entries).
 */
const MIGRATIONS: Record<number, string> = {
  1: 'ALTER TABLE actions ADD COLUMN sandbox_id TEXT;',
  2: 'ALTER TABLE actions ADD COLUMN retry_reason TEXT;',
  3: `CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, key TEXT NOT NULL,
      session_id TEXT NOT NULL) STRICT;
    CREATE TABLE outbox_v4 (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      kind TEXT NOT NULL CHECK (kind IN ('session', 'action', 'plan')),
      key TEXT NOT NULL,
      session_id TEXT NOT NULL
    ) STRICT;
    INSERT INTO outbox_v4 (id, kind, key, session_id) SELECT id, kind, key, session_id FROM outbox ORDER BY id;
    DROP TABLE outbox;
    ALTER TABLE outbox_v4 RENAME TO outbox;`,
  4: STATEFUL_SCHEMA,
  // A version-1 file has no sandboxes table yet: it gets the version-5 one first.
  5: `CREATE TABLE IF NOT EXISTS sandboxes (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id),
      tier TEXT NOT NULL, container_id TEXT NOT NULL) STRICT;
    ALTER TABLE sandboxes ADD COLUMN runtime TEXT;`,
  6: `${outboxTable('outbox_v7')}
    INSERT INTO outbox_v7 (id, kind, key, session_id) SELECT id, kind, key, session_id FROM outbox ORDER BY id;
    DROP TABLE outbox;
    ALTER TABLE outbox_v7 RENAME TO outbox;`,
};

const ACTION_COLUMNS = `id, session_id, seq, type, operation, status, input, input_summary, input_hash,
  started_at, ended_at, duration_ms, tier, risk, exit_code, error, output_excerpt, result, retry_of, sandbox_id,
  retry_reason`;
/** The same columns, qualified for queries that join `actions a`. */
const ACTION_COLUMNS_OF_A = ACTION_COLUMNS.replace(/(\w+)/g, 'a.$1');

type SessionRow = {
  id: string;
  tenant: string;
  created_at: string;
  metadata: string;
  ended_at: string | null;
  end_reason: string | null;
};

type ActionRow = {
  id: string;
  session_id: string;
  seq: number;
  type: ActionType;
  operation: string;
  status: ActionStatus;
  input: string;
  input_summary: string;
  input_hash: string;
  started_at: string;
  ended_at: string | null;
  duration_ms: number | null;
  tier: ActionTier;
  risk: string;
  exit_code: number | null;
  error: string | null;
  output_excerpt: string | null;
  result: string | null;
  retry_of: string | null;
  sandbox_id: string | null;
  retry_reason: string | null;
};

type TouchRow = { action_id: string; path: string; access: FileTouch['access'] };
type SandboxRow = { id: string; tier: SandboxRef['tier']; container_id: string; runtime: string | null };
type OutboxRow = { id: number; kind: 'session' | 'action' | 'plan' | 'checkpoint' | 'fork'; key: string };
type PlanRow = {
  id: string;
  session_id: string;
  goal: string | null;
  status: string;
  max_parallel: number;
  created_at: string;
  ended_at: string | null;
};
type StepRow = {
  id: string;
  plan_id: string;
  step_id: string;
  version: number;
  status: string;
  allow_failure: number;
  depends_on: string;
  replaces: string | null;
};

const parse = <T>(json: string): T => JSON.parse(json) as T;
const parseOpt = <T>(json: string | null): T | undefined => (json === null ? undefined : parse<T>(json));
/** Binds a list as one parameter: `IN (SELECT value FROM json_each(?))`. */
const list = (values: readonly string[]): string => JSON.stringify(values);

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
 */
export class SqliteContextGraph extends ContextGraph {
  private db: DatabaseSync | undefined;
  private wal: WalSync | undefined;
  private queue: GroupCommitQueue | undefined;
  private readonly statements = new Map<string, StatementSync>();
  /** `sql` as a function, for the readers and writers kept in other files (sqlite-stateful, sqlite-checkpoints). */
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
      let version = Number(Object.values(db.prepare('PRAGMA user_version').get() ?? {})[0]);
      // A fresh file gets the current schema at once; an older one is migrated step by step first.
      if (version === 0) version = SCHEMA_VERSION;
      for (; version < SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]);
      db.exec(`${SCHEMA} PRAGMA user_version = ${SCHEMA_VERSION};`);
      this.setUpOutbox(db);
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
      this.sql('INSERT INTO sessions (id, tenant, created_at, metadata) VALUES (?, ?, ?, ?)').run(
        session.id,
        session.tenant,
        session.createdAt,
        JSON.stringify(session.metadata),
      );
      this.queueForReplica('session', session.id, session.id);
    });
  }

  override recordActionStarted(a: ActionStart): Promise<void> {
    return this.write(() => {
      if (!this.sql('SELECT 1 FROM sessions WHERE id = ?').get(a.sessionId)) {
        throw new SessionNotRecordedError(a.sessionId);
      }
      if (
        a.retryOf !== undefined &&
        !this.sql('SELECT 1 FROM actions WHERE id = ? AND session_id = ?').get(a.retryOf, a.sessionId)
      ) {
        throw new ActionNotRecordedError(a.retryOf, a.sessionId);
      }
      // seq is allocated inside the write transaction, so it follows commit order and has no gaps.
      this.sql(
        `INSERT INTO actions (id, session_id, seq, type, operation, status, input, input_summary, input_hash,
           started_at, tier, risk, retry_of, retry_reason)
         SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?
         FROM actions WHERE session_id = ?`,
      ).run(
        a.id,
        a.sessionId,
        a.type,
        a.operation,
        JSON.stringify(a.input),
        a.inputSummary,
        a.inputHash,
        a.startedAt,
        a.tier,
        JSON.stringify(a.risk),
        a.retryOf ?? null,
        a.retryOf === undefined ? null : (a.retryReason ?? null),
        a.sessionId,
      );
      this.queueForReplica('action', a.id, a.sessionId);
    });
  }

  override recordActionCompleted(actionId: string, c: ActionCompletion): Promise<void> {
    return this.write(() => {
      const row = this.sql('SELECT session_id, status FROM actions WHERE id = ?').get(actionId) as
        { session_id: string; status: ActionStatus } | undefined;
      if (!row) throw new ActionNotRecordedError(actionId);
      if (row.status !== 'running') throw new ActionAlreadyCompletedError(actionId, row.status);
      const sandboxId = c.sandbox && sandboxNodeId(c.sandbox.containerId);
      if (c.sandbox) {
        this.sql(
          `INSERT INTO sandboxes (id, session_id, tier, container_id, runtime) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT DO NOTHING`,
        ).run(sandboxId!, row.session_id, c.sandbox.tier, c.sandbox.containerId, c.sandbox.runtime ?? null);
      }
      this.sql(
        `UPDATE actions SET status = ?, ended_at = ?, duration_ms = ?, tier = ?, risk = ?, exit_code = ?,
           error = ?, output_excerpt = ?, result = ?, sandbox_id = ? WHERE id = ?`,
      ).run(
        c.status,
        c.endedAt,
        c.durationMs,
        c.tier,
        JSON.stringify(c.risk),
        c.exitCode ?? null,
        c.error ? JSON.stringify(c.error) : null,
        c.outputExcerpt,
        JSON.stringify(c.result),
        sandboxId ?? null,
        actionId,
      );
      writeStatefulRefs(this.prepared, actionId, row.session_id, c);
      for (const file of c.files) {
        const id = fileNodeId(row.session_id, file.path);
        this.sql('INSERT INTO files (id, session_id, path) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(
          id,
          row.session_id,
          file.path,
        );
        this.sql(
          'INSERT INTO action_files (action_id, file_id, access) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
        ).run(actionId, id, file.access);
      }
      this.queueForReplica('action', actionId, row.session_id);
    });
  }

  override recordPlan(record: PlanGraphRecord): Promise<void> {
    return this.write(() => {
      if (!this.sql('SELECT 1 FROM sessions WHERE id = ?').get(record.sessionId)) {
        throw new SessionNotRecordedError(record.sessionId);
      }
      const plan = resolvePlan(record);
      this.sql(
        `INSERT INTO plans (id, session_id, goal, status, max_parallel, created_at, ended_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET goal = excluded.goal, status = excluded.status,
           max_parallel = excluded.max_parallel, created_at = excluded.created_at, ended_at = excluded.ended_at`,
      ).run(
        plan.id,
        plan.sessionId,
        plan.goal ?? null,
        plan.status,
        plan.maxParallel,
        plan.createdAt,
        plan.endedAt ?? null,
      );
      for (const step of plan.steps) {
        this.sql(
          `INSERT INTO plan_steps (id, plan_id, step_id, version, status, allow_failure, depends_on, replaces)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status, allow_failure = excluded.allow_failure,
             depends_on = excluded.depends_on, replaces = excluded.replaces`,
        ).run(
          step.id,
          plan.id,
          step.stepId,
          step.version,
          step.status,
          step.allowFailure ? 1 : 0,
          JSON.stringify(step.dependsOn),
          step.replaces ?? null,
        );
        this.sql('DELETE FROM step_attempts WHERE step_id = ?').run(step.id);
        // Only actions of the same session that exist; `n` keeps the attempt order.
        this.sql(
          `INSERT INTO step_attempts (step_id, action_id, n)
           SELECT ?, j.value, j.key FROM json_each(?) j
           WHERE EXISTS (SELECT 1 FROM actions a WHERE a.id = j.value AND a.session_id = ?)`,
        ).run(step.id, list(step.attempts), plan.sessionId);
      }
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
    return this.action(sessionId, actionId);
  }

  override async lastActionSeq(sessionId: string): Promise<number> {
    const row = this.sql('SELECT MAX(seq) AS seq FROM actions WHERE session_id = ?').get(sessionId) as {
      seq: number | null;
    };
    return row.seq ?? 0;
  }

  override async getCheckpoint(
    sessionId: string,
    checkpointId: string,
  ): Promise<CheckpointState | undefined> {
    const [stored] = readCheckpoints(this.prepared, 'id', checkpointNodeId(checkpointId));
    return stored && stored.sessionId === sessionId ? checkpointState(stored) : undefined;
  }

  override async listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>> {
    assertLimit(query.limit);
    const after = query.cursor === undefined ? 0 : decodeSeqCursor(query.cursor);
    // One extra row tells whether another page exists without a COUNT.
    const rows = this.sql(
      `SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
    ).all(sessionId, after, query.limit + 1) as ActionRow[];
    const items = this.hydrate(rows.slice(0, query.limit));
    return rows.length > query.limit
      ? { items, nextCursor: encodeSeqCursor(items[items.length - 1].seq) }
      : { items };
  }

  override async sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView> {
    const f = checkGraphFilter(filter);
    const session = this.session(sessionId);
    if (!session) return { nodes: [], edges: [] };
    // NULL parameters switch a predicate off; the latest `limit` are picked, then put back in seq order.
    const rows = this.sql(
      `SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ?1
         AND (?2 IS NULL OR started_at >= ?2)
         AND (?3 IS NULL OR type IN (SELECT value FROM json_each(?3)))
         AND (?4 IS NULL OR status IN (SELECT value FROM json_each(?4)))
       ORDER BY seq DESC LIMIT ?5`,
    ).all(
      sessionId,
      f?.since ?? null,
      f?.types ? list(f.types) : null,
      f?.status ? list(f.status) : null,
      f?.limit ?? -1,
    ) as ActionRow[];
    return buildGraphView(
      session,
      this.hydrate(rows.reverse()),
      this.plansOf(sessionId),
      readSessionCheckpoints(this.prepared, sessionId, (id) => this.session(id)),
    );
  }

  override async failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined> {
    assertFailureContextQuery(query);
    const action = this.action(sessionId, actionId);
    if (!action) return undefined;
    const ancestors = this.sql(
      `WITH RECURSIVE up(id) AS (
         SELECT retry_of FROM actions WHERE id = ? AND retry_of IS NOT NULL
         UNION SELECT a.retry_of FROM actions a JOIN up ON a.id = up.id WHERE a.retry_of IS NOT NULL)
       SELECT ${ACTION_COLUMNS} FROM actions WHERE id IN (SELECT id FROM up)`,
    ).all(actionId) as ActionRow[];
    const descendants = this.sql(
      `WITH RECURSIVE down(id) AS (
         SELECT id FROM actions WHERE retry_of = ?
         UNION SELECT a.id FROM actions a JOIN down ON a.retry_of = down.id)
       SELECT ${ACTION_COLUMNS} FROM actions WHERE id IN (SELECT id FROM down)`,
    ).all(actionId) as ActionRow[];
    const before = this.sql(
      `SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
    ).all(sessionId, action.seq, query.before) as ActionRow[];
    const writerRows = new Map<string, ActionRow>();
    for (const path of new Set(action.files.map((t) => t.path))) {
      const writer = this.sql(
        `SELECT ${ACTION_COLUMNS_OF_A} FROM action_files af JOIN actions a ON a.id = af.action_id
         WHERE af.file_id = ? AND af.access = 'write' AND a.seq < ? ORDER BY a.seq DESC LIMIT 1`,
      ).get(fileNodeId(sessionId, path), action.seq) as ActionRow | undefined;
      if (writer) writerRows.set(path, writer);
    }
    const summaries = (rows: ActionRow[]): ActionSummary[] => this.hydrate(rows).map(summarize);
    const writers = summaries([...writerRows.values()]);
    const ancestorRecords = this.hydrate(ancestors);
    const planSteps = this.sql(
      `SELECT s.plan_id AS planId, s.step_id AS stepId, s.version AS version
       FROM step_attempts t JOIN plan_steps s ON s.id = t.step_id WHERE t.action_id = ?`,
    ).all(actionId) as { planId: string; stepId: string; version: number }[];
    return buildFailureContext(
      action,
      ancestorRecords.map(summarize),
      summaries(descendants),
      summaries(before),
      new Map([...writerRows.keys()].map((path, i) => [path, writers[i]])),
      planSteps,
      new Map(
        ancestorRecords.flatMap((a): [string, CheckpointRef][] =>
          a.checkpoint ? [[a.id, a.checkpoint]] : [],
        ),
      ),
    );
  }

  override async fileLineage(sessionId: string, path: string): Promise<FileLineage> {
    // Each fork origin's actions up to the seq its fork was cut at, then the session's own.
    const sources = [
      ...readForkOrigins(this.prepared, sessionId),
      { sessionId, seq: Number.MAX_SAFE_INTEGER },
    ];
    const rows = sources.flatMap(
      (source) =>
        this.sql(
          `SELECT ${ACTION_COLUMNS_OF_A} FROM actions a
           WHERE a.id IN (SELECT action_id FROM action_files WHERE file_id = ?) AND a.seq <= ? ORDER BY a.seq`,
        ).all(fileNodeId(source.sessionId, path), source.seq) as ActionRow[],
    );
    return buildFileLineage(
      path,
      this.hydrate(rows).map((a) => ({
        ...summarize(a),
        sessionId: a.sessionId,
        access: a.files.filter((f) => f.path === path).map((f) => f.access),
      })),
      sources.map((s) => s.sessionId),
    );
  }

  override async sessionActivity(sessionIds: readonly string[]): Promise<Map<string, SessionActivity>> {
    const ids = distinctSessionIds(sessionIds);
    if (ids.length === 0) {
      this.conn(); // a closed store rejects every call, even one it need not query for
      return new Map();
    }
    // The LEFT JOIN keeps a session without actions: one row of NULLs counting 0.
    const rows = this.sql(
      `SELECT s.id AS sessionId, a.status AS status, a.tier AS tier, COUNT(a.id) AS actions,
         MAX(a.started_at) AS lastStartedAt
       FROM sessions s LEFT JOIN actions a ON a.session_id = s.id
       WHERE s.id IN (SELECT value FROM json_each(?))
       GROUP BY s.id, a.status, a.tier`,
    ).all(list(ids)) as ActivityRow[];
    return buildSessionActivity(ids, rows);
  }

  override async health(): Promise<GraphHealth> {
    if (this.closed) throw new ContextGraphClosedError();
    return { store: 'embedded', status: 'ok', backlog: 0 };
  }

  override markRunningInterrupted(endedAt: string): Promise<number> {
    return this.write(() => {
      if (this.options.outbox) {
        this.sql(
          `INSERT INTO outbox (kind, key, session_id)
           SELECT 'action', id, session_id FROM actions WHERE status = 'running' ORDER BY session_id, seq`,
        ).run();
      }
      return Number(
        this.sql(
          `UPDATE actions SET status = 'interrupted', ended_at = ?, error = ? WHERE status = 'running'`,
        ).run(endedAt, JSON.stringify(INTERRUPTED_ERROR)).changes,
      );
    });
  }

  override endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void> {
    return this.write(() => {
      // The first end wins: the audit trail is not rewritten by a later delete of an expired session.
      const { changes } = this.sql(
        `UPDATE sessions SET ended_at = COALESCE(ended_at, ?), end_reason = COALESCE(end_reason, ?)
         WHERE id = ?`,
      ).run(endedAt, reason, sessionId);
      if (Number(changes) === 0) throw new SessionNotRecordedError(sessionId);
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
    return Number(Object.values(this.sql('SELECT count(*) FROM outbox').get() ?? {})[0]);
  }

  /**
   * Whether any outbox entry is waiting that an answer about this session draws on: the session's own, or those
   * of its fork origins (its lineage) and of the sessions forked from it (its graph).
   */
  outboxHolds(sessionId: string): boolean {
    return (
      this.options.outbox === true &&
      this.sql(`SELECT 1 FROM outbox WHERE session_id IN (${FORK_RELATED_SESSIONS}) LIMIT 1`).get(
        sessionId,
      ) !== undefined
    );
  }

  /**
   * Whether any outbox entry of these sessions themselves is waiting (their fork origins and forks aside): enough
   * for answers drawn from each session's own records only, such as `sessionActivity`.
   */
  outboxHoldsAny(sessionIds: readonly string[]): boolean {
    return (
      this.options.outbox === true &&
      sessionIds.length > 0 &&
      this.sql('SELECT 1 FROM outbox WHERE session_id IN (SELECT value FROM json_each(?)) LIMIT 1').get(
        list(sessionIds),
      ) !== undefined
    );
  }

  /**
   * The oldest outbox entries, as the current state of what they name: sessions, then actions in entry
   * order, each once. Stops after `maxEntries` entries or once about `maxBytes` of action data is gathered
   * (always at least one entry). Acknowledge with `outboxAck(batch.lastId)` once copied.
   */
  outboxBatch(maxEntries: number, maxBytes = 8 * 1024 * 1024): OutboxBatch {
    const rows = this.sql('SELECT id, kind, key FROM outbox ORDER BY id LIMIT ?').all(
      maxEntries,
    ) as OutboxRow[];
    const sessions = new Map<string, SessionState>();
    const actions = new Map<string, ReplicaAction>();
    const plans = new Map<string, StoredPlan>();
    const checkpoints = new Map<string, StoredCheckpoint>();
    const forks = new Map<string, ForkRecord>();
    let lastId = 0;
    let bytes = 0;
    for (const row of rows) {
      if (bytes > maxBytes) break;
      lastId = row.id;
      if (row.kind === 'session') {
        const session = sessions.has(row.key) ? undefined : this.session(row.key);
        if (session) sessions.set(row.key, session);
        continue;
      }
      if (row.kind === 'plan') {
        if (plans.has(row.key)) continue;
        const plan = this.plans('SELECT * FROM plans WHERE id = ?', row.key)[0];
        if (plan) plans.set(row.key, plan);
        continue;
      }
      if (row.kind === 'checkpoint') {
        const checkpoint = checkpoints.has(row.key)
          ? undefined
          : readCheckpoints(this.prepared, 'id', row.key)[0];
        if (checkpoint) checkpoints.set(row.key, checkpoint);
        continue;
      }
      if (row.kind === 'fork') {
        const fork = forks.has(row.key) ? undefined : readFork(this.prepared, row.key);
        if (fork) forks.set(row.key, fork);
        continue;
      }
      if (actions.has(row.key)) continue;
      const actionRow = this.sql(`SELECT ${ACTION_COLUMNS} FROM actions WHERE id = ?`).get(row.key) as
        ActionRow | undefined;
      if (!actionRow) continue;
      const [record] = this.hydrate([actionRow]);
      const prev = this.sql('SELECT id FROM actions WHERE session_id = ? AND seq = ?').get(
        actionRow.session_id,
        actionRow.seq - 1,
      ) as { id: string } | undefined;
      actions.set(row.key, { ...record, ...(prev && { prevId: prev.id }) });
      bytes +=
        actionRow.input.length +
        (actionRow.result?.length ?? 0) +
        (actionRow.output_excerpt?.length ?? 0) +
        (record.startedProcess?.command.length ?? 0);
    }
    return {
      lastId,
      entries: rows.filter((r) => r.id <= lastId).length,
      sessions: [...sessions.values()],
      actions: [...actions.values()],
      ...(plans.size > 0 && { plans: [...plans.values()] }),
      ...(checkpoints.size > 0 && { checkpoints: [...checkpoints.values()] }),
      ...(forks.size > 0 && { forks: [...forks.values()] }),
    };
  }

  /** Drops the outbox entries up to `lastId` (durably), once they are copied. Returns how many. */
  outboxAck(lastId: number): Promise<number> {
    return this.write(() => Number(this.sql('DELETE FROM outbox WHERE id <= ?').run(lastId).changes));
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
  private queueForReplica(kind: OutboxRow['kind'], key: string, sessionId: string): void {
    if (!this.options.outbox) return;
    this.sql('INSERT INTO outbox (kind, key, session_id) VALUES (?, ?, ?)').run(kind, key, sessionId);
  }

  /**
   * Runs in the init transaction. Switching the outbox on queues every record already in the file once, so
   * a store added later still receives the whole history; switching it off forgets the queue (the next
   * switch-on queues everything again, and replaying is idempotent).
   */
  private setUpOutbox(db: DatabaseSync): void {
    const state = (
      db.prepare(`SELECT value FROM meta WHERE key = 'outbox'`).get() as { value: string } | undefined
    )?.value;
    const wanted = this.options.outbox ? 'on' : 'off';
    if (state === wanted || (state === undefined && wanted === 'off')) return;
    db.exec('DELETE FROM outbox');
    if (wanted === 'on') {
      db.exec(`INSERT INTO outbox (kind, key, session_id) SELECT 'session', id, id FROM sessions ORDER BY rowid;
        INSERT INTO outbox (kind, key, session_id)
          SELECT 'action', id, session_id FROM actions ORDER BY session_id, seq;
        INSERT INTO outbox (kind, key, session_id) SELECT 'plan', id, session_id FROM plans ORDER BY rowid;
        INSERT INTO outbox (kind, key, session_id)
          SELECT 'checkpoint', id, session_id FROM checkpoints ORDER BY rowid;
        INSERT INTO outbox (kind, key, session_id)
          SELECT 'fork', session_id, session_id FROM forks ORDER BY rowid;`);
    }
    db.prepare(
      `INSERT INTO meta (key, value) VALUES ('outbox', ?) ON CONFLICT (key) DO UPDATE SET value = ?`,
    ).run(wanted, wanted);
  }

  private action(sessionId: string, actionId: string): ActionRecord | undefined {
    const row = this.sql(`SELECT ${ACTION_COLUMNS} FROM actions WHERE id = ? AND session_id = ?`).get(
      actionId,
      sessionId,
    ) as ActionRow | undefined;
    return row && this.hydrate([row])[0];
  }

  private session(sessionId: string): SessionState | undefined {
    const row = this.sql('SELECT * FROM sessions WHERE id = ?').get(sessionId) as SessionRow | undefined;
    return (
      row && {
        id: row.id,
        tenant: row.tenant,
        createdAt: row.created_at,
        metadata: parse<Record<string, unknown>>(row.metadata),
        ...(row.ended_at !== null && { endedAt: row.ended_at }),
        ...(row.end_reason !== null && { endReason: row.end_reason as 'deleted' | 'expired' }),
      }
    );
  }

  private plansOf(sessionId: string): StoredPlan[] {
    return this.plans('SELECT * FROM plans WHERE session_id = ?', sessionId);
  }

  /** Plans selected by `sql` (one parameter), with their steps and attempts. */
  private plans(sql: string, param: string): StoredPlan[] {
    const rows = this.sql(sql).all(param) as PlanRow[];
    if (rows.length === 0) return [];
    const ids = list(rows.map((r) => r.id));
    const steps = this.sql('SELECT * FROM plan_steps WHERE plan_id IN (SELECT value FROM json_each(?))').all(
      ids,
    ) as StepRow[];
    const attempts = new Map<string, string[]>();
    for (const t of this.sql(
      `SELECT t.step_id, t.action_id FROM step_attempts t JOIN plan_steps s ON s.id = t.step_id
       WHERE s.plan_id IN (SELECT value FROM json_each(?)) ORDER BY t.step_id, t.n`,
    ).all(ids) as { step_id: string; action_id: string }[]) {
      attempts.set(t.step_id, [...(attempts.get(t.step_id) ?? []), t.action_id]);
    }
    return rows.map((r) => ({
      id: r.id,
      sessionId: r.session_id,
      ...(r.goal !== null && { goal: r.goal }),
      status: r.status,
      maxParallel: r.max_parallel,
      createdAt: r.created_at,
      ...(r.ended_at !== null && { endedAt: r.ended_at }),
      steps: steps
        .filter((s) => s.plan_id === r.id)
        .map((s) => ({
          id: s.id,
          stepId: s.step_id,
          version: s.version,
          status: s.status,
          allowFailure: s.allow_failure === 1,
          dependsOn: parse<string[]>(s.depends_on),
          attempts: attempts.get(s.id) ?? [],
          ...(s.replaces !== null && { replaces: s.replaces }),
        })),
    }));
  }

  /**
   * Rows to records, with files, sandboxes, kernels, processes and checkpoints fetched in one query each for all
   * of them.
   */
  private hydrate(rows: ActionRow[]): ActionRecord[] {
    if (rows.length === 0) return [];
    const ids = list(rows.map((r) => r.id));
    const touches = new Map<string, FileTouch[]>();
    for (const t of this.sql(
      `SELECT af.action_id, f.path, af.access FROM action_files af JOIN files f ON f.id = af.file_id
       WHERE af.action_id IN (SELECT value FROM json_each(?))`,
    ).all(ids) as TouchRow[]) {
      const files = touches.get(t.action_id) ?? [];
      files.push({ path: t.path, access: t.access });
      touches.set(t.action_id, files);
    }
    const sandboxIds = [...new Set(rows.flatMap((r) => (r.sandbox_id === null ? [] : [r.sandbox_id])))];
    const sandboxes = new Map(
      sandboxIds.length === 0
        ? []
        : (
            this.sql(
              'SELECT id, tier, container_id, runtime FROM sandboxes WHERE id IN (SELECT value FROM json_each(?))',
            ).all(list(sandboxIds)) as SandboxRow[]
          ).map(
            (b) =>
              [
                b.id,
                {
                  tier: b.tier,
                  containerId: b.container_id,
                  ...(b.runtime !== null && { runtime: b.runtime }),
                },
              ] as const,
          ),
    );
    const stateful = readStatefulRefs(this.prepared, ids);
    const checkpoints = readCheckpointRefs(this.prepared, ids);
    return rows.map((row) =>
      toRecord(
        row,
        touches.get(row.id) ?? [],
        row.sandbox_id === null ? undefined : sandboxes.get(row.sandbox_id),
        stateful.get(row.id) ?? {},
        checkpoints.get(row.id),
      ),
    );
  }
}

function toRecord(
  row: ActionRow,
  files: FileTouch[],
  sandbox: SandboxRef | undefined,
  { kernel, startedProcess }: StatefulRefs,
  checkpoint: CheckpointRef | undefined,
): ActionRecord {
  return {
    id: row.id,
    sessionId: row.session_id,
    seq: row.seq,
    type: row.type,
    operation: row.operation,
    status: row.status,
    input: parse<Record<string, unknown>>(row.input),
    inputSummary: row.input_summary,
    inputHash: row.input_hash,
    startedAt: row.started_at,
    endedAt: row.ended_at ?? undefined,
    durationMs: row.duration_ms ?? undefined,
    tier: row.tier,
    risk: parse<RiskAssessment>(row.risk),
    exitCode: row.exit_code ?? undefined,
    error: parseOpt<ActionError>(row.error),
    outputExcerpt: row.output_excerpt ?? undefined,
    retryOf: row.retry_of ?? undefined,
    retryReason: row.retry_reason ?? undefined,
    sandbox,
    kernel,
    startedProcess,
    checkpoint,
    files: sortTouches(files),
    result: parseOpt(row.result),
  };
}
