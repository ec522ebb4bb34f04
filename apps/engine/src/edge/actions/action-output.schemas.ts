import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { PROCESS_SIGNALS } from '@switchyard/sandbox';
import { FREE_OBJECT, nullable, object, ref, TIMESTAMP } from '../http/common.schemas';

/**
 * The envelope's `output`, per action type, as the handlers build it (redacted like the rest of the envelope). The
 * shapes of different types and ops overlap (a process `start` and `stop` answer the same fields), so they are
 * combined with `anyOf`: the envelope's `type`, and the request's `op`, tell which one a body is.
 */

const STATEFUL_TIER: SchemaObject = { type: 'string', enum: ['subprocess', 'pooled'] };

// ---------------------------------------------------------------- code (a kernel cell)

const CODE_CELL_OUTPUT: SchemaObject = object(
  ['kernel'],
  {
    kernel: ref('KernelRun'),
    result: {
      type: 'string',
      description:
        'repr (python) / util.inspect (node) of the cell’s last expression; absent when it has none',
    },
    results: {
      type: 'array',
      items: ref('DisplayResult'),
      description:
        'What the cell displayed, in order, as Jupyter MIME bundles: `display()` calls, matplotlib figures, and the ' +
        'final expression’s value (`isMainResult`). Empty for bash and for cells that showed nothing',
    },
    note: {
      type: 'string',
      description: 'Why the cell ran in another kernel than the session’s existing one of its language',
    },
  },
  '`code` with `state: "session"`: the kernel that ran the cell, its last expression’s value and its rich results. A `fresh` code ' +
    'action has no `output`: its answer is `stdout`, `stderr` and `exitCode`.',
);

// ---------------------------------------------------------------- file

const PATH = { type: 'string', description: 'As the caller named it, normalised, relative to the workspace' };
const ENTRY_TYPE: SchemaObject = { type: 'string', enum: ['file', 'dir', 'symlink', 'other'] };
const MORE_THAN_LIMIT: SchemaObject = {
  type: 'boolean',
  description: 'More results than `limit` (or the scan’s entry cap): the list stops there',
};

// Each op's output is a registered schema of its own (`FileReadOutput`, …): generated clients name a type after it.
// Inline shapes with titles would do too, but titles repeated across types (`list`, `write`) collide in them.
const fileOp = (op: string, required: string[], properties: SchemaObject['properties']): SchemaObject =>
  object(required, properties!, `\`file\` op \`${op}\``);

const FILE_OPS = {
  FileReadOutput: fileOp('read', ['path', 'encoding', 'content', 'truncated'], {
    path: PATH,
    encoding: {
      type: 'string',
      enum: ['utf8', 'base64'],
      description: '`base64` for a binary file, returned whole',
    },
    content: { type: 'string', description: 'The lines asked for (utf8), or the whole file (base64)' },
    totalLines: { type: 'integer', description: 'utf8 only' },
    offset: { type: 'integer', description: 'First line returned, 1-based (utf8 only)' },
    lines: { type: 'integer', description: 'Lines returned (utf8 only)' },
    size: { type: 'integer', description: 'Bytes (base64 only)' },
    truncated: { type: 'boolean', description: 'More lines follow the window (or it hit the read cap)' },
  }),
  FileWriteOutput: fileOp('write', ['path', 'bytesWritten', 'size', 'created'], {
    path: PATH,
    bytesWritten: { type: 'integer' },
    size: { type: 'integer', description: 'The file’s size after the write' },
    created: { type: 'boolean' },
  }),
  FileEditOutput: fileOp('edit', ['path', 'replacements'], { path: PATH, replacements: { type: 'integer' } }),
  FileListOutput: fileOp('list', ['entries'], {
    entries: {
      type: 'array',
      items: object(['path', 'type', 'size'], {
        path: PATH,
        type: ENTRY_TYPE,
        size: { type: 'integer', description: '0 for a directory' },
      }),
    },
    nextCursor: {
      type: 'string',
      description: 'Pass as `cursor` for the next entries; absent on the last',
    },
  }),
  FileFindOutput: fileOp('find', ['paths', 'truncated'], {
    paths: { type: 'array', items: PATH },
    truncated: MORE_THAN_LIMIT,
  }),
  FileGrepOutput: fileOp('grep', ['matches', 'truncated'], {
    matches: { type: 'array', items: { type: 'string', description: '`path:line:text`' } },
    truncated: MORE_THAN_LIMIT,
  }),
  FileStatOutput: fileOp('stat', ['path', 'type', 'size', 'mtime', 'mode'], {
    path: PATH,
    type: ENTRY_TYPE,
    size: { type: 'integer', description: '0 for a directory' },
    mtime: TIMESTAMP,
    mode: { type: 'string', description: 'Permission bits, octal (`0644`)' },
  }),
  FileMkdirOutput: fileOp('mkdir', ['path', 'created'], {
    path: PATH,
    created: { type: 'boolean', description: 'false: it already existed' },
  }),
  FileMoveOutput: fileOp('move', ['path', 'to'], { path: PATH, to: PATH }),
  FileDeleteOutput: fileOp('delete', ['path', 'deleted'], {
    path: PATH,
    deleted: { type: 'boolean', enum: [true] },
  }),
  // The file transfer API's (`…/files/content`, `…/files/archive`), recorded as file actions.
  FileUploadOutput: fileOp('upload', ['path', 'size', 'sha256'], {
    path: PATH,
    size: { type: 'integer', description: 'Bytes written' },
    sha256: { type: 'string', description: 'Hex sha256 of the bytes written' },
  }),
  FileDownloadOutput: fileOp('download', ['path', 'size', 'bytes', 'sha256'], {
    path: PATH,
    size: { type: 'integer', description: 'The file’s size' },
    bytes: { type: 'integer', description: 'Bytes sent (a range’s)' },
    sha256: { type: 'string', description: 'Hex sha256 of the bytes sent' },
    range: object(['start', 'end'], { start: { type: 'integer' }, end: { type: 'integer' } }, 'Inclusive'),
  }),
  FileUploadArchiveOutput: fileOp('upload_archive', ['path', 'files', 'directories', 'bytes'], {
    path: { type: 'string', description: 'The directory extracted into (`""`: the root)' },
    files: { type: 'integer' },
    directories: { type: 'integer' },
    bytes: { type: 'integer', description: 'Bytes of file content written' },
  }),
  FileDownloadArchiveOutput: fileOp('download_archive', ['path', 'bytes', 'sha256'], {
    path: { type: 'string', description: 'The directory archived (`""`: the root)' },
    bytes: { type: 'integer', description: 'Bytes of tar sent' },
    sha256: { type: 'string', description: 'Hex sha256 of the tar sent' },
  }),
} satisfies Record<string, SchemaObject>;

