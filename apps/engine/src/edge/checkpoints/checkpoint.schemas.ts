import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object, ONLY_TRUE, ref, TIMESTAMP } from '../http/common.schemas';

/**
 * Response schemas of a session's checkpoints (`Checkpoint`, `RestoreOutcome`, `CheckpointDiff`). A fork answers
 * with the new `Session`.
 */

const CHECKPOINT_SCHEMA: SchemaObject = object(
  ['id', 'sessionId', 'createdAt', 'files', 'directories', 'bytes', 'auto'],
  {
    id: { type: 'string', example: 'chk_0123456789abcdef01234567' },
    sessionId: { type: 'string' },
    label: { type: 'string' },
    createdAt: TIMESTAMP,
    files: { type: 'integer', description: 'Entries that are not directories (files, links)' },
    directories: { type: 'integer' },
    bytes: {
      type: 'integer',
      description:
        'Bytes of its regular files (what a full copy takes; a snapshot shares them with the workspace)',
    },
    auto: {
      type: 'boolean',
      description:
        'Taken by the engine (`checkpoint: "before"`, a plan’s `each-step`): pruned past the keep count',
    },
    actionId: { type: 'string', description: 'The action it was taken just before' },
    seq: {
      type: 'integer',
      description: 'The `seq` of the last action of the session whose writes it holds (0 for none)',
    },
  },
  "A checkpoint of the session's workspace: its files, directories, modes and links as they were",
);

const CHECKPOINT_LIST_SCHEMA: SchemaObject = object(
  ['checkpoints'],
  { checkpoints: { type: 'array', items: ref('Checkpoint') } },
  'Oldest first',
);

const CHECKPOINT_RESTORE_SCHEMA: SchemaObject = object(
  ['checkpoint', 'restored', 'running'],
  {
    checkpoint: ref('Checkpoint'),
    restored: ref('RestoredCheckpoint'),
    running: object(
      ['kernels', 'processes'],
      {
        kernels: { type: 'array', items: { type: 'string' }, description: 'Kernel ids' },
        processes: { type: 'array', items: { type: 'string' }, description: 'Ids of running processes' },
      },
      'Kernels and background processes kept running through the restore: their memory is in no checkpoint',
    ),
    note: { type: 'string', description: 'When some kept running: what that means for their state' },
  },
  'The workspace is back as it was at the checkpoint',
);

const DIFF_ENTRY_TYPE: SchemaObject = { type: 'string', enum: ['file', 'dir', 'symlink', 'other'] };

const DIFF_SIDE: SchemaObject = {
  type: 'array',
  description: 'Paths on one side only (everything under an added or removed directory too)',
  items: object(['path', 'type'], {
    path: { type: 'string' },
    type: DIFF_ENTRY_TYPE,
    size: { type: 'integer', description: 'Regular files only' },
  }),
};

const CHECKPOINT_DIFF_SCHEMA: SchemaObject = object(
  ['from', 'to', 'added', 'removed', 'modified', 'truncated'],
  {
    from: { type: 'string' },
    to: { type: 'string', description: 'A checkpoint id, or `current` (the workspace now)' },
    added: DIFF_SIDE,
    removed: DIFF_SIDE,
    modified: {
      type: 'array',
      description: 'Paths on both sides whose contents, mode or link target changed',
      items: object(['path', 'type'], {
        path: { type: 'string' },
        type: DIFF_ENTRY_TYPE,
        sizeBefore: { type: 'integer' },
        sizeAfter: { type: 'integer' },
        modeBefore: { type: 'string', description: 'Octal, when the permission bits changed' },
        modeAfter: { type: 'string' },
        targetBefore: { type: 'string', description: 'Links: where they point' },
        targetAfter: { type: 'string' },
        diff: { type: 'string', description: 'Unified diff, for text files up to the diff size limit' },
        diffOmitted: {
          type: 'string',
          enum: ['too_large', 'binary', 'budget'],
          description: 'Why a changed file has no `diff`',
        },
        contentUnchanged: ONLY_TRUE('Only the mode changed'),
      }),
    },
    truncated: { type: 'boolean', description: 'More changes than the lists hold (10 000 paths)' },
  },
  'What changed between a checkpoint and another one or the workspace now',
);

export const CHECKPOINT_SCHEMAS = {
  Checkpoint: CHECKPOINT_SCHEMA,
  CheckpointList: CHECKPOINT_LIST_SCHEMA,
  CheckpointRestore: CHECKPOINT_RESTORE_SCHEMA,
  CheckpointDiff: CHECKPOINT_DIFF_SCHEMA,
} satisfies Record<string, SchemaObject>;
