import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object, ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of a session's terminals, and of the `terminal` actions that open and close them. */

const STATEFUL_TIER: SchemaObject = { type: 'string', enum: ['subprocess', 'pooled'] };
const WS_PATH: SchemaObject = {
  type: 'string',
  description:
    'The terminal’s WebSocket, relative to the engine: send the key as `Authorization: Bearer …`, or append ' +
    '`?token=` and a token of this terminal',
  example: '/v1/sessions/ses_0123456789abcdef/terminals/trm_0123456789abcdef/ws',
};

const TERMINAL_PROPERTIES: Record<string, SchemaObject> = {
  id: { type: 'string', example: 'trm_0123456789abcdef' },
  status: {
    type: 'string',
    enum: ['open', 'closed'],
    description:
      '`closed` once its shell exited or it was closed; kept (without its output) until the session ends',
  },
  tier: STATEFUL_TIER,
  cols: { type: 'integer' },
  rows: { type: 'integer' },
  cwd: {
    type: 'string',
    description: 'Its starting directory, relative to the workspace root (`""`: the root)',
  },
  command: { type: 'string', description: 'What it runs instead of a login shell, when it was given one' },
  pid: { type: 'integer', description: 'Its shell’s process id in the sandbox' },
  createdAt: TIMESTAMP,
  bytesIn: { type: 'integer', description: 'Bytes typed into it, by every client' },
  bytesOut: { type: 'integer', description: 'Bytes it wrote out' },
  clients: { type: 'integer', description: 'Clients attached to its WebSocket now' },
  endedAt: TIMESTAMP,
  exitCode: {
    type: 'integer',
    description: 'Its shell’s exit status, when it exited (not killed by a signal)',
  },
  signal: { type: 'string', description: 'The signal that ended it, e.g. `SIGHUP` after a close' },
  endReason: {
    type: 'string',
    enum: ['exited', 'closed', 'idle', 'session_ended', 'sandbox_lost', 'shutdown'],
    description:
      '`exited`: its shell ended; `closed`: a client closed it; `idle`: no client and no output for ' +
      'SWITCHYARD_TERMINAL_IDLE_SECONDS; the others: its session, its sandbox or the engine ended',
  },
  wsPath: WS_PATH,
};
const TERMINAL_REQUIRED = [
  'id',
  'status',
  'tier',
  'cols',
  'rows',
  'cwd',
  'createdAt',
  'bytesIn',
  'bytesOut',
  'clients',
];

const TERMINAL_SCHEMA: SchemaObject = object(
  TERMINAL_REQUIRED,
  TERMINAL_PROPERTIES,
  "A terminal of the session: a PTY in the session's sandbox, attached to over its WebSocket (`wsPath`, in REST answers)",
);

const ACTION_ID: SchemaObject = { type: 'string', description: 'The `terminal` action that recorded it' };
const TOKEN: SchemaObject = {
  type: 'string',
  description:
    'Opens this terminal’s WebSocket (`?token=`) without the key, until `tokenExpiresAt`; nothing else',
};

const OPENED_TERMINAL_SCHEMA: SchemaObject = object(
  [...TERMINAL_REQUIRED, 'wsPath', 'token', 'tokenExpiresAt', 'actionId'],
  { ...TERMINAL_PROPERTIES, token: TOKEN, tokenExpiresAt: TIMESTAMP, actionId: ACTION_ID },
  'The terminal opened, with a token for its WebSocket',
);

const TERMINAL_AWAITING_SCHEMA: SchemaObject = object(
  ['id', 'status', 'actionId', 'approval', 'wsPath'],
  {
    id: { type: 'string', description: 'The terminal’s id once it opens', example: 'trm_0123456789abcdef' },
    status: { type: 'string', enum: ['awaiting_approval'] },
    actionId: ACTION_ID,
    approval: ref('ApprovalRequest'),
    wsPath: WS_PATH,
  },
  'A policy asks for approval of the terminal: it opens once approved (`GET …/terminals/{id}` then finds it)',
);

const CLOSED_TERMINAL_SCHEMA: SchemaObject = object(
  [...TERMINAL_REQUIRED, 'actionId'],
  { ...TERMINAL_PROPERTIES, actionId: ACTION_ID },
  'The terminal, closed',
);

const TERMINAL_LIST_SCHEMA: SchemaObject = object(['terminals'], {
  terminals: { type: 'array', items: ref('Terminal') },
});

const TERMINAL_TOKEN_SCHEMA: SchemaObject = object(['token', 'expiresAt', 'wsPath'], {
  token: TOKEN,
  expiresAt: TIMESTAMP,
  wsPath: WS_PATH,
});

const TERMINAL_OUTPUT_SCHEMA: SchemaObject = object(
  ['terminalId', 'terminal'],
  {
    terminalId: { type: 'string' },
    terminal: ref('Terminal'),
    durationMs: { type: 'integer', description: 'How long it was open (op `close`)' },
  },
  '`terminal` actions (ops `open`, `close`): the terminal as it is after the op, with its bytes in and out',
);

export const TERMINAL_SCHEMAS = {
  Terminal: TERMINAL_SCHEMA,
  OpenedTerminal: OPENED_TERMINAL_SCHEMA,
  TerminalAwaitingApproval: TERMINAL_AWAITING_SCHEMA,
  ClosedTerminal: CLOSED_TERMINAL_SCHEMA,
  TerminalList: TERMINAL_LIST_SCHEMA,
  TerminalToken: TERMINAL_TOKEN_SCHEMA,
  TerminalOutput: TERMINAL_OUTPUT_SCHEMA,
} satisfies Record<string, SchemaObject>;
