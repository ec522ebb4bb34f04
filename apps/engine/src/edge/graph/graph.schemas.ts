import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_STATUSES, ACTION_TYPES } from '@switchyard/common';
import type { GraphEdgeType, GraphNodeLabel } from '@switchyard/context-graph';
import {
  APPROVAL_RECORD_SCHEMA as APPROVAL_RECORD,
  FILE_TOUCHES_SCHEMA,
  SANDBOX_SCHEMA,
} from '../actions/action.schemas';
import {
  ACTION_TIER,
  FREE_OBJECT,
  nullable,
  object,
  ref,
  type SchemaOrRef,
  TIMESTAMP,
} from '../http/common.schemas';
import { KERNEL_RUN_SCHEMA } from '../kernels/kernel.schemas';

/**
 * Response schemas of the graph queries, as the context graph answers them (`GraphView`, `FailureContext`,
 * `FileLineage`): the same from the embedded store and Neo4j.
 */

// Records by key, so that a label or edge type added to the graph's types without being listed here fails to compile.
const NODE_LABELS: Record<GraphNodeLabel, true> = {
  Session: true,
  Action: true,
  File: true,
  Sandbox: true,
  Kernel: true,
  Process: true,
  Checkpoint: true,
  Plan: true,
  Step: true,
  Approval: true,
};
const EDGE_TYPES: Record<GraphEdgeType, true> = {
  HAS_ACTION: true,
  NEXT: true,
  READ: true,
  WROTE: true,
  RETRY_OF: true,
  CALLED_BY: true,
  RAN_IN: true,
  HAS_APPROVAL: true,
  STARTED: true,
  REACHED: true,
  HAS_CHECKPOINT: true,
  BEFORE: true,
  RESTORED: true,
  FORKED_FROM: true,
  HAS_PLAN: true,
  HAS_STEP: true,
  DEPENDS_ON: true,
  ATTEMPT: true,
  REPLACES: true,
};

const PROPERTIES = FREE_OBJECT(
  'Primitive values only, as Neo4j stores them: nested values are JSON strings, unknown ones absent (never null)',
);

const GRAPH_SCHEMA: SchemaObject = object(
  ['nodes', 'edges'],
  {
    nodes: {
      type: 'array',
      items: object(['id', 'label', 'properties'], {
        id: { type: 'string' },
        label: { type: 'string', enum: Object.keys(NODE_LABELS) },
        properties: PROPERTIES,
      }),
    },
    edges: {
      type: 'array',
      items: object(['from', 'to', 'type', 'properties'], {
        from: { type: 'string', description: 'Node id' },
        to: { type: 'string', description: 'Node id' },
        type: { type: 'string', enum: Object.keys(EDGE_TYPES) },
        properties: PROPERTIES,
      }),
    },
  },
  'The session as a graph: its actions, files, sandboxes, kernels, processes, checkpoints and plans',
);

/** An action's identity and outcome, without its input, output or result. */
const SUMMARY_PROPERTIES: Record<string, SchemaOrRef> = {
  id: { type: 'string' },
  seq: { type: 'integer', description: 'Position in its session, from 1' },
  type: { type: 'string', enum: [...ACTION_TYPES] },
  operation: {
    type: 'string',
    description: 'The op (file, browser, process, kernel) or the language (code)',
  },
  status: { type: 'string', enum: [...ACTION_STATUSES] },
  inputSummary: { type: 'string' },
  inputHash: { type: 'string', description: 'sha256 hex of the canonical input' },
  startedAt: TIMESTAMP,
  endedAt: TIMESTAMP,
  durationMs: { type: 'number' },
  tier: ACTION_TIER,
  exitCode: { type: 'integer' },
  error: ref('ActionError'),
  retryOf: { type: 'string' },
  retryReason: { type: 'string' },
  calledBy: { type: 'string', description: 'The action that called it (a skill’s `ctx.call`)' },
};
const SUMMARY_REQUIRED = [
  'id',
  'seq',
  'type',
  'operation',
  'status',
  'inputSummary',
  'inputHash',
  'startedAt',
  'tier',
];

const CHECKPOINT_REF_SCHEMA: SchemaObject = object(['id', 'createdAt', 'auto'], {
  id: { type: 'string' },
  label: { type: 'string' },
  createdAt: TIMESTAMP,
  auto: {
    type: 'boolean',
    description: 'Taken by the engine (`checkpoint: "before"`, a plan’s `each-step`)',
  },
  deletedAt: { ...TIMESTAMP, description: 'Deleted or pruned: it can no longer be restored' },
});

