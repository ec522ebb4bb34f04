import { type ActivityRow, buildSessionActivity } from '../context-graph.activity';
import { assertLimit, decodeSeqCursor, encodeSeqCursor } from '../context-graph.cursor';
import type {
  ActionRecord,
  ActionSummary,
  FailureContext,
  FailureContextQuery,
  FileLineage,
  GraphFilter,
  GraphView,
  ListActionsQuery,
  Page,
  SessionActivity,
} from '../context-graph.types';
import type { CheckpointRef } from '../checkpoint.types';
import { checkGraphFilter } from '../context-graph.filter';
import {
  assertFailureContextQuery,
  buildFailureContext,
  buildFileLineage,
  buildGraphView,
  fileNodeId,
  summarize,
} from '../context-graph.views';
import { readForkOrigins, readSessionCheckpoints } from './sqlite-checkpoints';
import {
  ACTION_COLUMNS,
  ACTION_COLUMNS_OF_A,
  type ActionRow,
  hydrate,
  list,
  readAction,
  readPlans,
  readSession,
  type Sql,
} from './sqlite-rows';

// The read side of the embedded store: the queries behind the port's timeline (`listActions`), `sessionGraph`,
// `failureContext`, `fileLineage` and `sessionActivity`. Each selects rows, hydrates them into records and
// hands them to the view builders shared with the Neo4j store.

export function readLastActionSeq(sql: Sql, sessionId: string): number {
  const row = sql('SELECT MAX(seq) AS seq FROM actions WHERE session_id = ?').get(sessionId) as {
    seq: number | null;
  };
  return row.seq ?? 0;
}

export function readActionPage(sql: Sql, sessionId: string, query: ListActionsQuery): Page<ActionRecord> {
  assertLimit(query.limit);
  const after = query.cursor === undefined ? 0 : decodeSeqCursor(query.cursor);
  // One extra row tells whether another page exists without a COUNT.
  const rows = sql(
    `SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
  ).all(sessionId, after, query.limit + 1) as ActionRow[];
  const items = hydrate(sql, rows.slice(0, query.limit));
  return rows.length > query.limit
    ? { items, nextCursor: encodeSeqCursor(items[items.length - 1].seq) }
    : { items };
}

export function readSessionGraph(sql: Sql, sessionId: string, filter?: GraphFilter): GraphView {
  const f = checkGraphFilter(filter);
  const session = readSession(sql, sessionId);
  if (!session) return { nodes: [], edges: [] };
  // NULL parameters switch a predicate off; the latest `limit` are picked, then put back in seq order.
  const rows = sql(
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
    hydrate(sql, rows.reverse()),
    readPlans(sql, 'SELECT * FROM plans WHERE session_id = ?', sessionId),
    readSessionCheckpoints(sql, sessionId, (id) => readSession(sql, id)),
  );
}

export function readFailureContext(
  sql: Sql,
  sessionId: string,
  actionId: string,
  query: FailureContextQuery,
): FailureContext | undefined {
  assertFailureContextQuery(query);
  const action = readAction(sql, sessionId, actionId);
  if (!action) return undefined;
  const ancestors = sql(
    `WITH RECURSIVE up(id) AS (
       SELECT retry_of FROM actions WHERE id = ? AND retry_of IS NOT NULL
       UNION SELECT a.retry_of FROM actions a JOIN up ON a.id = up.id WHERE a.retry_of IS NOT NULL)
     SELECT ${ACTION_COLUMNS} FROM actions WHERE id IN (SELECT id FROM up)`,
  ).all(actionId) as ActionRow[];
  const descendants = sql(
    `WITH RECURSIVE down(id) AS (
       SELECT id FROM actions WHERE retry_of = ?
       UNION SELECT a.id FROM actions a JOIN down ON a.retry_of = down.id)
     SELECT ${ACTION_COLUMNS} FROM actions WHERE id IN (SELECT id FROM down)`,
  ).all(actionId) as ActionRow[];
  const before = sql(
    `SELECT ${ACTION_COLUMNS} FROM actions WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
  ).all(sessionId, action.seq, query.before) as ActionRow[];
  const writerRows = new Map<string, ActionRow>();
  for (const path of new Set(action.files.map((t) => t.path))) {
    const writer = sql(
      `SELECT ${ACTION_COLUMNS_OF_A} FROM action_files af JOIN actions a ON a.id = af.action_id
       WHERE af.file_id = ? AND af.access = 'write' AND a.seq < ? ORDER BY a.seq DESC LIMIT 1`,
    ).get(fileNodeId(sessionId, path), action.seq) as ActionRow | undefined;
    if (writer) writerRows.set(path, writer);
  }
  const summaries = (rows: ActionRow[]): ActionSummary[] => hydrate(sql, rows).map(summarize);
  const writers = summaries([...writerRows.values()]);
  const ancestorRecords = hydrate(sql, ancestors);
  const planSteps = sql(
    `SELECT s.plan_id AS planId, s.step_id AS stepId, s.version AS version
     FROM step_attempts t JOIN plan_steps s ON s.id = t.step_id WHERE t.action_id = ?`,
  ).all(actionId) as { planId: string; stepId: string; version: number }[];
  const callers = sql(
    `WITH RECURSIVE up(id) AS (
       SELECT caller_id FROM action_calls WHERE action_id = ?
       UNION SELECT c.caller_id FROM action_calls c JOIN up ON c.action_id = up.id)
     SELECT ${ACTION_COLUMNS} FROM actions WHERE id IN (SELECT id FROM up)`,
  ).all(actionId) as ActionRow[];
  const calls = sql(
    `SELECT ${ACTION_COLUMNS} FROM actions
     WHERE id IN (SELECT action_id FROM action_calls WHERE caller_id = ?) ORDER BY seq`,
  ).all(actionId) as ActionRow[];
  return buildFailureContext(
    action,
    ancestorRecords.map(summarize),
    summaries(descendants),
    summaries(before),
    new Map([...writerRows.keys()].map((path, i) => [path, writers[i]])),
    planSteps,
    new Map(
      ancestorRecords.flatMap((a): [string, CheckpointRef][] => (a.checkpoint ? [[a.id, a.checkpoint]] : [])),
    ),
    summaries(callers),
    summaries(calls),
  );
}

