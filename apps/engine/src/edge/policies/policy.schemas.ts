import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object, ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of policies: a session's effective policy, a tenant's layer, and the caller. */

const LAYER: SchemaObject = { type: 'string', enum: ['engine', 'tenant', 'session', 'plan'] };
const RULES: SchemaObject = { type: 'array', items: ref('PolicyRuleDto') };

const POLICY_LAYER_SCHEMA: SchemaObject = object(
  ['layer', 'source', 'rules'],
  { layer: LAYER, source: { type: 'string', description: 'Where its rules were set' }, rules: RULES },
  'One layer of rules',
);

const HIDDEN_TOOL_SCHEMA: SchemaObject = object(
  ['tool', 'layer'],
  {
    tool: { type: 'string' },
    layer: LAYER,
    rule: object(['layer', 'index', 'rule'], {
      layer: LAYER,
      index: { type: 'integer', description: 'Its index in its layer, from 0' },
      rule: ref('PolicyRuleDto'),
    }),
  },
  'A tool left out, and the layer (and rule) that leaves it out; no rule: none of the layer’s allow rules matches it',
);

const EFFECTIVE_POLICY_SCHEMA: SchemaObject = object(
  ['layers', 'approvers', 'approvalTimeoutMs', 'tools'],
  {
    layers: { type: 'array', items: ref('PolicyLayer'), description: 'Engine, tenant, session' },
    approvers: {
      type: 'string',
      enum: ['admin', 'tenant'],
      description:
        'Who decides approvals: admin keys only, or the session’s own key too (SWITCHYARD_APPROVERS)',
    },
    approvalTimeoutMs: { type: 'integer', description: 'How long an action waits for a decision' },
    tools: object(['offered', 'hidden'], {
      offered: { type: 'array', items: { type: 'string' } },
      hidden: { type: 'array', items: ref('HiddenTool') },
    }),
  },
  'The policy that applies to the session',
);

const TENANT_POLICY_SCHEMA: SchemaObject = object(
  ['tenant', 'rules'],
  {
    tenant: { type: 'string' },
    rules: RULES,
    updatedAt: TIMESTAMP,
    updatedBy: { type: 'string', description: 'The admin who set it' },
  },
  'A tenant’s policy layer',
);

const CALLER_SCHEMA: SchemaObject = object(
  ['tenant', 'admin', 'id', 'approver'],
  {
    tenant: { type: 'string', description: '`open` without keys, else `t_` and a hash of the key' },
    admin: { type: 'boolean', description: 'The key is one of SWITCHYARD_ADMIN_KEYS' },
    id: { type: 'string', description: 'How decisions and policies record the caller' },
    approver: { type: 'boolean', description: 'It may approve or reject its own tenant’s actions' },
  },
  'Who the caller is',
);

export const POLICY_SCHEMAS = {
  PolicyLayer: POLICY_LAYER_SCHEMA,
  HiddenTool: HIDDEN_TOOL_SCHEMA,
  EffectivePolicy: EFFECTIVE_POLICY_SCHEMA,
  TenantPolicy: TENANT_POLICY_SCHEMA,
  Caller: CALLER_SCHEMA,
} satisfies Record<string, SchemaObject>;
