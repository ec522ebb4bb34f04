import { type ActionError, type FileTouch, InvalidInputError } from '@switchyard/common';
import { approvalGraph, callContext } from './context-graph.approvals';
import {
  type CheckpointGraphInput,
  checkpointGraph,
  NO_CHECKPOINTS,
  restorableCheckpoint,
} from './context-graph.checkpoints';
import type {
  ActionRecord,
  ActionSummary,
  FailureContext,
  FailureContextQuery,
  FileContext,
  FileLineage,
  FileLineageEntry,
  GraphEdge,
  GraphNode,
  GraphView,
  PlanGraphRecord,
  PlanGraphStep,
  PlanStepRef,
  RetryChainEntry,
  SessionRecord,
} from './context-graph.types';
import type { CheckpointRef } from './checkpoint.types';
import {
  kernelNode,
  kernelNodeId,
  kernelRunRef,
  processNode,
  processNodeId,
  reachedNodeId,
} from './context-graph.stateful';

// Everything an adapter returns is assembled here from plain records, so both stores answer with the same
// values in the same order: the adapters only fetch.

/** A session as stored: what was recorded, and how it ended. */
export interface SessionState extends SessionRecord {
  endedAt?: string;
  endReason?: 'deleted' | 'expired';
}

/** Plain string order (UTF-16 code units), the same whichever store sorted first. */
const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export const fileNodeId = (sessionId: string, path: string): string => `file:${sessionId}:${path}`;
export const sandboxNodeId = (containerId: string): string => `sandbox:${containerId}`;
export const stepNodeId = (planId: string, stepId: string, version: number): string =>
  `step:${planId}:${stepId}:${version}`;

/** One step version as stored: its edges resolved to node ids. */
export interface StoredPlanStep extends Omit<PlanGraphStep, 'replaces'> {
  /** The node id. */
  id: string;
  /** Step node ids (`DEPENDS_ON`). */
  dependsOn: string[];
  /** Step node id (`REPLACES`). */
  replaces?: string;
}

/** A plan as stored, what `sessionGraph` and the replica read. */
export interface StoredPlan extends Omit<PlanGraphRecord, 'steps'> {
  steps: StoredPlanStep[];
}

/**
 * A plan record resolved to node ids: `DEPENDS_ON` to the latest version of each dependency in the record,
 * `REPLACES` to the replaced version when the record has it; one entry per step version (the last wins).
 * Attempts are not checked here (each store keeps those whose action exists in the session).
 */
export function resolvePlan(plan: PlanGraphRecord): StoredPlan {
  const latest = new Map<string, number>();
  for (const s of plan.steps) latest.set(s.stepId, Math.max(latest.get(s.stepId) ?? s.version, s.version));
  const steps = new Map<string, StoredPlanStep>();
  for (const s of plan.steps) {
    const id = stepNodeId(plan.id, s.stepId, s.version);
    const replaced = s.replaces === undefined ? undefined : stepNodeId(plan.id, s.stepId, s.replaces);
    steps.set(id, {
      id,
      stepId: s.stepId,
      version: s.version,
      status: s.status,
      allowFailure: s.allowFailure,
      dependsOn: [...new Set(s.dependsOn)]
        .filter((d) => latest.has(d))
        .map((d) => stepNodeId(plan.id, d, latest.get(d)!))
        .sort(byString),
      attempts: [...new Set(s.attempts)],
      ...(replaced !== undefined && { replaces: replaced }),
    });
  }
  for (const s of steps.values()) if (s.replaces !== undefined && !steps.has(s.replaces)) delete s.replaces;
  return compact({
    id: plan.id,
    sessionId: plan.sessionId,
    goal: plan.goal,
    status: plan.status,
    maxParallel: plan.maxParallel,
    createdAt: plan.createdAt,
    endedAt: plan.endedAt,
    steps: [...steps.values()],
  });
}

