import type { ActionError, ActionStatus } from '@switchyard/common';

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
}

export interface PlanStep {
  id: string;
  /** 1 for the submitted step, +1 for each replan that replaced it. */
  version: number;
  action: Record<string, unknown>;
  dependsOn: string[];
  allowFailure: boolean;
  retry: { attempts: number; backoffMs: number };
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
  createdAt: string;
  updatedAt: string;
  endedAt?: string;
  steps: PlanStep[];
  /** Set while `needs_replan`: the step that failed and what a replanner needs to know about it. */
  failedStep?: string;
  failureContext?: Record<string, unknown>;
}

export const FINAL_STEP: ReadonlySet<StepStatus> = new Set(['succeeded', 'failed', 'skipped', 'cancelled']);