export function readFileLineage(sql: Sql, sessionId: string, path: string): FileLineage {
  // Each fork origin's actions up to the seq its fork was cut at, then the session's own.
  const sources = [...readForkOrigins(sql, sessionId), { sessionId, seq: Number.MAX_SAFE_INTEGER }];
  const rows = sources.flatMap(
    (source) =>
      sql(
        `SELECT ${ACTION_COLUMNS_OF_A} FROM actions a
         WHERE a.id IN (SELECT action_id FROM action_files WHERE file_id = ?) AND a.seq <= ? ORDER BY a.seq`,
      ).all(fileNodeId(source.sessionId, path), source.seq) as ActionRow[],
  );
  return buildFileLineage(
    path,
    hydrate(sql, rows).map((a) => ({
      ...summarize(a),
      sessionId: a.sessionId,
      access: a.files.filter((f) => f.path === path).map((f) => f.access),
    })),
    sources.map((s) => s.sessionId),
  );
}

/** `ids` are distinct and not empty. */
export function readSessionActivity(sql: Sql, ids: readonly string[]): Map<string, SessionActivity> {
  // The LEFT JOIN keeps a session without actions: one row of NULLs counting 0.
  const rows = sql(
    `SELECT s.id AS sessionId, a.status AS status, a.tier AS tier, COUNT(a.id) AS actions,
       MAX(a.started_at) AS lastStartedAt
     FROM sessions s LEFT JOIN actions a ON a.session_id = s.id
     WHERE s.id IN (SELECT value FROM json_each(?))
     GROUP BY s.id, a.status, a.tier`,
  ).all(list(ids)) as ActivityRow[];
  return buildSessionActivity(ids, rows);
}