const ACTION_RECORD_SCHEMA: SchemaObject = object(
  [...SUMMARY_REQUIRED, 'sessionId', 'input', 'risk', 'files'],
  {
    ...SUMMARY_PROPERTIES,
    sessionId: { type: 'string' },
    input: FREE_OBJECT('The request as sent, redacted'),
    risk: ref('RiskAssessment'),
    outputExcerpt: { type: 'string', description: 'The first few KiB of stdout/stderr/output' },
    sandbox: SANDBOX_SCHEMA,
    kernel: ref('KernelRun'),
    startedProcess: object(
      ['id', 'command', 'tier', 'startedAt'],
      {
        id: { type: 'string' },
        name: { type: 'string' },
        command: { type: 'string' },
        tier: { type: 'string', enum: ['subprocess', 'pooled'] },
        startedAt: TIMESTAMP,
      },
      'The background process it started',
    ),
    reached: object(
      ['kind', 'id', 'port'],
      {
        kind: { type: 'string', enum: ['process', 'kernel'] },
        id: {
          type: 'string',
          description: 'The process (`prc_…`) or kernel (`krn_…`) whose tree listens on the port',
        },
        port: { type: 'integer', minimum: 1, maximum: 65535 },
      },
      'The server its connection reached (a `process` action of op `connect`: a request the engine proxied to a ' +
        'port of the session): a `REACHED` edge to that process or kernel',
    ),
    checkpoint: { ...CHECKPOINT_REF_SCHEMA, description: 'The checkpoint taken just before it' },
    approval: ref('ApprovalRecord'),
    calledBy: object(
      ['actionId', 'depth'],
      { actionId: { type: 'string' }, depth: { type: 'integer', minimum: 1 } },
      'The action that called it (a skill’s `ctx.call`), and how deep',
    ),
    files: FILE_TOUCHES_SCHEMA,
    result: ref('ActionResult'),
  },
  'An action as the graph records it; `result` is the envelope returned to the caller (absent while it runs or ' +
    'after a crash)',
);

const FAILURE_CONTEXT_SCHEMA: SchemaObject = object(
  ['action', 'retryChain', 'before', 'files', 'callers', 'calls'],
  {
    action: ref('ActionRecord'),
    retryChain: {
      type: 'array',
      description: 'Every action linked to it by RETRY_OF, both ways, and itself, by `seq`',
      items: object([...SUMMARY_REQUIRED, 'relation'], {
        ...SUMMARY_PROPERTIES,
        relation: { type: 'string', enum: ['ancestor', 'self', 'descendant'] },
      }),
    },
    before: {
      type: 'array',
      items: ref('ActionSummary'),
      description: 'Up to `before` actions just before it, oldest first',
    },
    files: {
      type: 'array',
      description: 'The files it read or wrote, by path',
      items: object(['path', 'access'], {
        path: { type: 'string' },
        access: { type: 'array', items: { type: 'string', enum: ['read', 'write'] } },
        lastWrittenBy: ref('ActionSummary'),
      }),
    },
    planStep: nullable(
      object(
        ['planId', 'stepId', 'version'],
        { planId: { type: 'string' }, stepId: { type: 'string' }, version: { type: 'integer' } },
        'The plan step version it was an attempt of; null outside a plan',
      ),
    ),
    kernel: nullable({ ...KERNEL_RUN_SCHEMA, description: 'The session kernel it ran in; null outside one' }),
    checkpoint: nullable({
      ...CHECKPOINT_REF_SCHEMA,
      description:
        'What a retry with `restore: true` would restore (taken before it or its nearest retried ancestor); null ' +
        'when none. A deleted one keeps `deletedAt`',
    }),
    callers: {
      type: 'array',
      items: ref('ActionSummary'),
      description:
        'The actions that called it (a skill’s `ctx.call`), nearest first, up to the top-level one',
    },
    calls: {
      type: 'array',
      items: ref('ActionSummary'),
      description: 'The actions it called (a skill’s tools and skills), by `seq`',
    },
    approval: nullable({
      ...APPROVAL_RECORD,
      description: 'Why it waited for approval and the decision; null when no rule asked',
    }),
  },
  'What a reflection loop needs to revise an action, in one answer',
);

const FILE_LINEAGE_SCHEMA: SchemaObject = object(
  ['path', 'entries'],
  {
    path: { type: 'string' },
    entries: {
      type: 'array',
      description:
        'By session (a fork’s sources first, up to the fork), then `seq`; empty for a path never touched',
      items: object([...SUMMARY_REQUIRED, 'sessionId', 'access'], {
        ...SUMMARY_PROPERTIES,
        sessionId: { type: 'string', description: 'The session whose action it was' },
        access: { type: 'array', items: { type: 'string', enum: ['read', 'write'] } },
      }),
    },
  },
  'Which actions wrote and read one workspace file, in order',
);

export const GRAPH_SCHEMAS = {
  Graph: GRAPH_SCHEMA,
  FailureContext: FAILURE_CONTEXT_SCHEMA,
  ActionRecord: ACTION_RECORD_SCHEMA,
  ActionSummary: object(SUMMARY_REQUIRED, SUMMARY_PROPERTIES),
  FileLineage: FILE_LINEAGE_SCHEMA,
} satisfies Record<string, SchemaObject>;