const FILE_OUTPUT: SchemaObject = {
  description: '`file` actions: the op’s result (a failed op has no `output`, only `error`)',
  anyOf: Object.keys(FILE_OPS).map(ref),
};

// ---------------------------------------------------------------- browser

const BROWSER_OUTPUT: SchemaObject = object(
  ['url', 'title', 'route'],
  {
    tabId: nullable({
      type: 'string',
      description: 'The tab it ran in; null when the session has no open tab left (after `close_tab`)',
    }),
    url: { type: 'string' },
    title: { type: 'string' },
    status: nullable({
      type: 'integer',
      description:
        'HTTP status of the tab’s last main-document response; null before any or when it had none',
    }),
    route: {
      type: 'string',
      enum: ['shared', 'dedicated'],
      description: 'Where the session’s browser runs',
    },
    data: FREE_OBJECT(
      'The op’s own result: extracted `content` or `links`, evaluate’s `value`, `tabs` after a tab op…; a string ' +
        'over the output cap is cut, with `<key>Bytes` and `truncated: true`',
    ),
    artifacts: {
      type: 'array',
      description: 'Files it wrote in the workspace (screenshot, pdf, download)',
      items: object(['path', 'bytes', 'mimeType'], {
        path: { type: 'string' },
        bytes: { type: 'integer' },
        mimeType: { type: 'string' },
      }),
    },
    blocked: {
      type: 'array',
      description: 'Requests the URL policy refused while it ran (the last 20)',
      items: object(['url', 'reason'], { url: { type: 'string' }, reason: { type: 'string' } }),
    },
    openedTabs: {
      type: 'array',
      items: { type: 'string' },
      description: 'Tabs the page opened (popups) while it ran',
    },
  },
  '`browser` actions: the tab after the op, and the op’s data. A failed op has it too, unless the browser is gone.',
);

// ---------------------------------------------------------------- process

const PROCESS_SCHEMA: SchemaObject = object(
  ['id', 'command', 'tier', 'startedAt', 'running'],
  {
    id: { type: 'string', example: 'prc_0123456789abcdef' },
    name: { type: 'string' },
    command: { type: 'string' },
    tier: STATEFUL_TIER,
    pid: { type: 'integer' },
    startedAt: TIMESTAMP,
    running: { type: 'boolean' },
    endedAt: TIMESTAMP,
    exitCode: { type: 'integer', description: 'When it exited (not killed by a signal)' },
    signal: { type: 'string', description: 'The signal that ended it, e.g. `SIGTERM`' },
    endReason: {
      type: 'string',
      description: 'When the engine ended it: `stopped`, `session_ended`, `sandbox_lost`, `shutdown`',
    },
  },
  'A background process of the session (`process` actions)',
);

const processOp = (op: string, required: string[], properties: SchemaObject['properties']): SchemaObject =>
  object(['processId', ...required], { processId: { type: 'string' }, ...properties }, `\`process\` ${op}`);

