import type { ActionStatus } from '@switchyard/common';
import { ApprovalNotPendingError } from './context-graph.errors';
import type {
  ActionRecord,
  ActionSummary,
  ApprovalDecision,
  ApprovalRecord,
  ApprovalRequest,
  CallerRef,
  FailureContext,
  GraphEdge,
  GraphNode,
} from './context-graph.types';

// Approvals (an action held for a person's decision) and calls between actions (a skill calling tools), shared
// by every store: ids, node shapes, the refs as records hand them back, the rules a decision is checked by and
// the order `sessionGraph` and `failureContext` list them in, so the three stores cannot drift apart on them.

export const approvalNodeId = (actionId: string): string => `approval:${actionId}`;

/** A record as a store may read it back: its optional fields null (or absent) where it keeps no value. */
type Nullable<T> = { [K in keyof T]?: T[K] | null };

/**
 * Statuses an action has not ended in: it can still be completed (or be interrupted by a restart). An action
 * awaiting approval has not run, but it has not ended either: a rejection ends it `denied` through completion.
 */
export const OPEN_STATUSES: readonly ActionStatus[] = Object.freeze(['running', 'awaiting_approval']);

export const isOpen = (status: ActionStatus): boolean => OPEN_STATUSES.includes(status);

/** The status an action is recorded with when it starts. */
export const startStatus = (approval: ApprovalRequest | undefined): ActionStatus =>
  approval === undefined ? 'running' : 'awaiting_approval';

/** The status a decision leaves the action in: approved, it runs; otherwise it waits for its completion. */
export const decidedStatus = (decision: ApprovalDecision): ActionStatus =>
  decision.decision === 'approved' ? 'running' : 'awaiting_approval';

/**
 * Whether an action can take a decision; throws `ApprovalNotPendingError` otherwise. `decision` is the one
 * recorded already (null or absent when none); `hasApproval` says whether an approval was asked for at all.
 */
export function assertApprovalPending(
  actionId: string,
  status: ActionStatus,
  hasApproval: boolean,
  decision: string | null | undefined,
): void {
  if (decision !== null && decision !== undefined) {
    throw new ApprovalNotPendingError(actionId, status, decision);
  }
  if (!hasApproval || status !== 'awaiting_approval') throw new ApprovalNotPendingError(actionId, status);
}

/**
 * An approval as every store hands it back: fixed keys, the decision's fields absent (neither null nor
 * undefined) until set, so records compare equal (even with `toStrictEqual`) across stores.
 */
export function approvalRecord(
  a: Omit<ApprovalRequest, 'reasons'> & { reasons: readonly string[] } & Nullable<ApprovalDecision>,
): ApprovalRecord {
  return {
    rule: a.rule,
    layer: a.layer,
    reasons: [...a.reasons],
    requestedAt: a.requestedAt,
    expiresAt: a.expiresAt,
    ...(a.decision !== undefined && a.decision !== null && { decision: a.decision }),
    ...(a.decidedAt !== undefined && a.decidedAt !== null && { decidedAt: a.decidedAt }),
    ...(a.decidedBy !== undefined && a.decidedBy !== null && { decidedBy: a.decidedBy }),
    ...(a.reason !== undefined && a.reason !== null && { reason: a.reason }),
  };
}

/** A caller ref as every store hands it back (fixed keys). */
export const callerRef = (c: CallerRef): CallerRef => ({ actionId: c.actionId, depth: c.depth });

/**
 * The `Approval` node's properties: primitives only, as Neo4j stores them (`reasons` as JSON text, like every
 * nested value), the decision's fields only once decided.
 */
export function approvalNodeProperties(
  actionId: string,
  sessionId: string,
  a: ApprovalRecord,
): Record<string, unknown> {
  return {
    actionId,
    sessionId,
    rule: a.rule,
    layer: a.layer,
    reasons: JSON.stringify(a.reasons),
    requestedAt: a.requestedAt,
    expiresAt: a.expiresAt,
    ...(a.decision !== undefined && { decision: a.decision }),
    ...(a.decidedAt !== undefined && { decidedAt: a.decidedAt }),
    ...(a.decidedBy !== undefined && { decidedBy: a.decidedBy }),
    ...(a.reason !== undefined && { reason: a.reason }),
  };
}

/** The part of a session graph approvals and calls add, each list already in its place's order. */
export interface ApprovalGraph {
  /** `Approval` nodes, by their action's `seq` (after `Process` nodes). */
  nodes: GraphNode[];
  /** `CALLED_BY`, by the callee's `seq` (right after `RETRY_OF`); only when the caller is included too. */
  callEdges: GraphEdge[];
  /** `HAS_APPROVAL`, by the action's `seq` (right after `STARTED`). */
  approvalEdges: GraphEdge[];
}

/** Approvals and calls of the given actions (in `seq` order, already filtered). */
export function approvalGraph(actions: readonly ActionRecord[]): ApprovalGraph {
  const included = new Set(actions.map((a) => a.id));
  const approved = actions.filter((a) => a.approval !== undefined);
  return {
    nodes: approved.map((a) => ({
      id: approvalNodeId(a.id),
      label: 'Approval',
      properties: approvalNodeProperties(a.id, a.sessionId, a.approval!),
    })),
    callEdges: actions.flatMap((a): GraphEdge[] =>
      a.calledBy !== undefined && included.has(a.calledBy.actionId)
        ? [
            {
              from: a.id,
              to: a.calledBy.actionId,
              type: 'CALLED_BY',
              properties: { depth: a.calledBy.depth },
            },
          ]
        : [],
    ),
    approvalEdges: approved.map((a) => ({
      from: a.id,
      to: approvalNodeId(a.id),
      type: 'HAS_APPROVAL',
      properties: {},
    })),
  };
}

/** What a failure context adds about calls and approvals. */
export type CallContext = Pick<FailureContext, 'callers' | 'calls' | 'approval'>;

/**
 * The call context of `action` from its callers up the `CALLED_BY` chain and its direct callees (any order):
 * callers walked from the direct caller up (each summary names its own caller), callees by `seq`.
 */
export function callContext(
  action: ActionRecord,
  callers: readonly ActionSummary[],
  calls: readonly ActionSummary[],
): CallContext {
  const byId = new Map(callers.map((c) => [c.id, c]));
  const chain: ActionSummary[] = [];
  const seen = new Set<string>([action.id]);
  for (let id = action.calledBy?.actionId; id !== undefined && !seen.has(id);) {
    seen.add(id);
    const caller = byId.get(id);
    if (!caller) break;
    chain.push(caller);
    id = caller.calledBy;
  }
  return {
    callers: chain,
    calls: [...calls].sort((a, b) => a.seq - b.seq),
    approval: action.approval ? approvalRecord(action.approval) : null,
  };
}
