import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of the sessions (`SessionResponse`): create, list, describe, and fork's new session. */

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

/** The OpenAPI link from an answer that made a session (create, fork) to describing it. */
export const GET_NEW_SESSION_LINK = {
  operationId: 'SessionsController_get',
  parameters: { sessionId: '$response.body#/id' },
  description: 'Describe the new session',
};

export const SESSION_SCHEMAS = {
  Session: SESSION_SCHEMA,
  SessionList: SESSION_LIST_SCHEMA,
} satisfies Record<string, SchemaObject>;
