import neo4j from 'neo4j-driver';
import {
  approvalNodeId,
  approvalNodeProperties,
  approvalRecord,
  assertApprovalPending,
  callerRef,
  decidedStatus,
} from '../context-graph.approvals';
import { ActionNotRecordedError } from '../context-graph.errors';
import type {
  ActionRecord,
  ActionStart,
  ApprovalDecision,
  ApprovalRecord,
  CallerRef,
} from '../context-graph.types';
import type { WriteStatement } from './neo4j-write';

// Approvals and calls between actions in the Neo4j store: the Cypher fragments the action statements (in
// neo4j-cypher.ts) splice in, the decision's statement and writer, the parameters they read and the refs rebuilt
// from what `actionMap` returns. Kept apart from the store so its files do not grow with every new kind of node.
//
// Model: (:Action)-[:HAS_APPROVAL]->(:Approval {id: 'approval:<actionId>', actionId, rule, layer, reasons,
// requestedAt, expiresAt, decision, decidedAt, decidedBy, reason}), (:Action)-[:CALLED_BY {depth}]->(:Action).

/** Node properties as they come back (integers already JS numbers). */
type Props = Record<string, unknown>;

/**
 * At a start: the new action `a`'s `CALLED_BY` edge to its caller (the variable `caller`, null when none) and
 * its `Approval` node (`$approval`: a list of zero or one property maps, so the `FOREACH` runs once or not at
 * all).
 */
export const startApprovalEdges = (a: string, caller: string): string =>
  `FOREACH (_ IN CASE WHEN ${caller} IS NULL THEN [] ELSE [1] END |
    CREATE (${a})-[:CALLED_BY {depth: $callDepth}]->(${caller}))
  FOREACH (req IN $approval | CREATE (${a})-[:HAS_APPROVAL]->(ap:Approval) SET ap = req)`;

/**
 * In a replica: the `CALLED_BY` edge (its depth set, so a replay converges) and the `Approval` node, MERGEd on
 * ids. The request is set as copied; the decision only while the node has none, so a stale copy (taken before
 * the decision) never undoes it. A caller not copied yet is MERGEd as a bare node its own entry fills in (it
 * started first, so its entry comes first anyway), as `RETRY_OF` does.
 */
export const replicaApprovalEdges = (a: string, x: string): string =>
  `FOREACH (c IN ${x}.calledBy |
  MERGE (o:Action {id: c.actionId}) MERGE (${a})-[r:CALLED_BY]->(o) SET r.depth = c.depth)
FOREACH (req IN ${x}.approval |
  MERGE (ap:Approval {id: req.id})
  SET ap += req.request
  SET ap += CASE WHEN ap.decision IS NULL THEN req.decision ELSE {} END
  MERGE (${a})-[:HAS_APPROVAL]->(ap))`;

/** An action's caller, for `actionMap` and `summaryMap` (variable names kept apart from the statements'). */
export const callerProjection = (v: string): string =>
  `calledBy: [(${v})-[ce:CALLED_BY]->(ca:Action) | {actionId: ca.id, depth: ce.depth}][0]`;

/** An action's approval node, for `actionMap`. */
export const approvalProjection = (v: string): string =>
  `approval: [(${v})-[:HAS_APPROVAL]->(ap:Approval) | ap {.*}][0]`;

// The `_lock` write takes the action's write lock before its status and approval are read, so a decision and a
// completion (or two decisions) of one action cannot both find it pending. No row back: no such action.
export const RECORD_APPROVAL_DECISION = `
MATCH (a:Action {id: $actionId})
SET a._lock = true
WITH a, a.status AS status
REMOVE a._lock
WITH a, status
OPTIONAL MATCH (a)-[:HAS_APPROVAL]->(ap:Approval)
WITH a, status, ap, ap.decision AS decided
CALL (a, status, ap, decided) {
  WITH a, ap WHERE status = 'awaiting_approval' AND ap IS NOT NULL AND decided IS NULL
  SET ap += $props, a.status = $status
}
RETURN status, ap IS NOT NULL AS hasApproval, decided`;

export async function writeApprovalDecision(
  write: WriteStatement,
  actionId: string,
  d: ApprovalDecision,
): Promise<void> {
  const [row] = await write(RECORD_APPROVAL_DECISION, {
    actionId,
    props: decisionProperties(d),
    status: decidedStatus(d),
  });
  if (!row) throw new ActionNotRecordedError(actionId);
  assertApprovalPending(
    actionId,
    row.status as ActionRecord['status'],
    row.hasApproval as boolean,
    row.decided as string | null,
  );
}

/** A decision's properties; nulls for what is not set (so `+=` leaves them absent). */
function decisionProperties(d: Partial<ApprovalDecision>): Props {
  return {
    decision: d.decision ?? null,
    decidedAt: d.decidedAt ?? null,
    decidedBy: d.decidedBy ?? null,
    reason: d.reason ?? null,
  };
}

/** The request's part of the `Approval` node: its id and properties, without a decision. */
function requestProperties(actionId: string, sessionId: string, a: ApprovalRecord): Props {
  const { decision: _d, decidedAt: _at, decidedBy: _by, reason: _r, ...request } = a;
  return { id: approvalNodeId(actionId), ...approvalNodeProperties(actionId, sessionId, request) };
}

/** The `$callerId`, `$callDepth` and `$approval` parameters of a start (see `startApprovalEdges`). */
export function startApprovalParams(a: ActionStart): Props {
  return {
    callerId: a.calledBy?.actionId ?? null,
    callDepth: a.calledBy ? neo4j.int(a.calledBy.depth) : null,
    approval: a.approval ? [requestProperties(a.id, a.sessionId, a.approval)] : [],
  };
}

/** A replica action's `calledBy` and `approval` (see `replicaApprovalEdges`): lists of zero or one map. */
export function replicaApprovalParams(a: ActionRecord): Props {
  return {
    calledBy: a.calledBy ? [{ actionId: a.calledBy.actionId, depth: neo4j.int(a.calledBy.depth) }] : [],
    approval: a.approval
      ? [
          {
            id: approvalNodeId(a.id),
            request: requestProperties(a.id, a.sessionId, a.approval),
            decision: a.approval.decision === undefined ? {} : decisionProperties(a.approval),
          },
        ]
      : [],
  };
}

/** The action's caller and approval from its projection (absent when it has none). */
export function approvalRefs(p: Props): {
  approval: ApprovalRecord | undefined;
  calledBy: CallerRef | undefined;
} {
  const caller = p.calledBy as CallerRef | null | undefined;
  const approval = p.approval as Props | null | undefined;
  return {
    approval: approval
      ? approvalRecord({
          rule: approval.rule as string,
          layer: approval.layer as string,
          reasons: JSON.parse(approval.reasons as string) as string[],
          requestedAt: approval.requestedAt as string,
          expiresAt: approval.expiresAt as string,
          decision: approval.decision as ApprovalDecision['decision'] | null,
          decidedAt: approval.decidedAt as string | null,
          decidedBy: approval.decidedBy as string | null,
          reason: approval.reason as string | null,
        })
      : undefined,
    calledBy: caller ? callerRef(caller) : undefined,
  };
}
