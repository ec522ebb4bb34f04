import neo4j from 'neo4j-driver';
import { type ActivityRow, buildSessionActivity, distinctSessionIds } from '../context-graph.activity';
import { checkpointNodeId, checkpointState } from '../context-graph.checkpoints';
import { assertLimit, decodeSeqCursor, encodeSeqCursor } from '../context-graph.cursor';
import { checkGraphFilter } from '../context-graph.filter';
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
import type { CheckpointState } from '../checkpoint.types';
import {
  assertFailureContextQuery,
  buildFailureContext,
  buildFileLineage,
  buildGraphView,
} from '../context-graph.views';
import { toAncestorCheckpoints, toCheckpointGraphInput, toStoredCheckpoint } from './neo4j-checkpoints';
import * as Q from './neo4j-cypher';
import { toPlan, toRecord, toSession, toSummary } from './neo4j-records';

// The read side of the Neo4j store: each port query's one statement, and the port's answer built from its rows.
// Kept apart from the store, which keeps the driver, the transactions and the writes.

/** Node properties as they come back (integers already JS numbers). */
type Props = Record<string, unknown>;

/** Runs one statement in its own read transaction (the store's: tracked and retried); hands back its rows. */
export type ReadStatement = (query: string, params: Props) => Promise<Props[]>;

const UNLIMITED = Number.MAX_SAFE_INTEGER;

export async function readAction(
  read: ReadStatement,
  sessionId: string,
  actionId: string,
): Promise<ActionRecord | undefined> {
  const rows = await read(Q.GET_ACTION, { sessionId, actionId });
  const props = rows[0]?.action as Props | undefined;
  return props && toRecord(props);
}

export async function readLastActionSeq(read: ReadStatement, sessionId: string): Promise<number> {
  const rows = await read(Q.LAST_ACTION_SEQ, { sessionId });
  return rows[0].seq as number;
}

export async function readCheckpoint(
  read: ReadStatement,
  sessionId: string,
  checkpointId: string,
): Promise<CheckpointState | undefined> {
  const rows = await read(Q.GET_CHECKPOINT, { sessionId, id: checkpointNodeId(checkpointId) });
  const props = rows[0]?.checkpoint as Props | undefined;
  return props && checkpointState(toStoredCheckpoint(props));
}

export async function readActions(
  read: ReadStatement,
  sessionId: string,
  query: ListActionsQuery,
): Promise<Page<ActionRecord>> {
  assertLimit(query.limit);
  const after = query.cursor === undefined ? 0 : decodeSeqCursor(query.cursor);
  // One extra row tells whether another page exists without a count.
  const rows = await read(Q.LIST_ACTIONS, {
    sessionId,
    after: neo4j.int(after),
    limit: neo4j.int(Math.min(query.limit + 1, UNLIMITED)),
  });
  const records = rows.map((r) => toRecord(r.action as Props));
  const items = records.slice(0, query.limit);
  return records.length > query.limit
    ? { items, nextCursor: encodeSeqCursor(items[items.length - 1].seq) }
    : { items };
}

export async function readSessionGraph(
  read: ReadStatement,
  sessionId: string,
  filter?: GraphFilter,
): Promise<GraphView> {
  const f = checkGraphFilter(filter);
  const rows = await read(Q.SESSION_GRAPH, {
    sessionId,
    since: f?.since ?? null,
    types: f?.types ?? null,
    status: f?.status ?? null,
    limit: neo4j.int(f?.limit ?? UNLIMITED),
  });
  const row = rows[0];
  if (!row) return { nodes: [], edges: [] };
  const actions = (row.actions as Props[]).map(toRecord).reverse();
  const session = toSession(row.session as Props);
  const plans = (row.plans as Props[]).map((p) => toPlan(p, session.id));
  return buildGraphView(session, actions, plans, toCheckpointGraphInput(row, toSession));
}

export async function readFailureContext(
  read: ReadStatement,
  sessionId: string,
  actionId: string,
  query: FailureContextQuery,
): Promise<FailureContext | undefined> {
  assertFailureContextQuery(query);
  const rows = await read(Q.FAILURE_CONTEXT, { sessionId, actionId, before: neo4j.int(query.before) });
  const row = rows[0];
  if (!row) return undefined;
  const summaries = (key: string): ActionSummary[] => (row[key] as Props[]).map(toSummary);
  const writers = row.writers as { path: string; writer: Props }[];
  return buildFailureContext(
    toRecord(row.action as Props),
    summaries('ancestors'),
    summaries('descendants'),
    summaries('before'),
    new Map(writers.map((w) => [w.path, toSummary(w.writer)])),
    row.planSteps as { planId: string; stepId: string; version: number }[],
    toAncestorCheckpoints(row.ancestorCheckpoints as Props[]),
    summaries('callers'),
    summaries('calls'),
  );
}

export async function readFileLineage(
  read: ReadStatement,
  sessionId: string,
  path: string,
): Promise<FileLineage> {
  const rows = (await read(Q.FILE_LINEAGE, { sessionId, path })).map((r) => ({
    action: r.action as Props,
    access: r.access as ('read' | 'write')[],
    depth: r.depth as number,
  }));
  // Oldest origin (deepest fork) first, the session itself (depth 0) last.
  const sessions = [...new Map(rows.map((r) => [r.action.sessionId as string, r.depth]))]
    .sort(([, a], [, b]) => b - a)
    .map(([id]) => id);
  return buildFileLineage(
    path,
    rows.map((r) => ({
      ...toSummary(r.action),
      sessionId: r.action.sessionId as string,
      access: r.access,
    })),
    sessions,
  );
}

export async function readSessionActivity(
  read: ReadStatement,
  sessionIds: readonly string[],
): Promise<Map<string, SessionActivity>> {
  const ids = distinctSessionIds(sessionIds);
  if (ids.length === 0) return new Map<string, SessionActivity>();
  const rows = await read(Q.SESSION_ACTIVITY, { sessionIds: ids });
  return buildSessionActivity(ids, rows as ActivityRow[]);
}