/** Registered one by one, as the file ops' outputs are. */
const PROCESS_OPS = {
  ProcessStateOutput: processOp('ops `start` and `stop`', ['process'], { process: ref('Process') }),
  ProcessListOutput: object(
    ['processes'],
    { processes: { type: 'array', items: ref('Process') } },
    '`process` op `list`',
  ),
  ProcessLogsOutput: processOp('op `logs`', ['entries', 'nextSeq', 'dropped', 'process'], {
    entries: {
      type: 'array',
      items: object(['seq', 'stream', 'text'], {
        seq: { type: 'integer' },
        stream: { type: 'string', enum: ['stdout', 'stderr'] },
        text: { type: 'string' },
      }),
    },
    nextSeq: { type: 'integer', description: 'Pass as `sinceSeq` for what follows' },
    dropped: { type: 'integer', description: 'Older entries no longer kept' },
    process: ref('Process'),
  }),
  ProcessWriteOutput: processOp('op `write`', ['bytes', 'eof'], {
    bytes: { type: 'integer', description: 'Bytes written to its stdin' },
    eof: { type: 'boolean', description: 'Its stdin was closed after them' },
  }),
  ProcessSignalOutput: processOp('op `signal`', ['signal', 'process'], {
    signal: { type: 'string', enum: [...PROCESS_SIGNALS] },
    process: ref('Process'),
  }),
  ProcessWaitOutput: processOp('op `wait`', ['exited', 'process'], {
    exited: { type: 'boolean', description: 'false: still running at the timeout (status `timed_out`)' },
    process: ref('Process'),
  }),
  ProcessConnectOutput: object(
    ['port', 'via', 'method', 'path', 'bytesIn', 'bytesOut'],
    {
      port: { type: 'integer', minimum: 1, maximum: 65535 },
      via: {
        type: 'string',
        enum: ['path', 'host'],
        description: 'Through `/v1/sessions/{id}/ports/{port}/…`, or a preview host',
      },
      method: { type: 'string', example: 'GET' },
      path: { type: 'string', description: 'The path and query the server was sent (secrets redacted)' },
      websocket: { type: 'boolean', enum: [true], description: 'A WebSocket upgrade' },
      status: { type: 'integer', description: 'The HTTP status the server answered (101 for a WebSocket)' },
      bytesIn: {
        type: 'integer',
        description: 'Body bytes from the caller to the server (all bytes for a WebSocket)',
      },
      bytesOut: {
        type: 'integer',
        description: 'Body bytes from the server to the caller (all bytes for a WebSocket)',
      },
      processId: {
        type: 'string',
        description: 'The background process whose tree listens on the port, when known',
      },
      kernelId: { type: 'string', description: 'The kernel whose tree listens on the port, when known' },
      error: { type: 'string', description: 'Why it ended without a whole answer' },
    },
    '`process` op `connect`: a request (or WebSocket) the engine proxied to a port of the session, recorded when it ' +
      'ended (not an op a caller sends)',
  ),
} satisfies Record<string, SchemaObject>;

const PROCESS_OUTPUT: SchemaObject = {
  description: '`process` actions: the process the op acted on, as it is after it',
  anyOf: Object.keys(PROCESS_OPS).map(ref),
};

// ---------------------------------------------------------------- kernel

const KERNEL_RESTART_OUTPUT: SchemaObject = object(
  ['kernels'],
  {
    kernels: { type: 'array', items: ref('Kernel'), description: 'The kernels restarted, fresh' },
    message: { type: 'string', description: 'When there was none to restart' },
  },
  '`kernel` actions (op `restart`): the session’s kernels of the language, restarted',
);

const ACTION_OUTPUT: SchemaObject = {
  description:
    'Type-specific data, redacted: a kernel cell’s kernel and value (code), a file op’s result, the page after a ' +
    'browser op, a process and its logs, restarted kernels, a skill’s returned value, a terminal opened or closed. ' +
    'Absent for fresh code actions and most failures.',
  anyOf: [
    ref('CodeCellOutput'),
    ref('FileOutput'),
    ref('BrowserOutput'),
    ref('ProcessOutput'),
    ref('KernelRestartOutput'),
    ref('SkillOutput'),
    ref('TerminalOutput'),
  ],
};

export const ACTION_OUTPUT_SCHEMAS = {
  ActionOutput: ACTION_OUTPUT,
  CodeCellOutput: CODE_CELL_OUTPUT,
  FileOutput: FILE_OUTPUT,
  ...FILE_OPS,
  BrowserOutput: BROWSER_OUTPUT,
  ProcessOutput: PROCESS_OUTPUT,
  ...PROCESS_OPS,
  KernelRestartOutput: KERNEL_RESTART_OUTPUT,
  Process: PROCESS_SCHEMA,
} satisfies Record<string, SchemaObject>;
