import { errorFromResponse } from './errors';
import type { SessionEvent, SessionEventType } from './types';

/** One message of a `text/event-stream`, as the HTML spec's parser dispatches it. */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
  /** A `retry:` field seen before or in this message: the server's reconnection delay. */
  retry?: number;
}

/**
 * Incremental `text/event-stream` parser: feed it decoded chunks in order, it returns the messages they complete.
 * Comments (`: keep-alive`) are dropped; lines may end in LF, CR or CRLF and break anywhere between chunks.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private id: string | undefined;
  private hasId = false;
  /** The last `retry:` the server sent, in milliseconds. */
  retry: number | undefined;

  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      // A lone CR at the end may be the first half of a CRLF: wait for the next chunk.
      if (!match || (match[0] === '\r' && match.index === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const message = this.line(line);
      if (message) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.event = value;
        break;
      case 'id':
        if (!value.includes('\0')) {
          this.id = value;
          this.hasId = true;
        }
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        break;
    }
    return undefined;
  }

  private dispatch(): SseMessage | undefined {
    const message: SseMessage | undefined =
      this.data.length === 0
        ? undefined
        : {
            ...(this.hasId && { id: this.id }),
            event: this.event || 'message',
            data: this.data.join('\n'),
            ...(this.retry !== undefined && { retry: this.retry }),
          };
    this.data = [];
    this.event = '';
    this.hasId = false;
    this.id = undefined;
    return message;
  }
}

/** Opens the stream, sending `Last-Event-ID` when given. */
export type OpenStream = (lastEventId: string | undefined, signal?: AbortSignal) => Promise<Response>;

export interface EventStreamOptions {
  signal?: AbortSignal;
  /** Delay before a reconnection when the server did not say (`retry:`); default 1000 ms. */
  reconnectDelayMs?: number;
  /** Reconnection attempts in a row that may fail before the iterator throws; default 5. */
  maxReconnects?: number;
  /** Start after this event id (a resumed tail). */
  lastEventId?: number;
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

function toEvent(message: SseMessage): SessionEvent {
  let data: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(message.data);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
      data = parsed as Record<string, unknown>;
  } catch {
    data = { raw: message.data };
  }
  return {
    ...(message.id !== undefined && message.id !== '' && { id: Number(message.id) }),
    type: message.event as SessionEventType,
    data,
  };
}

/**
 * A session's events as an async iterator. When the connection drops before `session.ended`, it reconnects with
 * the last id it saw as `Last-Event-ID`, so the engine replays what was missed (while still buffered; what no longer
 * is, an `events.gap` event names first). It ends after `session.ended` or when `signal` aborts; a refused request
 * (4xx/5xx) throws `SwitchyardError`.
 */
export async function* sessionEventStream(
  open: OpenStream,
  options: EventStreamOptions = {},
): AsyncGenerator<SessionEvent, void, undefined> {
  const { signal } = options;
  let lastEventId = options.lastEventId === undefined ? undefined : String(options.lastEventId);
  let delay = options.reconnectDelayMs ?? 1000;
  let failures = 0;
  let first = true;
  while (!signal?.aborted) {
    if (!first) await sleep(delay, signal);
    if (signal?.aborted) return;
    let response: Response;
    try {
      response = await open(lastEventId, signal);
    } catch (error) {
      if (signal?.aborted) return;
      // The first connection failing is the caller's problem to see; a later one is a drop we ride out.
      if (first || ++failures > (options.maxReconnects ?? 5)) throw error;
      first = false;
      continue;
    }
    first = false;
    if (!response.ok) {
      const text = await response.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      throw errorFromResponse(response.status, body);
    }
    if (!response.body) throw new Error('event stream answered without a body');
    failures = 0;
    const parser = new SseParser();
    const decoder = new TextDecoder();
    const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        for (const message of parser.push(decoder.decode(value, { stream: true }))) {
          if (message.id !== undefined && message.id !== '') lastEventId = message.id;
          const event = toEvent(message);
          yield event;
          if (event.type === 'session.ended') return;
        }
      }
    } catch {
      if (signal?.aborted) return;
      // The connection dropped mid-stream (undici's "terminated"): reconnect below from the last id seen.
    } finally {
      reader.releaseLock();
      await response.body.cancel().catch(() => undefined);
    }
    if (parser.retry !== undefined) delay = parser.retry;
  }
}
