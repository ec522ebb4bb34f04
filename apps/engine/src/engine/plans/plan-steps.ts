import { NoCheckpointError } from '../../session/checkpoints/checkpoint.errors';
import { RequestValidationError } from '../../platform/validation/request-validation.error';
import type { Plan, PlanSpec, PlanStep, PlanStepSpec } from '../../state/plans/plan.model';

// A plan's steps as data: built from their specs, replaced or added by a replan, cancelled when the plan stops, and
// the checkpoint a replan's `restoreTo` goes back to. The executor runs them.

/** The step as the plan keeps it, not yet run: `version` 1 as submitted, one more for each replan replacing it. */
export function toPlanStep(s: PlanStepSpec, version: number, checkpoints: PlanSpec['checkpoints']): PlanStep {
  const checkpoint = s.checkpoint ?? (checkpoints === 'each-step' ? 'before' : undefined);
  return {
    id: s.id,
    version,
    action: s.action,
    dependsOn: s.dependsOn ?? [],
    allowFailure: s.allowFailure ?? false,
    retry: { attempts: s.retry?.attempts ?? 0, backoffMs: s.retry?.backoffMs ?? 0 },
    ...(checkpoint && { checkpoint }),
    status: 'pending',
    attempts: [],
  };
}

/**
 * Puts a replan's steps (already validated) into the plan: a step with a known id replaces that step in place (the
 * old version kept in `replaced`), a new id is added. Steps skipped so far become pending again.
 */
export function mergeReplanSteps(plan: Plan, steps: PlanStepSpec[]): void {
  const byId = new Map(plan.steps.map((s) => [s.id, s]));
  for (const s of steps) {
    const old = byId.get(s.id);
    if (old) {
      const { replaced, ...previous } = old;
      const next = toPlanStep(s, old.version + 1, plan.checkpoints);
      // The new version starts clean: nothing of the old one (its `endedAt`, `reason`…) stays but in `replaced`.
      for (const key of Object.keys(old)) delete (old as unknown as Record<string, unknown>)[key];
      Object.assign(old, next, { replaced: [previous, ...(replaced ?? [])] });
    } else {
      plan.steps.push(toPlanStep(s, 1, plan.checkpoints));
    }
  }
  // Steps skipped because of a step that has just been replaced get another chance.
  for (const step of plan.steps) {
    if (step.status === 'skipped') {
      step.status = 'pending';
      delete step.reason;
    }
  }
}

/** Cancels every step that is `status` (pending steps that will never start, or running ones left behind). */
export function cancelSteps(plan: Plan, status: 'pending' | 'running', reason: string): void {
  for (const step of plan.steps) {
    if (step.status === status) {
      step.status = 'cancelled';
      step.reason = reason;
    }
  }
}

/**
 * The checkpoint taken before `stepId` first ran: its latest version that ran with one. 400 for a step the plan does
 * not have, 409 when no version of it was checkpointed.
 */
export function checkpointBefore(plan: Plan, stepId: string): string {
  const step = plan.steps.find((s) => s.id === stepId);
  if (!step) {
    throw new RequestValidationError([
      { field: 'restoreTo', message: `plan ${plan.id} has no step "${stepId}"` },
    ]);
  }
  for (const version of [step, ...(step.replaced ?? [])]) {
    const first = version.attempts.find((a) => a.checkpointId !== undefined)?.checkpointId;
    if (first !== undefined) return first;
  }
  throw new NoCheckpointError(
    `step "${stepId}" of plan ${plan.id} never ran with a checkpoint; give it "checkpoint": "before" ` +
      `(or the plan "checkpoints": "each-step")`,
    { planId: plan.id, stepId, field: 'restoreTo' },
  );
}
