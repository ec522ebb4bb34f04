import type { ActionStatus } from '@switchyard/common';
import type { StatementSync } from 'node:sqlite';
import { approvalRecord, assertApprovalPending, callerRef, decidedStatus } from '../context-graph.approvals';
import { ActionNotRecordedError } from '../context-graph.errors';
import type { ActionStart, ApprovalDecision, ApprovalRecord, CallerRef } from '../context-graph.types';

// Approvals and calls between actions in the embedded store: their tables, the writers the store calls from
// `recordActionStarted` and `recordApprovalDecision`, and the reader it calls when it turns action rows into
// records. Kept apart from the store so its files do not grow with every new kind of node.

/**
 * `approvals`: one row per `Approval` node (an action has one at most, so keyed by the action), the decision's
 * columns null until decided. `action_calls`: one row per `CALLED_BY` edge (an action has one caller at most),
 * indexed by caller for the calls of an action. New tables only (like kernels and processes), so an older file
 * gains them as they are; the partial index finds what a restart interrupts, as `actions_running` does.
 */
export const APPROVAL_SCHEMA = `
CREATE TABLE IF NOT EXISTS approvals (
  action_id TEXT PRIMARY KEY REFERENCES actions(id),
  rule TEXT NOT NULL,
  layer TEXT NOT NULL,
  reasons TEXT NOT NULL,
  requested_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  decision TEXT CHECK (decision IN ('approved', 'rejected', 'expired')),
  decided_at TEXT,
  decided_by TEXT,
  reason TEXT
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS action_calls (
  action_id TEXT PRIMARY KEY REFERENCES actions(id),
  caller_id TEXT NOT NULL REFERENCES actions(id),
  depth INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS action_calls_by_caller ON action_calls(caller_id);
CREATE INDEX IF NOT EXISTS actions_awaiting_approval ON actions(status) WHERE status = 'awaiting_approval';
`;

/**
 * The actions that have not ended (`OPEN_STATUSES`), for a WHERE clause. Written as an OR of equalities, not
 * `IN (…)`: SQLite then searches both partial indexes instead of scanning every action.
 */
export const OPEN_ACTION = `(status = 'running' OR status = 'awaiting_approval')`;

/** The store's statement cache: SQL text in, a prepared statement out. */
type Sql = (sql: string) => StatementSync;

/** What an action's record gains from these tables. */
export interface ApprovalRefs {
  approval?: ApprovalRecord;
  calledBy?: CallerRef;
}

type ApprovalRow = {
  action_id: string;
  rule: string;
  layer: string;
  reasons: string;
  requested_at: string;
  expires_at: string;
  decision: ApprovalDecision['decision'] | null;
  decided_at: string | null;
  decided_by: string | null;
  reason: string | null;
};
type CallRow = { action_id: string; caller_id: string; depth: number };

/** Inside the start's write, before the action's row: its caller must be an action of the same session. */
export function assertCaller(sql: Sql, a: ActionStart): void {
  if (
    a.calledBy !== undefined &&
    !sql('SELECT 1 FROM actions WHERE id = ? AND session_id = ?').get(a.calledBy.actionId, a.sessionId)
  ) {
    throw new ActionNotRecordedError(a.calledBy.actionId, a.sessionId);
  }
}

/** Inside the start's write, after the action's row: its `Approval` node and its `CALLED_BY` edge. */
export function writeStartRefs(sql: Sql, a: ActionStart): void {
  if (a.approval) {
    const p = a.approval;
    sql(
      `INSERT INTO approvals (action_id, rule, layer, reasons, requested_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ).run(a.id, p.rule, p.layer, JSON.stringify(p.reasons), p.requestedAt, p.expiresAt);
  }
  if (a.calledBy) {
    sql('INSERT INTO action_calls (action_id, caller_id, depth) VALUES (?, ?, ?)').run(
      a.id,
      a.calledBy.actionId,
      a.calledBy.depth,
    );
  }
}

/** Inside a write: records the decision (see the port) and moves an approved action on. Returns its session. */
export function decideApproval(sql: Sql, actionId: string, d: ApprovalDecision): string {
  const row = sql(
    `SELECT a.session_id, a.status, p.action_id IS NOT NULL AS has_approval, p.decision
     FROM actions a LEFT JOIN approvals p ON p.action_id = a.id WHERE a.id = ?`,
  ).get(actionId) as
    { session_id: string; status: ActionStatus; has_approval: number; decision: string | null } | undefined;
  if (!row) throw new ActionNotRecordedError(actionId);
  assertApprovalPending(actionId, row.status, row.has_approval === 1, row.decision);
  sql(
    'UPDATE approvals SET decision = ?, decided_at = ?, decided_by = ?, reason = ? WHERE action_id = ?',
  ).run(d.decision, d.decidedAt, d.decidedBy ?? null, d.reason ?? null, actionId);
  sql('UPDATE actions SET status = ? WHERE id = ?').run(decidedStatus(d), actionId);
  return row.session_id;
}

/**
 * The approval and caller of each of the actions (a JSON list of ids, bound as one parameter), one query per
 * table whatever the number of actions. Actions with neither are absent from the map.
 */
export function readApprovalRefs(sql: Sql, actionIdsJson: string): Map<string, ApprovalRefs> {
  const refs = new Map<string, ApprovalRefs>();
  const of = (actionId: string): ApprovalRefs => {
    let entry = refs.get(actionId);
    if (!entry) refs.set(actionId, (entry = {}));
    return entry;
  };
  for (const p of sql('SELECT * FROM approvals WHERE action_id IN (SELECT value FROM json_each(?))').all(
    actionIdsJson,
  ) as ApprovalRow[]) {
    of(p.action_id).approval = approvalRecord({
      rule: p.rule,
      layer: p.layer,
      reasons: JSON.parse(p.reasons) as string[],
      requestedAt: p.requested_at,
      expiresAt: p.expires_at,
      decision: p.decision,
      decidedAt: p.decided_at,
      decidedBy: p.decided_by,
      reason: p.reason,
    });
  }
  for (const c of sql(
    'SELECT action_id, caller_id, depth FROM action_calls WHERE action_id IN (SELECT value FROM json_each(?))',
  ).all(actionIdsJson) as CallRow[]) {
    of(c.action_id).calledBy = callerRef({ actionId: c.caller_id, depth: c.depth });
  }
  return refs;
}
