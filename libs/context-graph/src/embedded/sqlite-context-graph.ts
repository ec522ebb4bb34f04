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
  GraphEdge,
  GraphNode,
  GraphView,
  ListActionsQuery,
  Page,
  SandboxRef,
  SessionRecord,
} from '../context-graph.types';
import { GroupCommitQueue, type GroupCommitStats } from './group-commit-queue';
import { WalSync } from './wal-sync';

export interface SqliteContextGraphOptions {
  /** Database file; its parent directory is created. */
  sqlitePath: string;
  /** How long a write waits for a lock held by another connection. Default 5000. */
  busyTimeoutMs?: number;
  /** Most writes committed in one transaction. Default 500. */
  maxBatchSize?: number;
}

/** Connection settings as SQLite reports them, for diagnostics. */
export interface SqlitePragmas {
  journalMode: string;
  /** 2 = FULL. */
  synchronous: number;
  foreignKeys: boolean;
  busyTimeoutMs: number;
}

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
  container_id TEXT NOT NULL
) STRICT;
`;
const SCHEMA_VERSION = 2;
/** Steps from each older `user_version` to the next; version 1 had no sandboxes. */
const MIGRATIONS: Record<number, string> = {
  1: 'ALTER TABLE actions ADD COLUMN sandbox_id TEXT;',
};

const ACTION_COLUMNS = `id, session_id, seq, type, operation, status, input, input_summary, input_hash,
  started_at, ended_at, duration_ms, tier, risk, exit_code, error, output_excerpt, result, retry_of, sandbox_id`;

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
};

type TouchRow = { path: string; access: FileTouch['access'] };
type SessionTouchRow = TouchRow & { action_id: string; file_id: string };

const INTERRUPTED: ActionError = {
  class: 'internal',
  message: 'engine stopped while the action was running',
};

const fileId = (sessionId: string, path: string): string => `file:${sessionId}:${path}`;
const sandboxNodeId = (containerId: string): string => `sandbox:${containerId}`;
const parse = <T>(json: string): T => JSON.parse(json) as T;
const parseOpt = <T>(json: string | null): T | undefined => (json === null ? undefined : parse<T>(json));
/** Graph properties mirror Neo4j, which has no null properties: absent means unknown. */
const compact = (props: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(props).filter(([, v]) => v !== undefined && v !== null));

/**
 * Embedded `ContextGraph` adapter: one SQLite file in WAL mode; every acknowledged write is on disk
 * (`synchronous=NORMAL` plus an fdatasync of the WAL after each group commit, see `WalSync`).
 *
 * Writes go through a {@link GroupCommitQueue} (one fsync per batch of concurrent writes); reads run
 * directly on the same connection and see every write whose promise has resolved.
 */
export class SqliteContextGraph extends ContextGraph {
  private db: DatabaseSync | undefined;
  private wal: WalSync | undefined;
  private queue: GroupCommitQueue | undefined;
  private readonly statements = new Map<string, StatementSync>();
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
      db.exec(`${SCHEMA} PRAGMA user_version = ${SCHEMA_VERSION}; COMMIT;`);
    } catch (error) {
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
           started_at, tier, risk, retry_of)
         SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?
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
        a.sessionId,
      );
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
          'INSERT INTO sandboxes (id, session_id, tier, container_id) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
        ).run(sandboxId!, row.session_id, c.sandbox.tier, c.sandbox.containerId);
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
      for (const file of c.files) {
        const id = fileId(row.session_id, file.path);
        this.sql('INSERT INTO files (id, session_id, path) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(
          id,
          row.session_id,
          file.path,
        );
        this.sql(
          'INSERT INTO action_files (action_id, file_id, access) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
        ).run(actionId, id, file.access);
      }
    });
  }

  override async getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined> {
    const row = this.sql(`SELECT ${ACTION_COLUMNS} FROM actions WHERE id = ? AND session_id = ?`).get(
      actionId,
      sessionId,
    ) as ActionRow | undefined;
    return row && this.toRecord(row);
  }

  override async listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>> {
    assertLimit(query.limit);
    const after = query.cursor === undefined ? 0 : decodeSeqCursor(query.cursor);
    // One extra row tells whether another page exists without a COUNT.
    const rows = this.sql(
      `SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
    ).all(sessionId, after, query.limit + 1) as ActionRow[];
    const items = rows.slice(0, query.limit).map((row) => this.toRecord(row));
    return rows.length > query.limit
      ? { items, nextCursor: encodeSeqCursor(items[items.length - 1].seq) }
      : { items };
  }

  override async sessionGraph(sessionId: string): Promise<GraphView> {
    const session = this.sql('SELECT * FROM sessions WHERE id = ?').get(sessionId) as SessionRow | undefined;
    if (!session) return { nodes: [], edges: [] };
    const actions = this.sql(`SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ? ORDER BY seq`).all(
      sessionId,
    ) as ActionRow[];
    const files = this.sql('SELECT id, path FROM files WHERE session_id = ? ORDER BY path').all(
      sessionId,
    ) as {
      id: string;
      path: string;
    }[];
    const touches = this.sessionTouches(sessionId);
    const sandboxes = this.sql(
      'SELECT id, tier, container_id FROM sandboxes WHERE session_id = ? ORDER BY rowid',
    ).all(sessionId) as { id: string; tier: string; container_id: string }[];

    const nodes: GraphNode[] = [
      {
        id: session.id,
        label: 'Session',
        properties: compact({
          createdAt: session.created_at,
          tenant: session.tenant,
          metadata: session.metadata,
          endedAt: session.ended_at,
          endReason: session.end_reason,
        }),
      },
      ...actions.map((a): GraphNode => ({ id: a.id, label: 'Action', properties: actionProperties(a) })),
      ...files.map((f): GraphNode => ({ id: f.id, label: 'File', properties: { path: f.path } })),
      ...sandboxes.map(
        (b): GraphNode => ({
          id: b.id,
          label: 'Sandbox',
          properties: { tier: b.tier, containerId: b.container_id },
        }),
      ),
    ];
    const edge = (from: string, to: string, type: GraphEdge['type']): GraphEdge => ({
      from,
      to,
      type,
      properties: {},
    });
    const edges: GraphEdge[] = [
      ...actions.map((a) => edge(session.id, a.id, 'HAS_ACTION')),
      ...actions.slice(1).map((a, i) => edge(actions[i].id, a.id, 'NEXT')),
      ...touches.map((t) => edge(t.action_id, t.file_id, t.access === 'read' ? 'READ' : 'WROTE')),
      ...actions.flatMap((a) => (a.retry_of === null ? [] : [edge(a.id, a.retry_of, 'RETRY_OF')])),
      ...actions.flatMap((a) => (a.sandbox_id === null ? [] : [edge(a.id, a.sandbox_id, 'RAN_IN')])),
    ];
    return { nodes, edges };
  }

  override markRunningInterrupted(endedAt: string): Promise<number> {
    return this.write(() =>
      Number(
        this.sql(
          `UPDATE actions SET status = 'interrupted', ended_at = ?, error = ? WHERE status = 'running'`,
        ).run(endedAt, JSON.stringify(INTERRUPTED)).changes,
      ),
    );
  }

  override endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void> {
    return this.write(() => {
      // The first end wins: the audit trail is not rewritten by a later delete of an expired session.
      const { changes } = this.sql(
        `UPDATE sessions SET ended_at = COALESCE(ended_at, ?), end_reason = COALESCE(end_reason, ?)
         WHERE id = ?`,
      ).run(endedAt, reason, sessionId);
      if (Number(changes) === 0) throw new SessionNotRecordedError(sessionId);
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

  private toRecord(row: ActionRow): ActionRecord {
    const files = (
      this.sql(
        `SELECT f.path, af.access FROM action_files af JOIN files f ON f.id = af.file_id
         WHERE af.action_id = ? ORDER BY f.path, af.access`,
      ).all(row.id) as TouchRow[]
    ).map(({ path, access }) => ({ path, access }));
    const sandbox =
      row.sandbox_id === null
        ? undefined
        : (this.sql('SELECT tier, container_id FROM sandboxes WHERE id = ?').get(row.sandbox_id) as {
            tier: SandboxRef['tier'];
            container_id: string;
          });
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
      sandbox: sandbox && { tier: sandbox.tier, containerId: sandbox.container_id },
      files,
      result: parseOpt(row.result),
    };
  }

  private sessionTouches(sessionId: string): SessionTouchRow[] {
    return this.sql(
      `SELECT af.action_id, af.file_id, f.path, af.access FROM actions a
       JOIN action_files af ON af.action_id = a.id JOIN files f ON f.id = af.file_id
       WHERE a.session_id = ? ORDER BY a.seq, f.path, af.access`,
    ).all(sessionId) as SessionTouchRow[];
  }
}

function actionProperties(a: ActionRow): Record<string, unknown> {
  const risk = parse<RiskAssessment>(a.risk);
  const error = parseOpt<ActionError>(a.error);
  return compact({
    type: a.type,
    operation: a.operation,
    status: a.status,
    inputSummary: a.input_summary,
    inputHash: a.input_hash,
    tier: a.tier,
    riskScore: risk.score,
    riskLevel: risk.level,
    startedAt: a.started_at,
    endedAt: a.ended_at,
    durationMs: a.duration_ms,
    exitCode: a.exit_code,
    errorClass: error?.class,
    errorMessage: error?.message,
    outputExcerpt: a.output_excerpt,
    seq: a.seq,
  });
}
