import type { DatabaseSync } from 'node:sqlite';
import { APPROVAL_SCHEMA } from './sqlite-approvals';
import { CHECKPOINT_SCHEMA } from './sqlite-checkpoints';
import { STATEFUL_SCHEMA } from './sqlite-stateful';

// The embedded store's tables (DDL) and the migrations that bring an older file up to them. The store runs
// `applySchema` once per open, inside its init transaction.

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
${APPROVAL_SCHEMA}
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
 * for version 3, keeping its entries). Approvals and calls between actions (sqlite-approvals) came later as new
 * tables and a new index only, which SCHEMA creates at every open, and travel in their action's outbox entry: a
 * version-7 file without them gains them in place, with no step of its own.
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

/** Inside the init transaction: migrates an older file step by step, then creates what is missing. */
export function applySchema(db: DatabaseSync): void {
  let version = Number(Object.values(db.prepare('PRAGMA user_version').get() ?? {})[0]);
  // A fresh file gets the current schema at once; an older one is migrated step by step first.
  if (version === 0) version = SCHEMA_VERSION;
  for (; version < SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]);
  db.exec(`${SCHEMA} PRAGMA user_version = ${SCHEMA_VERSION};`);
}