export function planNodeProperties(p: StoredPlan): Record<string, unknown> {
  return compact({
    goal: p.goal,
    status: p.status,
    createdAt: p.createdAt,
    endedAt: p.endedAt,
    maxParallel: p.maxParallel,
  });
}

export function stepNodeProperties(s: StoredPlanStep): Record<string, unknown> {
  return { stepId: s.stepId, version: s.version, status: s.status, allowFailure: s.allowFailure };
}

/** Plans by `createdAt` then id, each with its steps by step id then version. */
function sortPlans(plans: StoredPlan[]): StoredPlan[] {
  return [...plans]
    .sort((a, b) => byString(a.createdAt, b.createdAt) || byString(a.id, b.id))
    .map((p) => ({
      ...p,
      steps: [...p.steps].sort((a, b) => byString(a.stepId, b.stepId) || a.version - b.version),
    }));
}

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
    calledBy: a.calledBy?.actionId,
  });
}

/** A session's checkpoints (with their restores) and fork links, as `sessionGraph` reads them. */
export type SessionCheckpoints = CheckpointGraphInput<SessionState>;

/**
 * The graph view of a session and the given actions (in `seq` order, already filtered). Files, sandboxes,
 * kernels, processes and approvals come from the actions' touches, `sandbox`, `kernel`, `startedProcess` and
 * `approval`; edges whose far end is not in the view are left out. A kernel or process met twice keeps its
 * first action's values (the stores keep one node per id, written by its first action). Approvals and calls are
 * laid out by `approvalGraph`, checkpoints and forks by `checkpointGraph`; the sessions at the far end of
 * `FORKED_FROM` edges come last.
 */
