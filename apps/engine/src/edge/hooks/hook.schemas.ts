import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object, ref, TIMESTAMP } from '../http/common.schemas';
import { DELIVERY_STATUSES } from '../../state/hooks/hook-deliveries.store';

/** Response schemas of hooks: the configured hooks and their deliveries. */

const COUNTS: SchemaObject = {
  type: 'object',
  description: 'Deliveries by status; a status none has is absent',
  properties: Object.fromEntries(DELIVERY_STATUSES.map((s) => [s, { type: 'integer' }])),
};

const HOOK_SCHEMA: SchemaObject = object(
  ['name', 'phase', 'url', 'timeoutMs', 'retries', 'onFailure', 'deliveries'],
  {
    name: { type: 'string' },
    phase: { type: 'string', enum: ['before', 'after'] },
    url: { type: 'string', description: 'Without its query or credentials' },
    timeoutMs: { type: 'integer' },
    retries: { type: 'integer' },
    onFailure: { type: 'string', enum: ['allow', 'deny'] },
    match: {
      type: 'object',
      additionalProperties: true,
      description: 'The actions it sees (policy match fields)',
    },
    deliveries: COUNTS,
  },
  'A configured hook (its secret is never shown)',
);

const HOOK_LIST_SCHEMA: SchemaObject = object(['hooks', 'backlog'], {
  hooks: { type: 'array', items: ref('Hook') },
  backlog: { type: 'integer', description: 'After-hook deliveries waiting or under way' },
});

const HOOK_DELIVERY_SCHEMA: SchemaObject = object(
  ['id', 'hook', 'phase', 'actionId', 'sessionId', 'tenant', 'status', 'attempts', 'createdAt', 'updatedAt'],
  {
    id: { type: 'string', description: 'Also sent as `X-Switchyard-Delivery`' },
    hook: { type: 'string' },
    phase: { type: 'string', enum: ['before', 'after'] },
    actionId: { type: 'string' },
    sessionId: { type: 'string' },
    tenant: { type: 'string' },
    status: { type: 'string', enum: [...DELIVERY_STATUSES] },
    attempts: { type: 'integer' },
    lastStatus: { type: 'integer', description: 'HTTP status of the last attempt answered' },
    lastError: { type: 'string', description: 'Why the last attempt failed, or why it was dropped' },
    decision: { type: 'string', enum: ['allow', 'deny'], description: 'A before-hook’s answer' },
    createdAt: TIMESTAMP,
    updatedAt: TIMESTAMP,
    nextAttemptAt: { ...TIMESTAMP, description: 'When a pending delivery is tried next' },
  },
  'One delivery of one action to one hook',
);

const HOOK_DELIVERY_LIST_SCHEMA: SchemaObject = object(['deliveries'], {
  deliveries: { type: 'array', items: ref('HookDelivery') },
});

export const HOOK_SCHEMAS = {
  Hook: HOOK_SCHEMA,
  HookList: HOOK_LIST_SCHEMA,
  HookDelivery: HOOK_DELIVERY_SCHEMA,
  HookDeliveryList: HOOK_DELIVERY_LIST_SCHEMA,
} satisfies Record<string, SchemaObject>;
