import type {
  ActionError,
  ActionStatus,
  ActionTier,
  ActionType,
  FileTouch,
  RiskAssessment,
} from '@switchyard/common';
import type { StatementSync } from 'node:sqlite';
import type { ActionRecord, SandboxRef } from '../context-graph.types';
import type { CheckpointRef } from '../checkpoint.types';
import { type SessionState, sortTouches, type StoredPlan } from '../context-graph.views';
import { type ApprovalRefs, readApprovalRefs } from './sqlite-approvals';
import { readCheckpointRefs } from './sqlite-checkpoints';
import { readStatefulRefs, type StatefulRefs } from './sqlite-stateful';

// Rows to records in the embedded store: the columns of `actions` and the shapes of its rows, and the readers
// that turn sessions, plans and actions (with everything an action record carries) into the port's records.
// The writes, queries and outbox all read through these.

/** The store's statement cache: SQL text in, a prepared statement out. */
export type Sql = (sql: string) => StatementSync;

export const ACTION_COLUMNS = `id, session_id, seq, type, operation, status, input, input_summary, input_hash,
  started_at, ended_at, duration_ms, tier, risk, exit_code, error, output_excerpt, result, retry_of, sandbox_id,
  retry_reason`;
/** The same columns, qualified for queries that join `actions a`. */
export const ACTION_COLUMNS_OF_A = ACTION_COLUMNS.replace(/(\w+)/g, 'a.$1');

type SessionRow = {
  id: string;
  tenant: string;
  created_at: string;
  metadata: string;
  ended_at: string | null;
  end_reason: string | null;
};

export type ActionRow = {
  id: string;
  session_id: string;
  seq: number;
  type: ActionType;
  operation: string;
  status: ActionStatus;
  input: string;
  input_summary: string;
  input_hash: string;
  started_at: string;
  ended_at: string | null;
  duration_ms: number | null;
  tier: ActionTier;
  risk: string;
  exit_code: number | null;
  error: string | null;
  output_excerpt: string | null;
  result: string | null;
  retry_of: string | null;
  sandbox_id: string | null;
  retry_reason: string | null;
};

type TouchRow = { action_id: string; path: string; access: FileTouch['access'] };
type SandboxRow = { id: string; tier: SandboxRef['tier']; container_id: string; runtime: string | null };
type PlanRow = {
  id: string;
  session_id: string;
  goal: string | null;
  status: string;
  max_parallel: number;
  created_at: string;
  ended_at: string | null;
};
type StepRow = {
  id: string;
  plan_id: string;
  step_id: string;
  version: number;
  status: string;
  allow_failure: number;
  depends_on: string;
  replaces: string | null;
};

const parse = <T>(json: string): T => JSON.parse(json) as T;
const parseOpt = <T>(json: string | null): T | undefined => (json === null ? undefined : parse<T>(json));
/** Binds a list as one parameter: `IN (SELECT value FROM json_each(?))`. */
export const list = (values: readonly string[]): string => JSON.stringify(values);

export function readAction(sql: Sql, sessionId: string, actionId: string): ActionRecord | undefined {
  const row = sql(`SELECT ${ACTION_COLUMNS} FROM actions WHERE id = ? AND session_id = ?`).get(
    actionId,
    sessionId,
  ) as ActionRow | undefined;
  return row && hydrate(sql, [row])[0];
}

export function readSession(sql: Sql, sessionId: string): SessionState | undefined {
  const row = sql('SELECT * FROM sessions WHERE id = ?').get(sessionId) as SessionRow | undefined;
  return (
    row && {
      id: row.id,
      tenant: row.tenant,
      createdAt: row.created_at,
      metadata: parse<Record<string, unknown>>(row.metadata),
      ...(row.ended_at !== null && { endedAt: row.ended_at }),
      ...(row.end_reason !== null && { endReason: row.end_reason as 'deleted' | 'expired' }),
    }
  );
}

