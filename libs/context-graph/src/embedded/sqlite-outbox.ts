import type { DatabaseSync } from 'node:sqlite';
import type { StoredCheckpoint } from '../context-graph.checkpoints';
import type { ForkRecord } from '../checkpoint.types';
import type { SessionState, StoredPlan } from '../context-graph.views';
import type { OutboxBatch, ReplicaAction } from '../replication/replication.types';
import { OPEN_ACTION } from './sqlite-approvals';
import { FORK_RELATED_SESSIONS, readCheckpoints, readFork } from './sqlite-checkpoints';
import {
  ACTION_COLUMNS,
  type ActionRow,
  hydrate,
  list,
  readPlans,
  readSession,
  type Sql,
} from './sqlite-rows';

// The replication outbox of the embedded store (the `outbox` table): switching it on or off at open, appending
// entries inside writes, and reading batches of what they name for a forwarder, then dropping them once copied.
// The store decides whether it keeps an outbox; these only run when it does.

type OutboxRow = { id: number; kind: OutboxKind; key: string };
/** What an outbox entry names. */
export type OutboxKind = 'session' | 'action' | 'plan' | 'checkpoint' | 'fork';

/**
 * Runs in the init transaction. Switching the outbox on queues every record already in the file once, so
 * a store added later still receives the whole history; switching it off forgets the queue (the next
 * switch-on queues everything again, and replaying is idempotent).
 */
export function setUpOutbox(db: DatabaseSync, outbox: boolean | undefined): void {
  const state = (
    db.prepare(`SELECT value FROM meta WHERE key = 'outbox'`).get() as { value: string } | undefined
  )?.value;
  const wanted = outbox ? 'on' : 'off';
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

/** Inside a write: names what it changed for the forwarder. */
export function appendToOutbox(sql: Sql, kind: OutboxKind, key: string, sessionId: string): void {
  sql('INSERT INTO outbox (kind, key, session_id) VALUES (?, ?, ?)').run(kind, key, sessionId);
}

/** Inside a write, before they change: names every running or awaiting action, in session and seq order. */
export function appendRunningActions(sql: Sql, sessionIds?: readonly string[]): void {
  sql(
    `INSERT INTO outbox (kind, key, session_id)
     SELECT 'action', id, session_id FROM actions
     WHERE ${OPEN_ACTION} AND (?1 IS NULL OR session_id IN (SELECT value FROM json_each(?1)))
     ORDER BY session_id, seq`,
  ).run(sessionIds === undefined ? null : JSON.stringify(sessionIds));
}

export function countOutbox(sql: Sql): number {
  return Number(Object.values(sql('SELECT count(*) FROM outbox').get() ?? {})[0]);
}

/** Whether an entry of the session, its fork origins or the sessions forked from it is waiting. */
export function outboxHoldsRelated(sql: Sql, sessionId: string): boolean {
  return (
    sql(`SELECT 1 FROM outbox WHERE session_id IN (${FORK_RELATED_SESSIONS}) LIMIT 1`).get(sessionId) !==
    undefined
  );
}

/** Whether an entry of these sessions themselves is waiting. */
export function outboxHoldsOwn(sql: Sql, sessionIds: readonly string[]): boolean {
  return (
    sql('SELECT 1 FROM outbox WHERE session_id IN (SELECT value FROM json_each(?)) LIMIT 1').get(
      list(sessionIds),
    ) !== undefined
  );
}

/**
 * The oldest outbox entries, as the current state of what they name: sessions, then actions in entry
 * order, each once. Stops after `maxEntries` entries or once about `maxBytes` of action data is gathered
 * (always at least one entry).
 */
export function readOutboxBatch(sql: Sql, maxEntries: number, maxBytes: number): OutboxBatch {
  const rows = sql('SELECT id, kind, key FROM outbox ORDER BY id LIMIT ?').all(maxEntries) as OutboxRow[];
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
      const session = sessions.has(row.key) ? undefined : readSession(sql, row.key);
      if (session) sessions.set(row.key, session);
      continue;
    }
    if (row.kind === 'plan') {
      if (plans.has(row.key)) continue;
      const plan = readPlans(sql, 'SELECT * FROM plans WHERE id = ?', row.key)[0];
      if (plan) plans.set(row.key, plan);
      continue;
    }
    if (row.kind === 'checkpoint') {
      const checkpoint = checkpoints.has(row.key) ? undefined : readCheckpoints(sql, 'id', row.key)[0];
      if (checkpoint) checkpoints.set(row.key, checkpoint);
      continue;
    }
    if (row.kind === 'fork') {
      const fork = forks.has(row.key) ? undefined : readFork(sql, row.key);
      if (fork) forks.set(row.key, fork);
      continue;
    }
    if (actions.has(row.key)) continue;
    const actionRow = sql(`SELECT ${ACTION_COLUMNS} FROM actions WHERE id = ?`).get(row.key) as
      ActionRow | undefined;
    if (!actionRow) continue;
    const [record] = hydrate(sql, [actionRow]);
    const prev = sql('SELECT id FROM actions WHERE session_id = ? AND seq = ?').get(
      actionRow.session_id,
      actionRow.seq - 1,
    ) as { id: string } | undefined;
    actions.set(row.key, { ...record, ...(prev && { prevId: prev.id }) });
    bytes +=
      actionRow.input.length +
      (actionRow.result?.length ?? 0) +
      (actionRow.output_excerpt?.length ?? 0) +
      (record.startedProcess?.command.length ?? 0) +
      (record.approval?.rule.length ?? 0);
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

/** Inside a write: drops the entries up to `lastId`. Returns how many. */
export function deleteOutboxUpTo(sql: Sql, lastId: number): number {
  return Number(sql('DELETE FROM outbox WHERE id <= ?').run(lastId).changes);
}
