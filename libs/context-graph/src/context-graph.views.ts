import {
  ACTION_STATUSES,
  ACTION_TYPES,
  type ActionError,
  type FileTouch,
  InvalidInputError,
} from '@switchyard/common';
import type {
  ActionRecord,
  ActionSummary,
  FailureContext,
  FailureContextQuery,
  FileContext,
  FileLineage,
  FileLineageEntry,
  GraphEdge,
  GraphFilter,
  GraphNode,
  GraphView,
  RetryChainEntry,
  SessionRecord,
} from './context-graph.types';

// Everything an adapter returns is assembled here from plain records, so both stores answer with the same
// values in the same order: the adapters only fetch.

/** A session as stored: what was recorded, and how it ended. */
export interface SessionState extends SessionRecord {
  endedAt?: string;
  endReason?: 'deleted' | 'expired';
}

export const fileNodeId = (sessionId: string, path: string): string => `file:${sessionId}:${path}`;
export const sandboxNodeId = (containerId: string): string => `sandbox:${containerId}`;

/** The error recorded on actions a crash left `running`. */
export const INTERRUPTED_ERROR: ActionError = Object.freeze({
  class: 'internal',
  message: 'engine stopped while the action was running',
});

export const MAX_FAILURE_CONTEXT_BEFORE = 100;

/** Graph properties mirror Neo4j, which has no null properties: absent means unknown. */
export function compact<T extends object>(props: T): T {
  return Object.fromEntries(Object.entries(props).filter(([, v]) => v !== undefined && v !== null)) as T;
}

/** Plain string order (UTF-16 code units), the same whichever store sorted first. */
const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A record's `files`, deduplicated and sorted by path then access. */
export function sortTouches(files: FileTouch[]): FileTouch[] {
  const seen = new Map<string, FileTouch>();
  for (const f of files) seen.set(`${f.access}\0${f.path}`, { path: f.path, access: f.access });
  return [...seen.values()].sort((a, b) => byString(a.path, b.path) || byString(a.access, b.access));
}

export function sessionNodeProperties(s: SessionState): Record<string, unknown> {
  return compact({
    createdAt: s.createdAt,
    tenant: s.tenant,
    metadata: JSON.stringify(s.metadata),
    endedAt: s.endedAt,
    endReason: s.endReason,
  });
}

export function actionNodeProperties(a: ActionRecord): Record<string, unknown> {
  return compact({
    type: a.type,
    operation: a.operation,
    status: a.status,
    inputSummary: a.inputSummary,
    inputHash: a.inputHash,
    tier: a.tier,
    riskScore: a.risk.score,
    riskLevel: a.risk.level,
    startedAt: a.startedAt,
    endedAt: a.endedAt,
    durationMs: a.durationMs,
    exitCode: a.exitCode,
    errorClass: a.error?.class,
    errorMessage: a.error?.message,
    outputExcerpt: a.outputExcerpt,
    seq: a.seq,
  });
}

export function summarize(a: ActionRecord): ActionSummary {
  return compact({
    id: a.id,
    seq: a.seq,
    type: a.type,
    operation: a.operation,
    status: a.status,
    inputSummary: a.inputSummary,
    inputHash: a.inputHash,
    startedAt: a.startedAt,
    endedAt: a.endedAt,
    durationMs: a.durationMs,
    tier: a.tier,
    exitCode: a.exitCode,
    error: a.error,
    retryOf: a.retryOf,
    retryReason: a.retryReason,
  });
}

/**
 * The graph view of a session and the given actions (in `seq` order, already filtered). Files and sandboxes
 * come from the actions' touches and `sandbox`; edges whose far end is not in the view are left out.
 */
export function buildGraphView(session: SessionState, actions: ActionRecord[]): GraphView {
  const files = new Map<string, string>();
  const sandboxes = new Map<string, GraphNode>();
  for (const a of actions) {
    for (const f of a.files) files.set(fileNodeId(session.id, f.path), f.path);
    if (a.sandbox) {
      const id = sandboxNodeId(a.sandbox.containerId);
      sandboxes.set(id, {
        id,
        label: 'Sandbox',
        properties: { tier: a.sandbox.tier, containerId: a.sandbox.containerId },
      });
    }
  }
  const included = new Set(actions.map((a) => a.id));
  const edge = (
    from: string,
    to: string,
    type: GraphEdge['type'],
    properties: Record<string, unknown> = {},
  ): GraphEdge => ({ from, to, type, properties });
  const nodes: GraphNode[] = [
    { id: session.id, label: 'Session', properties: sessionNodeProperties(session) },
    ...actions.map((a): GraphNode => ({ id: a.id, label: 'Action', properties: actionNodeProperties(a) })),
    ...[...files.entries()]
      .sort(([, a], [, b]) => byString(a, b))
      .map(([id, path]): GraphNode => ({ id, label: 'File', properties: { path } })),
    ...[...sandboxes.values()].sort((a, b) => byString(a.id, b.id)),
  ];
  const edges: GraphEdge[] = [
    ...actions.map((a) => edge(session.id, a.id, 'HAS_ACTION')),
    ...actions.flatMap((a, i) =>
      i > 0 && actions[i - 1].seq === a.seq - 1 ? [edge(actions[i - 1].id, a.id, 'NEXT')] : [],
    ),
    ...actions.flatMap((a) =>
      a.files.map((f) => edge(a.id, fileNodeId(session.id, f.path), f.access === 'read' ? 'READ' : 'WROTE')),
    ),
    ...actions.flatMap((a) =>
      a.retryOf !== undefined && included.has(a.retryOf)
        ? [edge(a.id, a.retryOf, 'RETRY_OF', compact({ reason: a.retryReason }))]
        : [],
    ),
    ...actions.flatMap((a) =>
      a.sandbox ? [edge(a.id, sandboxNodeId(a.sandbox.containerId), 'RAN_IN')] : [],
    ),
  ];
  return { nodes, edges };
}

