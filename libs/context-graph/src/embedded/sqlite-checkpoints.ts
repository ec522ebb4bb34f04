import type { StatementSync } from 'node:sqlite';
import {
  checkpointNodeId,
  forkRecord,
  latestCheckpointRef,
  sameFork,
  type StoredCheckpoint,
  storedCheckpoint,
} from '../context-graph.checkpoints';
import {
  ActionNotRecordedError,
  CheckpointNotRecordedError,
  ForkConflictError,
  SessionNotRecordedError,
} from '../context-graph.errors';
import type { CheckpointRecord, CheckpointRef, ForkRecord, RestoreRecord } from '../checkpoint.types';
import type { SessionCheckpoints, SessionState } from '../context-graph.views';

// Workspace checkpoints, restores and forks in the embedded store: their tables, the writers the store calls
// inside its write transactions, and the readers for records, `sessionGraph`, lineage and the outbox. Kept
// apart from the store so its file does not grow with every new kind of node.

/**
 * `checkpoints`: one row per `Checkpoint` node (keyed by node id, the first record of an id kept), with its
 * `BEFORE` edge as a column (a checkpoint is taken before one action at most). `restores`: one row per
 * `RESTORED` edge, known by checkpoint, start node (the action, else the session) and time. `forks`: one row
 * per `FORKED_FROM` edge, keyed by the new session (it has one origin). New tables only, so a version-6 file
 * gains them as they are.
 */
export const CHECKPOINT_SCHEMA = `
CREATE TABLE IF NOT EXISTS checkpoints (
  id TEXT PRIMARY KEY,
  checkpoint_id TEXT NOT NULL,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  label TEXT,
  created_at TEXT NOT NULL,
  files INTEGER NOT NULL,
  directories INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  auto INTEGER NOT NULL CHECK (auto IN (0, 1)),
  seq INTEGER NOT NULL,
  before_action_id TEXT REFERENCES actions(id),
  deleted_at TEXT,
  delete_reason TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS checkpoints_by_session ON checkpoints(session_id);
CREATE INDEX IF NOT EXISTS checkpoints_by_action ON checkpoints(before_action_id)
  WHERE before_action_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS restores (
  checkpoint_id TEXT NOT NULL REFERENCES checkpoints(id),
  from_id TEXT NOT NULL,
  action_id TEXT REFERENCES actions(id),
  restored_at TEXT NOT NULL,
  plan_id TEXT,
  PRIMARY KEY (checkpoint_id, from_id, restored_at)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS forks (
  session_id TEXT PRIMARY KEY REFERENCES sessions(id),
  from_session_id TEXT NOT NULL REFERENCES sessions(id),
  checkpoint_id TEXT,
  forked_at TEXT NOT NULL,
  seq INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS forks_by_source ON forks(from_session_id);
`;

/**
 * The sessions whose records an answer about session `?1` draws on: itself, its fork origins (its lineage
 * begins with theirs) and the sessions forked from it (its graph shows them). A subquery for `IN (…)`.
 */
export const FORK_RELATED_SESSIONS = `
  WITH RECURSIVE up(id) AS (
    SELECT ?1 UNION SELECT f.from_session_id FROM forks f JOIN up ON f.session_id = up.id)
  SELECT id FROM up UNION SELECT session_id FROM forks WHERE from_session_id = ?1`;

/** The store's statement cache: SQL text in, a prepared statement out. */
type Sql = (sql: string) => StatementSync;

type CheckpointRow = {
  id: string;
  checkpoint_id: string;
  session_id: string;
  label: string | null;
  created_at: string;
  files: number;
  directories: number;
  bytes: number;
  auto: number;
  seq: number;
  before_action_id: string | null;
  deleted_at: string | null;
  delete_reason: StoredCheckpoint['deleteReason'] | null;
};
type RestoreRow = {
  checkpoint_id: string;
  engine_id: string;
  session_id: string;
  action_id: string | null;
  restored_at: string;
  plan_id: string | null;
};
type ForkRow = {
  session_id: string;
  from_session_id: string;
  checkpoint_id: string | null;
  forked_at: string;
  seq: number;
};

function assertSession(sql: Sql, sessionId: string): void {
  if (!sql('SELECT 1 FROM sessions WHERE id = ?').get(sessionId))
    throw new SessionNotRecordedError(sessionId);
}

