import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { LANGUAGES } from '@switchyard/common';
import { object, ONLY_TRUE, ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of a session's kernels (`KernelInfo`), and of the kernel a cell ran in (`KernelRef`). */

const LANGUAGE: SchemaObject = { type: 'string', enum: [...LANGUAGES] };
const STATEFUL_TIER: SchemaObject = { type: 'string', enum: ['subprocess', 'pooled'] };

const KERNEL_SCHEMA: SchemaObject = object(
  ['id', 'sessionId', 'language', 'tier', 'executionCount', 'busy', 'startedAt', 'lastUsedAt'],
  {
    id: { type: 'string', example: 'krn_0123456789abcdef' },
    sessionId: { type: 'string' },
    language: LANGUAGE,
    tier: STATEFUL_TIER,
    executionCount: { type: 'integer', description: 'Cells it has run' },
    busy: { type: 'boolean', description: 'A cell is running' },
    pid: { type: 'integer', description: 'Its interpreter’s process id, when known' },
    startedAt: TIMESTAMP,
    lastUsedAt: TIMESTAMP,
  },
  'A live kernel of the session: the interpreter its `state: "session"` code actions of one language run in',
);

/** The kernel a cell ran in; also a failure context's `kernel` (which never has `stateLost`). */
export const KERNEL_RUN_SCHEMA: SchemaObject = object(
  ['id', 'language', 'tier', 'executionCount', 'started'],
  {
    id: { type: 'string' },
    language: LANGUAGE,
    tier: STATEFUL_TIER,
    executionCount: { type: 'integer', description: 'Cells the kernel has run, this one included' },
    started: {
      type: 'boolean',
      description: 'This action found no kernel and began this one: any state from before is gone',
    },
    stateLost: ONLY_TRUE('The kernel was killed during the cell: its state is gone (cell answers only)'),
    reset: object(
      ['reason', 'message', 'at'],
      {
        reason: { type: 'string', enum: ['died', 'idle'] },
        message: { type: 'string', example: 'its process ended' },
        at: TIMESTAMP,
      },
      'On the first cell after the kernel of this language ended unasked (its process died, or it sat idle past ' +
        'SWITCHYARD_KERNEL_IDLE_MS): why the state from before is gone (cell answers only)',
    ),
  },
  'The session kernel a code cell ran in',
);

const KERNEL_LIST_SCHEMA: SchemaObject = object(['kernels'], {
  kernels: { type: 'array', items: ref('Kernel') },
});

const KERNEL_INTERRUPT_SCHEMA: SchemaObject = object(['kernelId', 'running'], {
  kernelId: { type: 'string' },
  running: {
    type: 'boolean',
    description: 'A cell was running and was interrupted (it ends `cancelled`); false: the kernel was idle',
  },
});

const DISPLAY_RESULT_SCHEMA: SchemaObject = object(
  ['data'],
  {
    data: {
      type: 'object',
      additionalProperties: true,
      description:
        'MIME type → value, as Jupyter carries them: `text/plain` always; text types (`text/html`, ' +
        '`text/markdown`, `text/latex`, `image/svg+xml`) as strings; `image/png`, `image/jpeg` as base64; ' +
        '`application/json` as a JSON value',
    },
    metadata: {
      type: 'object',
      additionalProperties: true,
      description: 'Per MIME type, e.g. `{"image/png": {"width": 640, "height": 480}}`',
    },
    isMainResult: {
      type: 'boolean',
      enum: [true],
      description:
        'The value of the cell’s final expression (Jupyter’s execute_result); the others were displayed',
    },
    files: {
      type: 'array',
      description:
        'Entries over `SWITCHYARD_RESULT_MAX_BYTES` (one result) or `SWITCHYARD_CELL_RESULTS_MAX_BYTES` (the cell), ' +
        'written to the workspace instead of inlined; `data["text/plain"]` then says where',
      items: object(['mimeType', 'bytes'], {
        mimeType: { type: 'string' },
        path: {
          type: 'string',
          nullable: true,
          description:
            'Relative to the workspace (`.switchyard/results/…`); null when it could not be written',
        },
        bytes: { type: 'integer' },
        error: { type: 'string', description: 'Why it could not be written' },
      }),
    },
  },
  'A rich result of a kernel cell: one MIME bundle it displayed (`display()`, a matplotlib figure) or its final value',
);

export const KERNEL_SCHEMAS = {
  DisplayResult: DISPLAY_RESULT_SCHEMA,
  Kernel: KERNEL_SCHEMA,
  KernelList: KERNEL_LIST_SCHEMA,
  KernelInterrupt: KERNEL_INTERRUPT_SCHEMA,
  KernelRun: KERNEL_RUN_SCHEMA,
} satisfies Record<string, SchemaObject>;
