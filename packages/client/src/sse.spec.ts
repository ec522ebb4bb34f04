import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SwitchyardClient } from './client';
import { SwitchyardError } from './errors';
import { SseParser } from './sse';
import type { SessionEvent } from './types';

describe('SseParser', () => {
  it('parses events split anywhere across chunks, with CRLF, comments and multi-line data', () => {
    const text =
      'retry: 1000\r\n\r\n: keep-alive\n\nid: 3\nevent: action.started\ndata: {"a":\ndata: 1}\n\nid: 4\r\nevent: x\r\ndata: y\r\n\r\n';
    const parser = new SseParser();
    const messages = [...text].flatMap((ch) => parser.push(ch));
    expect(messages).toEqual([
      { id: '3', event: 'action.started', data: '{"a":\n1}', retry: 1000 },
      { id: '4', event: 'x', data: 'y', retry: 1000 },
    ]);
  });

  it('dispatches nothing for a message without data, and defaults the event to "message"', () => {
    const parser = new SseParser();
    expect(parser.push('event: a\n\ndata: b\n\n')).toEqual([{ event: 'message', data: 'b' }]);
  });
});

describe('SwitchyardClient.events', () => {
  let server: http.Server;
  let baseUrl: string;
  const seenLastEventIds: Array<string | undefined> = [];
  let connections = 0;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/v1/sessions/ses_missing/events') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 'NOT_FOUND', message: 'no session' } }));
        return;
      }
      connections++;
      seenLastEventIds.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('retry: 20\n\n');
      if (connections === 1) {
        res.write('id: 1\nevent: action.started\ndata: {"actionId":"act_1","at":"t"}\n\n');
        res.write(
          'id: 2\nevent: action.output\ndata: {"actionId":"act_1","stream":"stdout","chunk":"hi\\n"}\n\n',
        );
        // Drop the connection in the middle of the next event, as a crashed proxy would.
        res.write('id: 3\nevent: action.comp');
        setTimeout(() => res.socket?.destroy(), 20);
      } else {
        res.write('id: 3\nevent: action.completed\ndata: {"actionId":"act_1","status":"succeeded"}\n\n');
        res.write('event: session.ended\ndata: {}\n\n');
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('reconnects after a dropped connection with Last-Event-ID and ends at session.ended', async () => {
    const client = new SwitchyardClient({ baseUrl, apiKey: 'k' });
    const events: SessionEvent[] = [];
    for await (const event of client.events('ses_1', { reconnectDelayMs: 10 })) events.push(event);
    expect(events.map((e) => [e.id, e.type])).toEqual([
      [1, 'action.started'],
      [2, 'action.output'],
      [3, 'action.completed'],
      [undefined, 'session.ended'],
    ]);
    expect(events[1].data).toMatchObject({ stream: 'stdout', chunk: 'hi\n' });
    expect(seenLastEventIds).toEqual([undefined, '2']);
  });

  it('throws a SwitchyardError when the stream is refused', async () => {
    const client = new SwitchyardClient({ baseUrl });
    const iterator = client.events('ses_missing');
    await expect(iterator.next()).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('stops when the signal aborts', async () => {
    const hang = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\nevent: kernel.started\ndata: {}\n\n');
    });
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    try {
      const client = new SwitchyardClient({
        baseUrl: `http://127.0.0.1:${(hang.address() as AddressInfo).port}`,
      });
      const abort = new AbortController();
      const types: string[] = [];
      for await (const event of client.events('ses_1', { signal: abort.signal })) {
        types.push(event.type);
        abort.abort();
      }
      expect(types).toEqual(['kernel.started']);
    } finally {
      hang.closeAllConnections();
      await new Promise<void>((resolve) => hang.close(() => resolve()));
    }
  });

  it('names the URL when nothing listens there', async () => {
    const client = new SwitchyardClient({ baseUrl: 'http://127.0.0.1:1' });
    const error = await client
      .events('ses_1')
      .next()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SwitchyardError);
    expect((error as SwitchyardError).message).toContain('http://127.0.0.1:1');
  });
});
