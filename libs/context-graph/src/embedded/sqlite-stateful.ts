import type { StatementSync } from 'node:sqlite';
import {
  kernelNodeId,
  kernelRunRef,
  processGraphRef,
  processNodeId,
  reachedRef,
} from '../context-graph.stateful';
import type { ActionCompletion, KernelRunRef, ProcessGraphRef, ReachedRef } from '../context-graph.types';

// Session kernels and background processes in the embedded store: their tables, and the writer and reader
// the store calls from `recordActionCompleted` and when it turns action rows into records. Kept apart from the
// store so its file does not grow with every new kind of node.

/**
 * One row per `Kernel` / `Process` node (keyed by node id, first writer wins, like sandboxes), and one row
 * per edge: `kernel_runs` is `RAN_IN` with its properties, `process_starts` is `STARTED`, `reached_servers` is
 * `REACHED` (by the server's own id, which may have no node). Edges live in their
 * own tables rather than as columns of `actions`, so adding them to an older file is only new tables.
 */
export const STATEFUL_SCHEMA = `
CREATE TABLE IF NOT EXISTS kernels (
  id TEXT PRIMARY KEY,
  kernel_id TEXT NOT NULL,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  language TEXT NOT NULL,
  tier TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS kernel_runs (
  action_id TEXT PRIMARY KEY REFERENCES actions(id),
  kernel_id TEXT NOT NULL REFERENCES kernels(id),
  execution_count INTEGER NOT NULL,
  started INTEGER NOT NULL CHECK (started IN (0, 1))
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS processes (
  id TEXT PRIMARY KEY,
  process_id TEXT NOT NULL,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  name TEXT,
  command TEXT NOT NULL,
  tier TEXT NOT NULL,
  started_at TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS process_starts (
  action_id TEXT PRIMARY KEY REFERENCES actions(id),
  process_id TEXT NOT NULL REFERENCES processes(id)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS reached_servers (
  action_id TEXT PRIMARY KEY REFERENCES actions(id),
  kind TEXT NOT NULL CHECK (kind IN ('process', 'kernel')),
  target_id TEXT NOT NULL,
  port INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`;

/** The store's statement cache: SQL text in, a prepared statement out. */
type Sql = (sql: string) => StatementSync;

/** What an action's record gains from these tables. */
export interface StatefulRefs {
  kernel?: KernelRunRef;
  startedProcess?: ProcessGraphRef;
  reached?: ReachedRef;
}

type KernelRow = {
  action_id: string;
  kernel_id: string;
  language: KernelRunRef['language'];
  tier: KernelRunRef['tier'];
  execution_count: number;
  started: number;
};
type ProcessRow = {
  action_id: string;
  process_id: string;
  name: string | null;
  command: string;
  tier: ProcessGraphRef['tier'];
  started_at: string;
};

type ReachedRow = { action_id: string; kind: ReachedRef['kind']; target_id: string; port: number };

/** Inside the completion's write: the action's `Kernel`/`Process` nodes (once per id) and its edges to them. */
export function writeStatefulRefs(sql: Sql, actionId: string, sessionId: string, c: ActionCompletion): void {
  if (c.kernel) {
    const id = kernelNodeId(c.kernel.id);
    sql(
      `INSERT INTO kernels (id, kernel_id, session_id, language, tier) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
    ).run(id, c.kernel.id, sessionId, c.kernel.language, c.kernel.tier);
    sql('INSERT INTO kernel_runs (action_id, kernel_id, execution_count, started) VALUES (?, ?, ?, ?)').run(
      actionId,
      id,
      c.kernel.executionCount,
      c.kernel.started ? 1 : 0,
    );
  }
  if (c.startedProcess) {
    const p = c.startedProcess;
    const id = processNodeId(p.id);
    sql(
      `INSERT INTO processes (id, process_id, session_id, name, command, tier, started_at)
       VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
    ).run(id, p.id, sessionId, p.name ?? null, p.command, p.tier, p.startedAt);
    sql('INSERT INTO process_starts (action_id, process_id) VALUES (?, ?)').run(actionId, id);
  }
  // Not a reference to the node's row: the server may be one the store has no node for (yet).
  if (c.reached) {
    sql('INSERT INTO reached_servers (action_id, kind, target_id, port) VALUES (?, ?, ?, ?)').run(
      actionId,
      c.reached.kind,
      c.reached.id,
      c.reached.port,
    );
  }
}

/**
 * The kernel and started process of each of the actions (a JSON list of ids, bound as one parameter), one
 * query per table whatever the number of actions. Actions with neither are absent from the map.
 */
export function readStatefulRefs(sql: Sql, actionIdsJson: string): Map<string, StatefulRefs> {
  const refs = new Map<string, StatefulRefs>();
  const of = (actionId: string): StatefulRefs => {
    let entry = refs.get(actionId);
    if (!entry) refs.set(actionId, (entry = {}));
    return entry;
  };
  for (const k of sql(
    `SELECT r.action_id, k.kernel_id, k.language, k.tier, r.execution_count, r.started
     FROM kernel_runs r JOIN kernels k ON k.id = r.kernel_id
     WHERE r.action_id IN (SELECT value FROM json_each(?))`,
  ).all(actionIdsJson) as KernelRow[]) {
    of(k.action_id).kernel = kernelRunRef({
      id: k.kernel_id,
      language: k.language,
      tier: k.tier,
      executionCount: k.execution_count,
      started: k.started === 1,
    });
  }
  for (const p of sql(
    `SELECT s.action_id, p.process_id, p.name, p.command, p.tier, p.started_at
     FROM process_starts s JOIN processes p ON p.id = s.process_id
     WHERE s.action_id IN (SELECT value FROM json_each(?))`,
  ).all(actionIdsJson) as ProcessRow[]) {
    of(p.action_id).startedProcess = processGraphRef({
      id: p.process_id,
      name: p.name,
      command: p.command,
      tier: p.tier,
      startedAt: p.started_at,
    });
  }
  for (const r of sql(
    `SELECT action_id, kind, target_id, port FROM reached_servers
     WHERE action_id IN (SELECT value FROM json_each(?))`,
  ).all(actionIdsJson) as ReachedRow[]) {
    of(r.action_id).reached = reachedRef({ kind: r.kind, id: r.target_id, port: r.port });
  }
  return refs;
}
