import type { WorkspaceSteps } from '../actions/action-checkpoints';
import type { Plan, PlanStep } from '../../state/plans/plan.model';

// When a plan's steps run: which can never run (skipped), which are ready, what blocks new work, and what each
// attempt waits for and does to the workspace first. Pure rules over the plan's steps; the executor acts on them.

/** A step that failed without `allowFailure`: it blocks new work until a replan. */
export function blockingStep(plan: Plan): PlanStep | undefined {
  return plan.steps.find((s) => s.status === 'failed' && !s.allowFailure);
}

/**
 * Skips every pending step with a dependency that can never succeed (failed with `allowFailure`, skipped or
 * cancelled), until nothing changes: a skip can doom the steps after it. `onSkipped` hears of each skip as it is made.
 */
export function skipUnreachable(
  plan: Plan,
  byId: ReadonlyMap<string, PlanStep>,
  now: () => string,
  onSkipped: (step: PlanStep) => void,
): void {
  let changed = true;
  while (changed) {
    changed = false;
    for (const step of plan.steps) {
      if (step.status !== 'pending') continue;
      const dead = step.dependsOn
        .map((d) => byId.get(d)!)
        .find(
          (d) =>
            (d.status === 'failed' && d.allowFailure) || d.status === 'skipped' || d.status === 'cancelled',
        );
      if (dead) {
        step.status = 'skipped';
        step.reason = `dependency "${dead.id}" ${dead.status}`;
        step.endedAt = now();
        changed = true;
        onSkipped(step);
      }
    }
  }
}

/** A pending step whose dependencies all succeeded: it can start. */
export function isReady(step: PlanStep, byId: ReadonlyMap<string, PlanStep>): boolean {
  return step.status === 'pending' && step.dependsOn.every((d) => byId.get(d)!.status === 'succeeded');
}

/** How long a step waits before `attempt` (0 for the first): its backoff, doubled after each retry. */
export function retryBackoffMs(step: PlanStep, attempt: number): number {
  return attempt > 0 && step.retry.backoffMs > 0 ? step.retry.backoffMs * 2 ** (attempt - 1) : 0;
}

/**
 * What a step attempt does to the workspace first: a checkpointed step checkpoints before its first attempt; a
 * retry attempt goes back to that checkpoint when it is the only step running (`alone`: a restore would pull the
 * files from under the others), else checkpoints again.
 */
export function workspaceSteps(step: PlanStep, attempt: number, alone: boolean): WorkspaceSteps | undefined {
  if (step.checkpoint !== 'before') return undefined;
  const first = step.attempts.find((a) => a.checkpointId !== undefined)?.checkpointId;
  if (attempt > 0 && first !== undefined && alone) return { restore: first };
  return { checkpoint: 'before' };
}

/** Resolves after `ms`, or as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