function assertAction(sql: Sql, actionId: string | undefined, sessionId: string): void {
  if (
    actionId !== undefined &&
    !sql('SELECT 1 FROM actions WHERE id = ? AND session_id = ?').get(actionId, sessionId)
  ) {
    throw new ActionNotRecordedError(actionId, sessionId);
  }
}

function assertCheckpoint(sql: Sql, checkpointId: string, sessionId: string): void {
  if (
    !sql('SELECT 1 FROM checkpoints WHERE id = ? AND session_id = ?').get(
      checkpointNodeId(checkpointId),
      sessionId,
    )
  ) {
    throw new CheckpointNotRecordedError(checkpointId, sessionId);
  }
}

/** Inside a write: the checkpoint's row, unless its id is recorded already. True when it was written. */
export function insertCheckpoint(sql: Sql, c: CheckpointRecord): boolean {
  assertSession(sql, c.sessionId);
  assertAction(sql, c.beforeActionId, c.sessionId);
  const { changes } = sql(
    `INSERT INTO checkpoints (id, checkpoint_id, session_id, label, created_at, files, directories, bytes, auto,
       seq, before_action_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
  ).run(
    checkpointNodeId(c.id),
    c.id,
    c.sessionId,
    c.label ?? null,
    c.createdAt,
    c.files,
    c.directories,
    c.bytes,
    c.auto ? 1 : 0,
    c.seq,
    c.beforeActionId ?? null,
  );
  return Number(changes) > 0;
}

/** Inside a write: the first deletion of the session's checkpoint is kept. */
export function markCheckpointDeleted(
  sql: Sql,
  sessionId: string,
  checkpointId: string,
  deletedAt: string,
  reason: 'deleted' | 'pruned',
): void {
  const { changes } = sql(
    `UPDATE checkpoints SET deleted_at = COALESCE(deleted_at, ?), delete_reason = COALESCE(delete_reason, ?)
     WHERE id = ? AND session_id = ?`,
  ).run(deletedAt, reason, checkpointNodeId(checkpointId), sessionId);
  if (Number(changes) === 0) throw new CheckpointNotRecordedError(checkpointId, sessionId);
}

/** Inside a write: one `RESTORED` edge, unless this very restore is recorded already. True when written. */
export function insertRestore(sql: Sql, r: RestoreRecord): boolean {
  assertSession(sql, r.sessionId);
  assertAction(sql, r.actionId, r.sessionId);
  assertCheckpoint(sql, r.checkpointId, r.sessionId);
  const { changes } = sql(
    `INSERT INTO restores (checkpoint_id, from_id, action_id, restored_at, plan_id) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT DO NOTHING`,
  ).run(
    checkpointNodeId(r.checkpointId),
    r.actionId ?? r.sessionId,
    r.actionId ?? null,
    r.restoredAt,
    r.planId ?? null,
  );
  return Number(changes) > 0;
}

/**
 * Inside a write: the session's fork origin. True when it was written, false when the same one was there
 * already; checks in the order the port documents (sessions, checkpoint, another origin, a cycle).
 */
export function insertFork(sql: Sql, f: ForkRecord): boolean {
  assertSession(sql, f.sessionId);
  assertSession(sql, f.fromSessionId);
  if (f.checkpointId !== undefined) assertCheckpoint(sql, f.checkpointId, f.fromSessionId);
  const existing = sql('SELECT * FROM forks WHERE session_id = ?').get(f.sessionId) as ForkRow | undefined;
  if (existing) {
    if (sameFork(toFork(existing), f)) return false;
    throw new ForkConflictError(f.sessionId, f.fromSessionId, 'already_forked');
  }
  const cycle = sql(
    `WITH RECURSIVE up(id) AS (
       SELECT ?1 UNION SELECT f.from_session_id FROM forks f JOIN up ON f.session_id = up.id)
     SELECT 1 FROM up WHERE id = ?2`,
  ).get(f.fromSessionId, f.sessionId);
  if (cycle) throw new ForkConflictError(f.sessionId, f.fromSessionId, 'cycle');
  sql(
    'INSERT INTO forks (session_id, from_session_id, checkpoint_id, forked_at, seq) VALUES (?, ?, ?, ?, ?)',
  ).run(f.sessionId, f.fromSessionId, f.checkpointId ?? null, f.forkedAt, f.seq);
  return true;
}

/**
 * The checkpoint taken before each of the actions (a JSON list of ids, bound as one parameter; the latest when
 * several were), one query whatever the number of actions. Actions without one are absent from the map.
 */
export function readCheckpointRefs(sql: Sql, actionIdsJson: string): Map<string, CheckpointRef> {
  const taken = new Map<string, CheckpointRow[]>();
  for (const row of sql(
    `SELECT * FROM checkpoints WHERE before_action_id IN (SELECT value FROM json_each(?))`,
  ).all(actionIdsJson) as CheckpointRow[]) {
    taken.set(row.before_action_id!, [...(taken.get(row.before_action_id!) ?? []), row]);
  }
  return new Map(
    [...taken].map(([actionId, rows]) => [
      actionId,
      latestCheckpointRef(
        rows.map((row) => ({
          id: row.checkpoint_id,
          label: row.label,
          createdAt: row.created_at,
          auto: row.auto === 1,
          deletedAt: row.deleted_at,
        })),
      )!,
    ]),
  );
}

/** Checkpoints (with their restores) whose `column` (`session_id`, or `id` for one node) equals `value`. */
export function readCheckpoints(sql: Sql, column: 'session_id' | 'id', value: string): StoredCheckpoint[] {
  const rows = sql(`SELECT * FROM checkpoints WHERE ${column} = ?`).all(value) as CheckpointRow[];
  if (rows.length === 0) return [];
  const restores = sql(
    `SELECT r.*, c.checkpoint_id AS engine_id, c.session_id
     FROM restores r JOIN checkpoints c ON c.id = r.checkpoint_id WHERE c.${column} = ?`,
  ).all(value) as RestoreRow[];
  return rows.map((row) =>
    storedCheckpoint({
      id: row.checkpoint_id,
      sessionId: row.session_id,
      label: row.label,
      createdAt: row.created_at,
      files: row.files,
      directories: row.directories,
      bytes: row.bytes,
      auto: row.auto === 1,
      seq: row.seq,
      beforeActionId: row.before_action_id,
      deletedAt: row.deleted_at,
      deleteReason: row.delete_reason,
      restores: restores
        .filter((r) => r.checkpoint_id === row.id)
        .map((r) => ({
          sessionId: r.session_id,
          checkpointId: r.engine_id,
          restoredAt: r.restored_at,
          actionId: r.action_id,
          planId: r.plan_id,
        })),
    }),
  );
}

/** The fork origin of a session, if it has one. */
export function readFork(sql: Sql, sessionId: string): ForkRecord | undefined {
  const row = sql('SELECT * FROM forks WHERE session_id = ?').get(sessionId) as ForkRow | undefined;
  return row && toFork(row);
}

/** What `sessionGraph` shows of a session's checkpoints and forks; `session` reads the other sessions. */
export function readSessionCheckpoints(
  sql: Sql,
  sessionId: string,
  session: (id: string) => SessionState | undefined,
): SessionCheckpoints {
  const origin = readFork(sql, sessionId);
  const source = origin && session(origin.fromSessionId);
  const forks = (sql('SELECT * FROM forks WHERE from_session_id = ?').all(sessionId) as ForkRow[]).map(
    toFork,
  );
  return {
    checkpoints: readCheckpoints(sql, 'session_id', sessionId),
    ...(origin && source && { origin: { fork: origin, session: source } }),
    forks: forks.flatMap((fork) => {
      const forked = session(fork.sessionId);
      return forked ? [{ fork, session: forked }] : [];
    }),
  };
}

/** A session's fork origins, oldest first, each with the seq its fork cut the lineage at. */
export function readForkOrigins(sql: Sql, sessionId: string): { sessionId: string; seq: number }[] {
  return sql(
    `WITH RECURSIVE up(from_session_id, seq, depth) AS (
       SELECT from_session_id, seq, 1 FROM forks WHERE session_id = ?
       UNION ALL
       SELECT f.from_session_id, f.seq, up.depth + 1 FROM forks f JOIN up ON f.session_id = up.from_session_id)
     SELECT from_session_id AS sessionId, seq FROM up ORDER BY depth DESC`,
  ).all(sessionId) as { sessionId: string; seq: number }[];
}

function toFork(row: ForkRow): ForkRecord {
  return forkRecord({
    sessionId: row.session_id,
    fromSessionId: row.from_session_id,
    checkpointId: row.checkpoint_id,
    forkedAt: row.forked_at,
    seq: row.seq,
  });
}
