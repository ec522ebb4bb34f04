import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_STATUSES, ACTION_TYPES } from '@switchyard/common';
import { ACTION_TIER, ref, type SchemaOrRef, TIMESTAMP } from '../http/common.schemas';

/**
 * Response schemas of the actions: the result envelope (`ActionResult`), the answer to `"wait": false`
 * (`AcceptedAction`), an action as recorded (`ActionView`) and a page of them. `output` is described per action type
 * in action-output.schemas.ts.
 */

/** The fields of `ActionResult`; `endedAt` is required by the envelope only. */
const ACTION_RESULT_PROPERTIES: Record<string, SchemaOrRef> = {
  id: { type: 'string' },
  sessionId: { type: 'string' },
  type: { type: 'string', enum: [...ACTION_TYPES] },
  status: { type: 'string', enum: [...ACTION_STATUSES] },
  exitCode: { type: 'integer', description: 'Exit code of code and process actions that got one' },
  stdout: { type: 'string', description: 'Redacted, capped at the session output limit (see `truncated`)' },
  stderr: { type: 'string' },
  output: ref('ActionOutput'),
  truncated: {
    type: 'object',
    required: ['stdout', 'stderr'],
    properties: { stdout: { type: 'boolean' }, stderr: { type: 'boolean' } },
  },
  durationMs: { type: 'number' },
  startedAt: TIMESTAMP,
  endedAt: TIMESTAMP,
  tier: ACTION_TIER,
  risk: ref('RiskAssessment'),
  error: ref('ActionError'),
  redacted: {
    type: 'boolean',
    enum: [true],
    description: 'Secrets were replaced by `***REDACTED***` somewhere; absent otherwise',
  },
  requestId: { type: 'string', description: 'The `X-Request-Id` of the request that submitted it' },
  egress: {
    type: 'array',
    description:
      'Connections the session’s sandboxes asked the egress proxy for while it ran (sessions with network), and ' +
      'those a browser action’s pages made to the session’s own ports (`localhost`)',
    items: {
      type: 'object',
      required: ['host', 'port', 'allowed', 'bytesIn', 'bytesOut'],
      properties: {
        host: { type: 'string' },
        port: { type: 'integer' },
        allowed: { type: 'boolean' },
        reason: {
          type: 'string',
          description:
            'Why it was refused; on an allowed connection that did not go to the network, where it went ' +
            '(the session’s own sandbox port)',
        },
        bytesIn: { type: 'integer' },
        bytesOut: { type: 'integer' },
      },
    },
  },
  hints: {
    type: 'array',
    items: { type: 'string' },
    description: 'What the caller can do about the outcome',
  },
  checkpoint: {
    type: 'object',
    required: ['id', 'createdAt'],
    description: 'The checkpoint taken just before it ran (`"checkpoint": "before"`)',
    properties: { id: { type: 'string' }, createdAt: TIMESTAMP },
  },
  restored: ref('RestoredCheckpoint'),
  annotations: {
    type: 'object',
    additionalProperties: true,
    description: 'What before-action hooks noted on it (their `annotations`), by hook name',
  },
};

const ACTION_RESULT_REQUIRED = [
  'id',
  'sessionId',
  'type',
  'status',
  'truncated',
  'durationMs',
  'startedAt',
  'tier',
  'risk',
];

const ACTION_RESULT_SCHEMA: SchemaObject = {
  type: 'object',
  description: 'The result envelope, the same for every action type: `status` tells how it ended',
  required: [...ACTION_RESULT_REQUIRED, 'endedAt'],
  properties: ACTION_RESULT_PROPERTIES,
};

const ACCEPTED_ACTION_SCHEMA: SchemaObject = {
  type: 'object',
  description:
    '`"wait": false`: the action is recorded and running (or queued); or a policy rule holds it for approval ' +
    '(`awaiting_approval`, whatever `wait` said): it runs once approved, ends `denied` when rejected or expired',
  required: ['id', 'sessionId', 'type', 'status'],
  properties: {
    id: { type: 'string' },
    sessionId: { type: 'string' },
    type: { type: 'string', enum: [...ACTION_TYPES] },
    status: { type: 'string', enum: ['running', 'awaiting_approval'] },
    approval: ref('ApprovalRequest'),
  },
};

