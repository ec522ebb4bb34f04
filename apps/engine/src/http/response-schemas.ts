import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_STATUSES, ACTION_TYPES, ERROR_CLASSES, RISK_LEVELS, TIERS } from '@switchyard/common';

/**
 * Schemas of the success bodies, registered in the OpenAPI document by `buildOpenApiDocument`. Written by hand from
 * the types the controllers return (`SessionResponse`, `ActionResult`, `ActionView`, `AcceptedAction`): a field is
 * required only when the code always sends it. boot-config.e2e-spec.ts validates real answers against them.
 */

const ref = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });

const TIMESTAMP: SchemaObject = { type: 'string', format: 'date-time' };

const SESSION_SCHEMA: SchemaObject = {
  type: 'object',
  required: [
    'id',
    'createdAt',
    'expiresAt',
    'lastActiveAt',
    'ttlSeconds',
    'metadata',
    'maxConcurrentActions',
    'network',
  ],
  properties: {
    id: { type: 'string', example: 'ses_01j9z3k7m2x4v6b8n0p2r4t6w8' },
    createdAt: TIMESTAMP,
    expiresAt: { ...TIMESTAMP, description: 'When the session ends unless it is used again' },
    lastActiveAt: TIMESTAMP,
    ttlSeconds: { type: 'integer', description: 'Idle time after which the session expires' },
    metadata: { type: 'object', additionalProperties: true, description: 'As given at creation' },
    maxConcurrentActions: { type: 'integer' },
    network: {
      type: 'object',
      required: ['allow'],
      properties: {
        allow: {
          type: 'array',
          items: { type: 'string' },
          description: 'Hosts its sandboxes may reach; empty: no network',
        },
      },
    },
    template: { type: 'string', description: 'The template it was created from' },
    forkedFrom: {
      type: 'object',
      required: ['sessionId'],
      description: 'The session (and checkpoint) it was forked from',
      properties: { sessionId: { type: 'string' }, checkpointId: { type: 'string' } },
    },
  },
};

const SESSION_LIST_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['sessions'],
  description: 'Every session of the caller, unpaginated',
  properties: { sessions: { type: 'array', items: ref('Session') } },
};

const ACTION_ERROR_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['class', 'message'],
  description: 'Why the engine (not the user code) failed the action',
  properties: {
    class: { type: 'string', enum: [...ERROR_CLASSES] },
    code: { type: 'string', description: 'Machine code, e.g. `ENOENT`, `OUT_OF_MEMORY`, `RISK_CRITICAL`' },
    message: { type: 'string' },
  },
};

const RISK_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['score', 'level', 'reasons'],
  properties: {
    score: { type: 'number' },
    level: { type: 'string', enum: [...RISK_LEVELS] },
    reasons: { type: 'array', items: { type: 'string' } },
  },
};

const RESTORED_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['checkpointId', 'copied', 'removed', 'kept', 'bytesCopied'],
  description:
    'The checkpoint the workspace was put back to before the action ran (a retry with `restore: true`)',
  properties: {
    checkpointId: { type: 'string' },
    copied: { type: 'integer', description: 'Entries written back' },
    removed: { type: 'integer', description: 'Entries removed' },
    kept: { type: 'integer', description: 'Entries already as they were' },
    bytesCopied: { type: 'integer', description: '0 when every file came back as a copy-on-write reflink' },
  },
};

/** The fields of `ActionResult`; `endedAt` is required by the envelope only. */
const ACTION_RESULT_PROPERTIES: Record<string, SchemaObject | { $ref: string }> = {
  id: { type: 'string' },
  sessionId: { type: 'string' },
  type: { type: 'string', enum: [...ACTION_TYPES] },
  status: { type: 'string', enum: [...ACTION_STATUSES] },
  exitCode: { type: 'integer', description: 'Exit code of code and process actions that got one' },
  stdout: { type: 'string', description: 'Redacted, capped at the session output limit (see `truncated`)' },
  stderr: { type: 'string' },
  output: {
    type: 'object',
    additionalProperties: true,
    description:
      'Type-specific data, redacted: a file op’s result, a page’s snapshot, a kernel cell’s outputs, a ' +
      'process handle',
  },
  truncated: {
    type: 'object',
    required: ['stdout', 'stderr'],
    properties: { stdout: { type: 'boolean' }, stderr: { type: 'boolean' } },
  },
  durationMs: { type: 'number' },
  startedAt: TIMESTAMP,
  endedAt: TIMESTAMP,
  tier: {
    type: 'string',
    enum: [...TIERS, 'engine', 'browser', 'none'],
    description: 'Where it ran: a sandbox tier, the engine (file ops), the browser, or none (refused first)',
  },
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
    files: {
      type: 'array',
      description: 'Files it touched, relative to the workspace, sorted by path then access',
      items: {
        type: 'object',
        required: ['path', 'access'],
        properties: { path: { type: 'string' }, access: { type: 'string', enum: ['read', 'write'] } },
      },
    },
    retryOf: { type: 'string', description: 'The action this one retried' },
    sandbox: {
      type: 'object',
      required: ['tier', 'containerId'],
      description: 'The container it ran in (container tiers only)',
      properties: {
        tier: { type: 'string', enum: ['pooled', 'container'] },
        containerId: { type: 'string' },
        runtime: { type: 'string', description: '`runsc` (gVisor) or `runc`, when the tier chose one' },
      },
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

/** Every response schema, by the name the operations refer to. */
export const RESPONSE_SCHEMAS = {
  Session: SESSION_SCHEMA,
  SessionList: SESSION_LIST_SCHEMA,
  ActionResult: ACTION_RESULT_SCHEMA,
  AcceptedAction: ACCEPTED_ACTION_SCHEMA,
  ActionView: ACTION_VIEW_SCHEMA,
  ActionPage: ACTION_PAGE_SCHEMA,
  ActionError: ACTION_ERROR_SCHEMA,
  RiskAssessment: RISK_SCHEMA,
  RestoredCheckpoint: RESTORED_SCHEMA,
} satisfies Record<string, SchemaObject>;

export type ResponseSchemaName = keyof typeof RESPONSE_SCHEMAS;

/** A JSON body of the named schema, for `@ApiResponse` and its shorthands. */
export const jsonBody = (
  name: ResponseSchemaName,
): { content: { 'application/json': { schema: { $ref: string } } } } => ({
  content: { 'application/json': { schema: ref(name) } },
});