export function buildGraphView(
  session: SessionState,
  actions: ActionRecord[],
  storedPlans: StoredPlan[] = [],
  checkpoints: SessionCheckpoints = NO_CHECKPOINTS,
): GraphView {
  const files = new Map<string, string>();
  const sandboxes = new Map<string, GraphNode>();
  const kernels = new Map<string, GraphNode>();
  const processes = new Map<string, GraphNode>();
  for (const a of actions) {
    if (a.kernel && !kernels.has(kernelNodeId(a.kernel.id))) {
      kernels.set(kernelNodeId(a.kernel.id), kernelNode(session.id, a.kernel));
    }
    if (a.startedProcess && !processes.has(processNodeId(a.startedProcess.id))) {
      processes.set(processNodeId(a.startedProcess.id), processNode(session.id, a.startedProcess));
    }
    for (const f of a.files) files.set(fileNodeId(session.id, f.path), f.path);
    if (a.sandbox) {
      const id = sandboxNodeId(a.sandbox.containerId);
      sandboxes.set(id, {
        id,
        label: 'Sandbox',
        properties: {
          tier: a.sandbox.tier,
          containerId: a.sandbox.containerId,
          ...(a.sandbox.runtime !== undefined && { runtime: a.sandbox.runtime }),
        },
      });
    }
  }
  const included = new Set(actions.map((a) => a.id));
  const seqOf = new Map(actions.map((a) => [a.id, a.seq]));
  const saved = checkpointGraph(session.id, included, checkpoints);
  const approvals = approvalGraph(actions);
  const plans = sortPlans(storedPlans);
  const steps = plans.flatMap((p) => p.steps.map((s) => ({ plan: p, step: s })));
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
    ...[...kernels.values()].sort((a, b) => byString(a.id, b.id)),
    ...[...processes.values()].sort((a, b) => byString(a.id, b.id)),
    ...approvals.nodes,
    ...saved.nodes,
    ...plans.map((p): GraphNode => ({ id: p.id, label: 'Plan', properties: planNodeProperties(p) })),
    ...steps.map(({ step }): GraphNode => ({
      id: step.id,
      label: 'Step',
      properties: stepNodeProperties(step),
    })),
    ...saved.forkSessions.map((s): GraphNode => ({
      id: s.id,
      label: 'Session',
      properties: sessionNodeProperties(s),
    })),
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
    ...approvals.callEdges,
    // RAN_IN by the action's seq, then by target id (an action may run in a kernel inside a container).
    ...actions.flatMap((a) =>
      [
        ...(a.sandbox ? [edge(a.id, sandboxNodeId(a.sandbox.containerId), 'RAN_IN')] : []),
        ...(a.kernel
          ? [
              edge(a.id, kernelNodeId(a.kernel.id), 'RAN_IN', {
                executionCount: a.kernel.executionCount,
                started: a.kernel.started,
              }),
            ]
          : []),
      ].sort((x, y) => byString(x.to, y.to)),
    ),
    ...actions.flatMap((a) =>
      a.startedProcess ? [edge(a.id, processNodeId(a.startedProcess.id), 'STARTED')] : [],
    ),
    // The server a proxied connection reached, when the view holds its node (the action that started it).
    ...actions.flatMap((a) =>
      a.reached && (processes.has(reachedNodeId(a.reached)) || kernels.has(reachedNodeId(a.reached)))
        ? [edge(a.id, reachedNodeId(a.reached), 'REACHED', { port: a.reached.port })]
        : [],
    ),
    ...approvals.approvalEdges,
    ...saved.edges,
    ...plans.map((p) => edge(session.id, p.id, 'HAS_PLAN')),
    ...steps.map(({ plan, step }) => edge(plan.id, step.id, 'HAS_STEP')),
    ...steps.flatMap(({ step }) =>
      [...step.dependsOn].sort(byString).map((d) => edge(step.id, d, 'DEPENDS_ON')),
    ),
    ...steps.flatMap(({ step }) =>
      step.attempts
        .filter((id) => included.has(id))
        .sort((a, b) => seqOf.get(a)! - seqOf.get(b)!)
        .map((id) => edge(step.id, id, 'ATTEMPT')),
    ),
    ...steps.flatMap(({ step }) =>
      step.replaces === undefined ? [] : [edge(step.id, step.replaces, 'REPLACES')],
    ),
    ...saved.forkEdges,
  ];
  return { nodes, edges };
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
 * it (any order), the latest earlier writer of each path it touched, the checkpoints taken before its
 * ancestors (by action id; the action's own is on its record), and its callers up the CALLED_BY chain and the
 * actions it called (any order).
 */
export function buildFailureContext(
  action: ActionRecord,
  ancestors: ActionSummary[],
  descendants: ActionSummary[],
  before: ActionSummary[],
  lastWriters: ReadonlyMap<string, ActionSummary>,
  planSteps: PlanStepRef[] = [],
  ancestorCheckpoints: ReadonlyMap<string, CheckpointRef> = new Map(),
  callers: ActionSummary[] = [],
  calls: ActionSummary[] = [],
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
  // An action is the attempt of one step version; should several claim it, the first in a fixed order wins.
  const [planStep] = planSteps
    .map((p) => ({ planId: p.planId, stepId: p.stepId, version: p.version }))
    .sort((a, b) => byString(a.planId, b.planId) || byString(a.stepId, b.stepId) || a.version - b.version);
  return {
    action,
    retryChain,
    before: [...before].sort(bySeq),
    files: [...files.values()],
    planStep: planStep ?? null,
    kernel: action.kernel ? kernelRunRef(action.kernel) : null,
    checkpoint: restorableCheckpoint(action, ancestors, ancestorCheckpoints),
    ...callContext(action, callers, calls),
  };
}

/**
 * Assembles a file's lineage from the actions that touched it (any order): those of the sessions in `sessions`
 * order (a forked session's origins, oldest first, then the session itself), each session's by `seq`.
 */
export function buildFileLineage(
  path: string,
  entries: FileLineageEntry[],
  sessions: readonly string[] = [],
): FileLineage {
  const rank = (e: FileLineageEntry): number => sessions.indexOf(e.sessionId);
  return {
    path,
    entries: [...entries]
      .sort((a, b) => rank(a) - rank(b) || a.seq - b.seq)
      .map((e) => ({ ...e, access: [...new Set(e.access)].sort() })),
  };
}
