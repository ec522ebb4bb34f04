import type { ActionStatus } from '@switchyard/common';
import { isOpen, startStatus } from '../context-graph.approvals';
import {
  ActionAlreadyCompletedError,
  ActionNotRecordedError,
  SessionNotRecordedError,
} from '../context-graph.errors';
import type { ActionCompletion, ActionStart, PlanGraphRecord, SessionRecord } from '../context-graph.types';
import {
  fileNodeId,
  INTERRUPTED_ERROR,
  resolvePlan,
  sandboxNodeId,
  type StoredPlan,
} from '../context-graph.views';
import { assertCaller, OPEN_ACTION, writeStartRefs } from './sqlite-approvals';
import { list, type Sql } from './sqlite-rows';
import { writeStatefulRefs } from './sqlite-stateful';

// The write side of the embedded store for sessions, actions (with their sandboxes and files) and plans. Each
// function runs inside one of the store's write transactions and checks what it needs first; the store then
// queues what changed for the outbox.

export function insertSession(sql: Sql, session: SessionRecord): void {
  sql('INSERT INTO sessions (id, tenant, created_at, metadata) VALUES (?, ?, ?, ?)').run(
    session.id,
    session.tenant,
    session.createdAt,
    JSON.stringify(session.metadata),
  );
}

export function insertActionStart(sql: Sql, a: ActionStart): void {
  if (!sql('SELECT 1 FROM sessions WHERE id = ?').get(a.sessionId)) {
    throw new SessionNotRecordedError(a.sessionId);
  }
  if (
    a.retryOf !== undefined &&
    !sql('SELECT 1 FROM actions WHERE id = ? AND session_id = ?').get(a.retryOf, a.sessionId)
  ) {
    throw new ActionNotRecordedError(a.retryOf, a.sessionId);
  }
  assertCaller(sql, a);
  // seq is allocated inside the write transaction, so it follows commit order and has no gaps.
  sql(
    `INSERT INTO actions (id, session_id, seq, type, operation, status, input, input_summary, input_hash,
       started_at, tier, risk, retry_of, retry_reason)
     SELECT ?, ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
     FROM actions WHERE session_id = ?`,
  ).run(
    a.id,
    a.sessionId,
    a.type,
    a.operation,
    startStatus(a.approval),
    JSON.stringify(a.input),
    a.inputSummary,
    a.inputHash,
    a.startedAt,
    a.tier,
    JSON.stringify(a.risk),
    a.retryOf ?? null,
    a.retryOf === undefined ? null : (a.retryReason ?? null),
    a.sessionId,
  );
  writeStartRefs(sql, a);
}

/**
 * Completes a running (or still awaiting) action with its sandbox, kernel, process and files. Returns the
 * action's session.
 */
export function completeAction(sql: Sql, actionId: string, c: ActionCompletion): string {
  const row = sql('SELECT session_id, status FROM actions WHERE id = ?').get(actionId) as
    { session_id: string; status: ActionStatus } | undefined;
  if (!row) throw new ActionNotRecordedError(actionId);
  if (!isOpen(row.status)) throw new ActionAlreadyCompletedError(actionId, row.status);
  const sandboxId = c.sandbox && sandboxNodeId(c.sandbox.containerId);
  if (c.sandbox) {
    sql(
      `INSERT INTO sandboxes (id, session_id, tier, container_id, runtime) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
    ).run(sandboxId!, row.session_id, c.sandbox.tier, c.sandbox.containerId, c.sandbox.runtime ?? null);
  }
  sql(
    `UPDATE actions SET status = ?, ended_at = ?, duration_ms = ?, tier = ?, risk = ?, exit_code = ?,
       error = ?, output_excerpt = ?, result = ?, sandbox_id = ? WHERE id = ?`,
  ).run(
    c.status,
    c.endedAt,
    c.durationMs,
    c.tier,
    JSON.stringify(c.risk),
    c.exitCode ?? null,
    c.error ? JSON.stringify(c.error) : null,
    c.outputExcerpt,
    JSON.stringify(c.result),
    sandboxId ?? null,
    actionId,
  );
  writeStatefulRefs(sql, actionId, row.session_id, c);
  for (const file of c.files) {
    const id = fileNodeId(row.session_id, file.path);
    sql('INSERT INTO files (id, session_id, path) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(
      id,
      row.session_id,
      file.path,
    );
    sql('INSERT INTO action_files (action_id, file_id, access) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(
      actionId,
      id,
      file.access,
    );
  }
  return row.session_id;
}

/** Upserts the plan and its steps and replaces each step's attempts. Returns the plan as stored. */
export function writePlan(sql: Sql, record: PlanGraphRecord): StoredPlan {
  if (!sql('SELECT 1 FROM sessions WHERE id = ?').get(record.sessionId)) {
    throw new SessionNotRecordedError(record.sessionId);
  }
  const plan = resolvePlan(record);
  sql(
    `INSERT INTO plans (id, session_id, goal, status, max_parallel, created_at, ended_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET goal = excluded.goal, status = excluded.status,
       max_parallel = excluded.max_parallel, created_at = excluded.created_at, ended_at = excluded.ended_at`,
  ).run(
    plan.id,
    plan.sessionId,
    plan.goal ?? null,
    plan.status,
    plan.maxParallel,
    plan.createdAt,
    plan.endedAt ?? null,
  );
  for (const step of plan.steps) {
    sql(
      `INSERT INTO plan_steps (id, plan_id, step_id, version, status, allow_failure, depends_on, replaces)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET status = excluded.status, allow_failure = excluded.allow_failure,
         depends_on = excluded.depends_on, replaces = excluded.replaces`,
    ).run(
      step.id,
      plan.id,
      step.stepId,
      step.version,
      step.status,
      step.allowFailure ? 1 : 0,
      JSON.stringify(step.dependsOn),
      step.replaces ?? null,
    );
    sql('DELETE FROM step_attempts WHERE step_id = ?').run(step.id);
    // Only actions of the same session that exist; `n` keeps the attempt order.
    sql(
      `INSERT INTO step_attempts (step_id, action_id, n)
       SELECT ?, j.value, j.key FROM json_each(?) j
       WHERE EXISTS (SELECT 1 FROM actions a WHERE a.id = j.value AND a.session_id = ?)`,
    ).run(step.id, list(step.attempts), plan.sessionId);
  }
  return plan;
}

/**
 * Marks every running or awaiting action interrupted (an undecided approval stays so), only those of `sessionIds`
 * when given. Returns how many.
 */
export function interruptRunning(sql: Sql, endedAt: string, sessionIds?: readonly string[]): number {
  return Number(
    sql(
      `UPDATE actions SET status = 'interrupted', ended_at = ?1, error = ?2
       WHERE ${OPEN_ACTION} AND (?3 IS NULL OR session_id IN (SELECT value FROM json_each(?3)))`,
    ).run(
      endedAt,
      JSON.stringify(INTERRUPTED_ERROR),
      sessionIds === undefined ? null : JSON.stringify(sessionIds),
    ).changes,
  );
}

export function markSessionEnded(
  sql: Sql,
  sessionId: string,
  endedAt: string,
  reason: 'deleted' | 'expired',
): void {
  // The first end wins: the audit trail is not rewritten by a later delete of an expired session.
  const { changes } = sql(
    `UPDATE sessions SET ended_at = COALESCE(ended_at, ?), end_reason = COALESCE(end_reason, ?)
     WHERE id = ?`,
  ).run(endedAt, reason, sessionId);
  if (Number(changes) === 0) throw new SessionNotRecordedError(sessionId);
}
