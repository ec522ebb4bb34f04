import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object, ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of approvals: the actions waiting for a decision, and a decision made. */

const PENDING_APPROVAL_SCHEMA: SchemaObject = object(
  [
    'actionId',
    'sessionId',
    'tenant',
    'type',
    'tool',
    'summary',
    'risk',
    'tier',
    'rule',
    'layer',
    'reasons',
    'requestedAt',
    'expiresAt',
  ],
  {
    actionId: { type: 'string' },
    sessionId: { type: 'string' },
    tenant: { type: 'string' },
    type: { type: 'string' },
    tool: { type: 'string', description: 'The tool it calls (`python`, `browser_upload`, a skill…)' },
    summary: { type: 'string', description: 'Its input in short, redacted' },
    risk: ref('RiskAssessment'),
    tier: { type: 'string', description: 'The tier it would run in' },
    rule: { type: 'string', description: 'The rule that asks, as written (JSON)' },
    layer: { type: 'string', enum: ['engine', 'tenant', 'session', 'plan'] },
    reasons: { type: 'array', items: { type: 'string' } },
    requestedAt: TIMESTAMP,
    expiresAt: TIMESTAMP,
  },
  'An action waiting for a decision',
);

const APPROVAL_LIST_SCHEMA: SchemaObject = object(
  ['approvals'],
  { approvals: { type: 'array', items: ref('PendingApproval'), description: 'Oldest first' } },
  'Actions waiting for approval that the caller may see: its own tenant’s, and those it may decide',
);

const APPROVAL_DECISION_SCHEMA: SchemaObject = object(
  ['actionId', 'sessionId', 'decision', 'decidedAt', 'decidedBy'],
  {
    actionId: { type: 'string' },
    sessionId: { type: 'string' },
    decision: { type: 'string', enum: ['approved', 'rejected'] },
    decidedAt: TIMESTAMP,
    decidedBy: { type: 'string', description: 'Who decided: `admin:<tenant>`, `tenant:<tenant>` or `open`' },
    reason: { type: 'string' },
  },
  'The decision, as recorded: an approved action now runs (its result comes as usual); a rejected one ends denied',
);

export const APPROVAL_SCHEMAS = {
  PendingApproval: PENDING_APPROVAL_SCHEMA,
  ApprovalList: APPROVAL_LIST_SCHEMA,
  ApprovalDecision: APPROVAL_DECISION_SCHEMA,
} satisfies Record<string, SchemaObject>;
