import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_STATUSES } from '@switchyard/common';
import { ACTION_TIER, nullable, object, ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of the sessions (`SessionResponse`): create, list, describe, and fork's new session. */

/** `SessionActivity`: what a session has run, from its graph (`SessionActivityResponse`). */
const SESSION_ACTIVITY_SCHEMA: SchemaObject = object(
  ['actions', 'byStatus', 'tiers'],
  {
    actions: { type: 'integer', minimum: 0, description: 'Actions of the session, running ones included' },
    byStatus: {
      type: 'object',
      description: 'How many of its actions have each status; a status none has is absent',
      properties: Object.fromEntries(
        ACTION_STATUSES.map((status) => [status, { type: 'integer', minimum: 1 }]),
      ),
      additionalProperties: false,
    },
    tiers: {
      type: 'array',
      uniqueItems: true,
      items: { type: 'string', enum: (ACTION_TIER.enum as string[]).filter((tier) => tier !== 'none') },
      description:
        'Where its actions ran (a sandbox tier, the engine for file ops, the browser), each once, in string ' +
        'order; actions refused before routing (tier `none`) add none',
    },
    lastActionAt: nullable({ ...TIMESTAMP, description: 'When its latest action started; null before any' }),
  },
  'What the session has run: its own actions (a fork counts none of its source’s)',
);

const SESSION_SCHEMA: SchemaObject = {
  type: 'object',
  required: [
    'id',
    'tenant',
    'createdAt',
    'expiresAt',
    'lastActiveAt',
    'ttlSeconds',
    'metadata',
    'maxConcurrentActions',
    'network',
    'activity',
  ],
  properties: {
    id: { type: 'string', example: 'ses_01j9z3k7m2x4v6b8n0p2r4t6w8' },
    tenant: {
      type: 'string',
      example: 't_3f9a1c0b7d2e4f68',
      description: 'The tenant owning it: `open` without API keys, else `t_` and a hash of its key',
    },
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
    policy: ref('PolicyDto'),
    activity: ref('SessionActivity'),
  },
};

const SESSION_LIST_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['sessions'],
  description: 'Every session of the caller, unpaginated',
  properties: { sessions: { type: 'array', items: ref('Session') } },
};

/** The OpenAPI link from an answer that made a session (create, fork) to describing it. */
export const GET_NEW_SESSION_LINK = {
  operationId: 'SessionsController_get',
  parameters: { sessionId: '$response.body#/id' },
  description: 'Describe the new session',
};

export const SESSION_SCHEMAS = {
  Session: SESSION_SCHEMA,
  SessionActivity: SESSION_ACTIVITY_SCHEMA,
  SessionList: SESSION_LIST_SCHEMA,
} satisfies Record<string, SchemaObject>;
