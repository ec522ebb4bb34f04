import type { ContextGraph } from '@switchyard/context-graph';
import type { SecretRedactor } from '../../platform/redaction/secret-redactor';
import type { Plan, PlanStep } from '../../state/plans/plan.model';

/** What a replanner needs about a failed step: its last action as recorded (redacted), and every attempt. */
export async function stepFailureContext(
  graph: ContextGraph,
  redactor: SecretRedactor,
  plan: Plan,
  step: PlanStep,
): Promise<Record<string, unknown>> {
  const last = [...step.attempts].reverse().find((a) => a.actionId);
  const action = last?.actionId ? await graph.getAction(plan.sessionId, last.actionId) : undefined;
  const lastError = step.attempts.at(-1)?.error;
  // What a replan's `restoreTo` of this step would put the workspace back to.
  const checkpointId = [step, ...(step.replaced ?? [])]
    .flatMap((v) => v.attempts)
    .find((a) => a.checkpointId !== undefined)?.checkpointId;
  return {
    stepId: step.id,
    attempts: step.attempts,
    ...(checkpointId !== undefined && { checkpointId }),
    ...(action && {
      action: {
        id: action.id,
        input: redactor.value(action.input).value,
        status: action.status,
        tier: action.tier,
        risk: action.risk,
        exitCode: action.exitCode,
        error: action.error,
        outputExcerpt: action.outputExcerpt,
        stderrTail: action.result?.stderr?.slice(-2048),
      },
    }),
    ...(!action && last === undefined && lastError && { error: lastError }),
  };
}