/** A filter checked and normalised (`since` as `toISOString()`, so stores compare it as text). */
export interface CheckedGraphFilter {
  since?: string;
  types?: string[];
  status?: string[];
  limit?: number;
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** Validates a `GraphFilter`; `undefined` when it filters nothing. */
export function checkGraphFilter(filter: GraphFilter | undefined): CheckedGraphFilter | undefined {
  if (!filter) return undefined;
  const out: CheckedGraphFilter = {};
  if (filter.since !== undefined) {
    const ms = ISO_INSTANT.test(filter.since) ? Date.parse(filter.since) : NaN;
    if (Number.isNaN(ms)) {
      throw new InvalidInputError('since', 'since must be an ISO 8601 date-time', 'INVALID_SINCE', {
        since: filter.since,
      });
    }
    out.since = new Date(ms).toISOString();
  }
  const members = (
    field: 'types' | 'status',
    values: readonly string[] | undefined,
    allowed: readonly string[],
  ) => {
    if (values === undefined) return undefined;
    const bad = values.filter((v) => !allowed.includes(v));
    if (bad.length > 0 || values.length === 0) {
      throw new InvalidInputError(
        field,
        `${field} must be a non-empty list of: ${allowed.join(', ')}`,
        'INVALID_FILTER',
        {
          [field]: values,
        },
      );
    }
    return [...new Set(values)];
  };
  out.types = members('types', filter.types, ACTION_TYPES);
  out.status = members('status', filter.status, ACTION_STATUSES);
  if (filter.limit !== undefined) {
    if (!Number.isInteger(filter.limit) || filter.limit < 1) {
      throw new InvalidInputError('limit', 'limit must be a positive integer', 'INVALID_LIMIT', {
        limit: filter.limit,
      });
    }
    out.limit = filter.limit;
  }
  return compact(out);
}

/** Whether an action passes a checked filter's predicates (`limit` is applied by the caller). */
export function matchesFilter(a: ActionRecord, f: CheckedGraphFilter): boolean {
  return (
    (f.since === undefined || a.startedAt >= f.since) &&
    (f.types === undefined || f.types.includes(a.type)) &&
    (f.status === undefined || f.status.includes(a.status))
  );
}

export function assertFailureContextQuery(query: FailureContextQuery): void {
  const n = query.before;
  if (!Number.isInteger(n) || n < 0 || n > MAX_FAILURE_CONTEXT_BEFORE) {
    throw new InvalidInputError(
      'before',
      `before must be an integer from 0 to ${MAX_FAILURE_CONTEXT_BEFORE}`,
      'INVALID_BEFORE',
      { before: n },
    );
  }
}

/**
 * Assembles a failure context from the action, its RETRY_OF ancestors and descendants and the actions before
 * it (any order), and the latest earlier writer of each path it touched.
 */
export function buildFailureContext(
  action: ActionRecord,
  ancestors: ActionSummary[],
  descendants: ActionSummary[],
  before: ActionSummary[],
  lastWriters: ReadonlyMap<string, ActionSummary>,
): FailureContext {
  const bySeq = (a: ActionSummary, b: ActionSummary): number => a.seq - b.seq;
  const retryChain: RetryChainEntry[] = [
    ...ancestors.map((a) => ({ ...a, relation: 'ancestor' as const })),
    { ...summarize(action), relation: 'self' as const },
    ...descendants.map((a) => ({ ...a, relation: 'descendant' as const })),
  ].sort(bySeq);
  const files = new Map<string, FileContext>();
  for (const t of action.files) {
    const entry = files.get(t.path) ?? { path: t.path, access: [] };
    entry.access.push(t.access);
    files.set(t.path, entry);
  }
  for (const entry of files.values()) {
    const writer = lastWriters.get(entry.path);
    if (writer) entry.lastWrittenBy = writer;
  }
  return { action, retryChain, before: [...before].sort(bySeq), files: [...files.values()], planStep: null };
}

/** Assembles a file's lineage from the actions that touched it (any order). */
export function buildFileLineage(path: string, entries: FileLineageEntry[]): FileLineage {
  return {
    path,
    entries: [...entries]
      .sort((a, b) => a.seq - b.seq)
      .map((e) => ({ ...e, access: [...new Set(e.access)].sort() })),
  };
}
