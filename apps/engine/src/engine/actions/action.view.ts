import type { ActionResult } from '@switchyard/common';
import type { ActionRecord } from '@switchyard/context-graph';

/** An action as the API shows it: the result envelope plus where it sits in the session. */
export type ActionView = ActionResult & {
  seq: number;
  inputSummary: string;
  input?: Record<string, unknown>;
  files: ActionRecord['files'];
  /** The action this one retried. */
  retryOf?: string;
  /** The container it ran in (container tiers only). */
  sandbox?: ActionRecord['sandbox'];
  /** Why it waited for approval, and the decision once made. */
  approval?: ActionRecord['approval'];
  /** The action that called it (a skill's `ctx.call`), and how deep. */
  calledBy?: ActionRecord['calledBy'];
};

/** The stored envelope, or one rebuilt from the record for actions that never completed normally. */
export function toActionView(r: ActionRecord, withInput: boolean): ActionView {
  const envelope: ActionResult = r.result ?? {
    id: r.id,
    sessionId: r.sessionId,
    type: r.type,
    status: r.status,
    ...(r.exitCode !== undefined && { exitCode: r.exitCode }),
    truncated: { stdout: false, stderr: false },
    durationMs: r.durationMs ?? 0,
    startedAt: r.startedAt,
    ...(r.endedAt !== undefined && { endedAt: r.endedAt }),
    tier: r.tier,
    risk: r.risk,
    ...(r.error && { error: r.error }),
  };
  return {
    ...envelope,
    // The record's status wins: a crash may have turned `running` into `interrupted` after the fact.
    status: r.status,
    seq: r.seq,
    inputSummary: r.inputSummary,
    ...(withInput && { input: r.input }),
    files: r.files,
    ...(r.retryOf !== undefined && { retryOf: r.retryOf }),
    ...(r.sandbox && { sandbox: r.sandbox }),
    ...(r.approval && { approval: r.approval }),
    ...(r.calledBy && { calledBy: r.calledBy }),
  };
}
