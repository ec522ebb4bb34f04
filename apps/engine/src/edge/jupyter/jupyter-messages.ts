import { randomUUID } from 'node:crypto';

/**
 * Jupyter messaging protocol 5.3 as it travels over a kernel's `channels` WebSocket in Jupyter's JSON ("legacy")
 * framing: one message per text frame, `{header, parent_header, metadata, content, channel, buffers}`, with
 * `msg_id` and `msg_type` repeated at the top as jupyter_server sends them (jupyter_server's gateway kernel client
 * reads them there).
 */
export const PROTOCOL_VERSION = '5.3';

export const CHANNELS = ['shell', 'control', 'stdin', 'iopub', 'hb'] as const;
export type Channel = (typeof CHANNELS)[number];

export interface JupyterHeader {
  msg_id: string;
  msg_type: string;
  username: string;
  session: string;
  date: string;
  version: string;
}

export interface JupyterMessage {
  header: JupyterHeader;
  msg_id: string;
  msg_type: string;
  parent_header: Record<string, unknown>;
  metadata: Record<string, unknown>;
  content: Record<string, unknown>;
  channel: Channel;
  buffers: unknown[];
}

/** A message a client sent, as the kernel reads it. Its header, as sent, is the `parent_header` of what answers it. */
export interface JupyterRequest {
  channel: Channel;
  msgType: string;
  msgId: string;
  header: Record<string, unknown>;
  content: Record<string, unknown>;
}

/** Longest `msg_id` or `msg_type` taken: clients send UUIDs and short names. */
const MAX_ID_CHARS = 256;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isChannel = (v: unknown): v is Channel =>
  typeof v === 'string' && (CHANNELS as readonly string[]).includes(v);

const shortString = (v: unknown): v is string =>
  typeof v === 'string' && v.length > 0 && v.length <= MAX_ID_CHARS;

/**
 * A parsed frame as a request, or why it is not one. A message without `channel` goes to `shell`, as jupyter_server
 * takes it (its gateway kernel client sends none).
 */
export function parseJupyterRequest(value: unknown): JupyterRequest | string {
  if (!isRecord(value)) return 'a message must be a JSON object';
  const { header, content, channel } = value;
  if (!isRecord(header)) return 'header must be an object';
  if (!shortString(header.msg_type))
    return `header.msg_type must be a string of 1 to ${MAX_ID_CHARS} characters`;
  if (!shortString(header.msg_id)) return `header.msg_id must be a string of 1 to ${MAX_ID_CHARS} characters`;
  if (content !== undefined && !isRecord(content)) return 'content must be an object';
  if (channel !== undefined && channel !== null && !isChannel(channel)) {
    return `channel must be one of ${CHANNELS.join(', ')}`;
  }
  return {
    channel: isChannel(channel) ? channel : 'shell',
    msgType: header.msg_type,
    msgId: header.msg_id,
    header,
    content: content ?? {},
  };
}

/** `execute_request` → `execute_reply`. */
export const replyType = (requestType: string): string => requestType.replace(/_request$/, '_reply');

/** A message from the kernel: on `channel`, answering `parent` (none for what nothing asked for). */
export function jupyterMessage(
  channel: Channel,
  msgType: string,
  content: Record<string, unknown>,
  parent: JupyterRequest | undefined,
  session: string,
  now: Date,
): JupyterMessage {
  const username = typeof parent?.header.username === 'string' ? parent.header.username : 'switchyard';
  const msgId = randomUUID();
  return {
    header: {
      msg_id: msgId,
      msg_type: msgType,
      username,
      session,
      date: now.toISOString(),
      version: PROTOCOL_VERSION,
    },
    msg_id: msgId,
    msg_type: msgType,
    parent_header: parent?.header ?? {},
    metadata: {},
    content,
    channel,
    buffers: [],
  };
}