const APPROVAL_REQUEST_PROPERTIES: Record<string, SchemaOrRef> = {
  rule: { type: 'string', description: 'The rule that asks, as written (JSON)' },
  layer: {
    type: 'string',
    enum: ['engine', 'tenant', 'session', 'plan'],
    description: 'The policy layer of the rule',
  },
  reasons: {
    type: 'array',
    items: { type: 'string' },
    description: 'Why it asks: the rule, the risk reasons',
  },
  requestedAt: TIMESTAMP,
  expiresAt: { ...TIMESTAMP, description: 'When it ends `denied` (expired) unless decided' },
};

const APPROVAL_REQUEST_SCHEMA: SchemaObject = {
  type: 'object',
  description: 'Why an action waits for a decision, and until when',
  required: ['rule', 'layer', 'reasons', 'requestedAt', 'expiresAt'],
  properties: APPROVAL_REQUEST_PROPERTIES,
};

export const APPROVAL_RECORD_SCHEMA: SchemaObject = {
  type: 'object',
  description: 'An approval as recorded: the request, and the decision once made',
  required: ['rule', 'layer', 'reasons', 'requestedAt', 'expiresAt'],
  properties: {
    ...APPROVAL_REQUEST_PROPERTIES,
    decision: { type: 'string', enum: ['approved', 'rejected', 'expired'] },
    decidedAt: TIMESTAMP,
    decidedBy: { type: 'string', description: 'Who decided: `admin:<tenant>`, `tenant:<tenant>` or `open`' },
    reason: { type: 'string' },
  },
};

/** Where a container action ran, as the view and the graph's records show it. */
export const SANDBOX_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['tier', 'containerId'],
  description: 'The container it ran in (container tiers only)',
  properties: {
    tier: { type: 'string', enum: ['pooled', 'container'] },
    containerId: { type: 'string' },
    runtime: { type: 'string', description: '`runsc` (gVisor) or `runc`, when the tier chose one' },
  },
};

/** Files an action touched, as the view and the graph's records show them. */
export const FILE_TOUCHES_SCHEMA: SchemaObject = {
  type: 'array',
  description: 'Files it touched, relative to the workspace, sorted by path then access',
  items: {
    type: 'object',
    required: ['path', 'access'],
    properties: { path: { type: 'string' }, access: { type: 'string', enum: ['read', 'write'] } },
  },
};

const ACTION_VIEW_SCHEMA: SchemaObject = {
  type: 'object',
  description:
    'An action as recorded: its result envelope (rebuilt from the record while it runs or after a crash, then ' +
    'without `endedAt`, output or streams) and where it sits in the session',
  required: [...ACTION_RESULT_REQUIRED, 'seq', 'inputSummary', 'files'],
  properties: {
    ...ACTION_RESULT_PROPERTIES,
    seq: { type: 'integer', description: 'Position in the session, from 1' },
    inputSummary: { type: 'string' },
    input: {
      type: 'object',
      additionalProperties: true,
      description: 'The request as sent, redacted (`GET …/actions/{actionId}` only)',
    },
    files: FILE_TOUCHES_SCHEMA,
    retryOf: { type: 'string', description: 'The action this one retried' },
    sandbox: SANDBOX_SCHEMA,
    approval: ref('ApprovalRecord'),
    calledBy: {
      type: 'object',
      required: ['actionId', 'depth'],
      description: 'The action that called it (a skill’s `ctx.call`): a `CALLED_BY` edge',
      properties: { actionId: { type: 'string' }, depth: { type: 'integer', minimum: 1 } },
    },
  },
};

const ACTION_PAGE_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['actions'],
  properties: {
    actions: { type: 'array', items: ref('ActionView'), description: 'Oldest first, without `input`' },
    nextCursor: { type: 'string', description: 'Pass as `cursor` for the next page; absent on the last' },
  },
};

export const ACTION_SCHEMAS = {
  ActionResult: ACTION_RESULT_SCHEMA,
  AcceptedAction: ACCEPTED_ACTION_SCHEMA,
  ApprovalRequest: APPROVAL_REQUEST_SCHEMA,
  ApprovalRecord: APPROVAL_RECORD_SCHEMA,
  ActionView: ACTION_VIEW_SCHEMA,
  ActionPage: ACTION_PAGE_SCHEMA,
} satisfies Record<string, SchemaObject>;
