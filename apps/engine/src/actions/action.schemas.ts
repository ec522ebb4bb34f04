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
    description: 'Connections the session’s sandboxes asked the egress proxy for while it ran',
    items: {
      type: 'object',
      required: ['host', 'port', 'allowed', 'bytesIn', 'bytesOut'],
      properties: {
        host: { type: 'string' },
        port: { type: 'integer' },
        allowed: { type: 'boolean' },
        reason: { type: 'string', description: 'Why it was refused' },
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
  description: '`"wait": false`: the action is recorded and running (or queued)',
  required: ['id', 'sessionId', 'type', 'status'],
  properties: {
    id: { type: 'string' },
    sessionId: { type: 'string' },
    type: { type: 'string', enum: [...ACTION_TYPES] },
    status: { type: 'string', enum: ['running'] },
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
  ActionView: ACTION_VIEW_SCHEMA,
  ActionPage: ACTION_PAGE_SCHEMA,
} satisfies Record<string, SchemaObject>;
