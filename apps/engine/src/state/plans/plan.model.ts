import type { PolicyRule } from '../policies/policy.types';
import type { ActionError, ActionStatus } from '@switchyard/common';
import type { PlanGraphRecord, PlanGraphStep } from '@switchyard/context-graph';
import type { ActionRequest } from '../actions/action-request';

/**
 * `running` → `succeeded` (every step succeeded, or failed with `allowFailure`, or was skipped because of such a
 * failure), `needs_replan` (a step failed for good; waits for a replan or a cancel), `cancelled`, or
 * `interrupted` (the engine stopped while it ran).
 */
export type PlanStatus = 'running' | 'succeeded' | 'needs_replan' | 'cancelled' | 'interrupted';
export type StepStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';

export interface StepAttempt {
  /** Absent when the action was refused before it was recorded (its input was invalid at run time). */
  actionId?: string;
  status: ActionStatus;
  startedAt: string;
  endedAt?: string;
  error?: ActionError;
  /** The checkpoint taken just before it ran. */
  checkpointId?: string;
  /** The checkpoint it put the workspace back to first (a retry attempt of a checkpointed step). */
  restoredCheckpointId?: string;
}

/** A step as submitted, its action already validated into the engine's request type. */
export interface PlanStepSpec {
  id: string;
  action: ActionRequest;
  dependsOn?: string[];
  allowFailure?: boolean;
  retry?: { attempts: number; backoffMs?: number };
  checkpoint?: 'before';
}

/** A plan as submitted. */
export interface PlanSpec {
  goal?: string;
  steps: PlanStepSpec[];
  maxParallel?: number;
  checkpoints?: 'each-step' | 'none';
  /** The plan's policy layer for its steps. */
  policy?: { rules: PolicyRule[] };
}

export interface PlanStep {
  id: string;
  /** 1 for the submitted step, +1 for each replan that replaced it. */
  version: number;
  action: ActionRequest;
  dependsOn: string[];
  allowFailure: boolean;
  retry: { attempts: number; backoffMs: number };
  /** Checkpoint the workspace before it runs (its own setting, or the plan's `each-step`). */
  checkpoint?: 'before';
  status: StepStatus;
  attempts: StepAttempt[];
  startedAt?: string;
  endedAt?: string;
  /** Why it was skipped or cancelled. */
  reason?: string;
  /** Earlier versions this step replaced, newest first. */
  replaced?: Array<Omit<PlanStep, 'replaced'>>;
}

export interface Plan {
  id: string;
  sessionId: string;
  tenant: string;
  goal?: string;
  status: PlanStatus;
  maxParallel: number;
  /** `each-step`: every step checkpoints the workspace before it runs. */
  checkpoints: 'each-step' | 'none';
  /** The plan's own policy layer: its steps are decided under it too. */
  policy?: { rules: PolicyRule[] };
  createdAt: string;
  updatedAt: string;
  endedAt?: string;
  steps: PlanStep[];
  /** Set while `needs_replan`: the step that failed and what a replanner needs to know about it. */
  failedStep?: string;
  failureContext?: Record<string, unknown>;
}

export const FINAL_STEP: ReadonlySet<StepStatus> = new Set(['succeeded', 'failed', 'skipped', 'cancelled']);

/** The plan as the context graph records it: every version of every step, each with its attempts' actions. */
export function toPlanGraphRecord(plan: Plan): PlanGraphRecord {
  const version = (s: Omit<PlanStep, 'replaced'>, replaces: number | undefined): PlanGraphStep => ({
    stepId: s.id,
    version: s.version,
    status: s.status,
    allowFailure: s.allowFailure,
    dependsOn: [...s.dependsOn],
    attempts: s.attempts.flatMap((a) => (a.actionId ? [a.actionId] : [])),
    ...(replaces !== undefined && { replaces }),
  });
  return {
    id: plan.id,
    sessionId: plan.sessionId,
    ...(plan.goal !== undefined && { goal: plan.goal }),
    status: plan.status,
    maxParallel: plan.maxParallel,
    createdAt: plan.createdAt,
    ...(plan.endedAt !== undefined && { endedAt: plan.endedAt }),
    steps: plan.steps.flatMap((step) => {
      // Newest first: each version replaced the next one in the list.
      const versions = [step, ...(step.replaced ?? [])];
      return versions.map((v, i) => version(v, versions[i + 1]?.version)).reverse();
    }),
  };
}