/** Plans selected by `select` (one parameter), with their steps and attempts. */
export function readPlans(sql: Sql, select: string, param: string): StoredPlan[] {
  const rows = sql(select).all(param) as PlanRow[];
  if (rows.length === 0) return [];
  const ids = list(rows.map((r) => r.id));
  const steps = sql('SELECT * FROM plan_steps WHERE plan_id IN (SELECT value FROM json_each(?))').all(
    ids,
  ) as StepRow[];
  const attempts = new Map<string, string[]>();
  for (const t of sql(
    `SELECT t.step_id, t.action_id FROM step_attempts t JOIN plan_steps s ON s.id = t.step_id
     WHERE s.plan_id IN (SELECT value FROM json_each(?)) ORDER BY t.step_id, t.n`,
  ).all(ids) as { step_id: string; action_id: string }[]) {
    attempts.set(t.step_id, [...(attempts.get(t.step_id) ?? []), t.action_id]);
  }
  return rows.map((r) => ({
    id: r.id,
    sessionId: r.session_id,
    ...(r.goal !== null && { goal: r.goal }),
    status: r.status,
    maxParallel: r.max_parallel,
    createdAt: r.created_at,
    ...(r.ended_at !== null && { endedAt: r.ended_at }),
    steps: steps
      .filter((s) => s.plan_id === r.id)
      .map((s) => ({
        id: s.id,
        stepId: s.step_id,
        version: s.version,
        status: s.status,
        allowFailure: s.allow_failure === 1,
        dependsOn: parse<string[]>(s.depends_on),
        attempts: attempts.get(s.id) ?? [],
        ...(s.replaces !== null && { replaces: s.replaces }),
      })),
  }));
}

/**
 * Rows to records, with files, sandboxes, kernels, processes, approvals, callers and checkpoints fetched in one
 * query each for all of them.
 */
export function hydrate(sql: Sql, rows: ActionRow[]): ActionRecord[] {
  if (rows.length === 0) return [];
  const ids = list(rows.map((r) => r.id));
  const touches = new Map<string, FileTouch[]>();
  for (const t of sql(
    `SELECT af.action_id, f.path, af.access FROM action_files af JOIN files f ON f.id = af.file_id
     WHERE af.action_id IN (SELECT value FROM json_each(?))`,
  ).all(ids) as TouchRow[]) {
    const files = touches.get(t.action_id) ?? [];
    files.push({ path: t.path, access: t.access });
    touches.set(t.action_id, files);
  }
  const sandboxIds = [...new Set(rows.flatMap((r) => (r.sandbox_id === null ? [] : [r.sandbox_id])))];
  const sandboxes = new Map(
    sandboxIds.length === 0
      ? []
      : (
          sql(
            'SELECT id, tier, container_id, runtime FROM sandboxes WHERE id IN (SELECT value FROM json_each(?))',
          ).all(list(sandboxIds)) as SandboxRow[]
        ).map(
          (b) =>
            [
              b.id,
              {
                tier: b.tier,
                containerId: b.container_id,
                ...(b.runtime !== null && { runtime: b.runtime }),
              },
            ] as const,
        ),
  );
  const stateful = readStatefulRefs(sql, ids);
  const approvals = readApprovalRefs(sql, ids);
  const checkpoints = readCheckpointRefs(sql, ids);
  return rows.map((row) =>
    toRecord(
      row,
      touches.get(row.id) ?? [],
      row.sandbox_id === null ? undefined : sandboxes.get(row.sandbox_id),
      stateful.get(row.id) ?? {},
      approvals.get(row.id) ?? {},
      checkpoints.get(row.id),
    ),
  );
}

function toRecord(
  row: ActionRow,
  files: FileTouch[],
  sandbox: SandboxRef | undefined,
  { kernel, startedProcess, reached }: StatefulRefs,
  { approval, calledBy }: ApprovalRefs,
  checkpoint: CheckpointRef | undefined,
): ActionRecord {
  return {
    id: row.id,
    sessionId: row.session_id,
    seq: row.seq,
    type: row.type,
    operation: row.operation,
    status: row.status,
    input: parse<Record<string, unknown>>(row.input),
    inputSummary: row.input_summary,
    inputHash: row.input_hash,
    startedAt: row.started_at,
    endedAt: row.ended_at ?? undefined,
    durationMs: row.duration_ms ?? undefined,
    tier: row.tier,
    risk: parse<RiskAssessment>(row.risk),
    exitCode: row.exit_code ?? undefined,
    error: parseOpt<ActionError>(row.error),
    outputExcerpt: row.output_excerpt ?? undefined,
    retryOf: row.retry_of ?? undefined,
    retryReason: row.retry_reason ?? undefined,
    sandbox,
    kernel,
    startedProcess,
    reached,
    approval,
    calledBy,
    checkpoint,
    files: sortTouches(files),
    result: parseOpt(row.result),
  };
}
