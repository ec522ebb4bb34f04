import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_STATUSES } from '@switchyard/common';
import { ACTION_DTO_CLASSES } from '../../engine/actions/dto/action-body';
import { ACTION_TIER, FREE_OBJECT, object, ref, type SchemaOrRef, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of the plans (`Plan`, as the executor keeps it): create, list, get, replan, cancel. */

const ACTION_STATUS: SchemaObject = { type: 'string', enum: [...ACTION_STATUSES] };

const STEP_ATTEMPT_SCHEMA: SchemaObject = object(
  ['status', 'startedAt'],
  {
    actionId: {
      type: 'string',
      description:
        'Absent when the action was refused before it was recorded (its input was invalid at run time)',
    },
    status: ACTION_STATUS,
    startedAt: TIMESTAMP,
    endedAt: TIMESTAMP,
    error: ref('ActionError'),
    checkpointId: { type: 'string', description: 'The checkpoint taken just before it ran' },
    restoredCheckpointId: {
      type: 'string',
      description:
        'The checkpoint it put the workspace back to first (a retry attempt of a checkpointed step)',
    },
  },
  'One attempt of a step: one action',
);

/** The fields of a step version; the current version also lists the versions it replaced. */
const STEP_PROPERTIES: Record<string, SchemaOrRef> = {
  id: { type: 'string' },
  version: { type: 'integer', description: '1 as submitted, +1 for each replan that replaced it' },
  action: {
    oneOf: ACTION_DTO_CLASSES.map((cls) => ref(cls.name)),
    description: 'The action as submitted (as `POST …/actions` takes it)',
  },
  dependsOn: { type: 'array', items: { type: 'string' } },
  allowFailure: { type: 'boolean' },
  retry: object(['attempts', 'backoffMs'], {
    attempts: { type: 'integer', description: 'Extra attempts after the first fails' },
    backoffMs: { type: 'integer' },
  }),
  checkpoint: {
    type: 'string',
    enum: ['before'],
    description: 'Checkpoints the workspace before it runs (its own setting, or the plan’s `each-step`)',
  },
  status: { type: 'string', enum: ['pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled'] },
  attempts: { type: 'array', items: ref('PlanStepAttempt') },
  startedAt: TIMESTAMP,
  endedAt: TIMESTAMP,
  reason: { type: 'string', description: 'Why it was skipped or cancelled' },
};

const STEP_REQUIRED = ['id', 'version', 'action', 'dependsOn', 'allowFailure', 'retry', 'status', 'attempts'];

const PLAN_STEP_SCHEMA: SchemaObject = object(STEP_REQUIRED, {
  ...STEP_PROPERTIES,
  replaced: {
    type: 'array',
    description: 'Earlier versions this step replaced, newest first',
    items: object(STEP_REQUIRED, STEP_PROPERTIES),
  },
});

const STEP_FAILURE_CONTEXT_SCHEMA: SchemaObject = object(
  ['stepId', 'attempts'],
  {
    stepId: { type: 'string' },
    attempts: { type: 'array', items: ref('PlanStepAttempt') },
    checkpointId: {
      type: 'string',
      description: 'What a replan’s `restoreTo` of this step would put the workspace back to',
    },
    action: object(
      ['id', 'input', 'status', 'tier', 'risk'],
      {
        id: { type: 'string' },
        input: FREE_OBJECT('The request as sent, redacted'),
        status: ACTION_STATUS,
        tier: ACTION_TIER,
        risk: ref('RiskAssessment'),
        exitCode: { type: 'integer' },
        error: ref('ActionError'),
        outputExcerpt: { type: 'string' },
        stderrTail: { type: 'string', description: 'The last 2 KiB of its stderr' },
      },
      'Its last recorded action',
    ),
    error: ref('ActionError'),
  },
  'What a replanner needs about the failed step: its last action (redacted) and every attempt',
);

const PLAN_SCHEMA: SchemaObject = object(
  ['id', 'sessionId', 'tenant', 'status', 'maxParallel', 'checkpoints', 'createdAt', 'updatedAt', 'steps'],
  {
    id: { type: 'string', example: 'plan_0123456789abcdef01234567' },
    sessionId: { type: 'string' },
    tenant: {
      type: 'string',
      description:
        'The tenant it belongs to: `t_` and a hash of its API key, or `open` when the engine has no keys',
    },
    goal: { type: 'string' },
    status: {
      type: 'string',
      enum: ['running', 'succeeded', 'needs_replan', 'cancelled', 'interrupted'],
      description:
        '`needs_replan`: a step failed for good; the plan waits for a replan or a cancel. `interrupted`: the ' +
        'engine stopped while it ran',
    },
    maxParallel: { type: 'integer' },
    checkpoints: { type: 'string', enum: ['each-step', 'none'] },
    policy: ref('PolicyDto'),
    createdAt: TIMESTAMP,
    updatedAt: TIMESTAMP,
    endedAt: TIMESTAMP,
    steps: { type: 'array', items: ref('PlanStep') },
    failedStep: { type: 'string', description: 'While `needs_replan`: the step that failed' },
    failureContext: ref('PlanStepFailureContext'),
  },
  'A plan: a DAG of actions, each step with its status, attempts and timings',
);

const PLAN_LIST_SCHEMA: SchemaObject = object(
  ['plans'],
  { plans: { type: 'array', items: ref('Plan') } },
  "The session's plans, oldest first",
);

export const PLAN_SCHEMAS = {
  Plan: PLAN_SCHEMA,
  PlanList: PLAN_LIST_SCHEMA,
  PlanStep: PLAN_STEP_SCHEMA,
  PlanStepAttempt: STEP_ATTEMPT_SCHEMA,
  PlanStepFailureContext: STEP_FAILURE_CONTEXT_SCHEMA,
} satisfies Record<string, SchemaObject>;
