import { NotFoundError, systemClock } from '@switchyard/common';
import { PortClosedError, type SessionPorts } from '@switchyard/sandbox';
import express from 'express';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import type {
  PortConnectionEnd,
  PortConnections,
  PortConnectionStart,
} from '../../engine/ports/port-connections';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { SessionsService } from '../../session/sessions/sessions.service';
import { AccessTokens } from '../http/access-tokens';
import { ApiKeys } from '../http/api-keys';
import { PortAuth } from './port-auth';
import { PortProxy } from './port-proxy';

/**
 * The proxy's plumbing against a real server, with the session's port faked by a plain TCP connection to it (the
 * runner's tunnel is a Duplex like it; test/e2e/ports.e2e-spec.ts runs the real one through real sandboxes).
 */
describe('PortProxy', () => {
  const KEY = 'proxy-spec-key';
  const config = {
    apiKeys: [KEY],
    policy: { adminKeys: [] },
    ports: { previewDomain: 'p.test' },
  } as unknown as EngineConfig;
  const keys = new ApiKeys(config);
  const tenant = keys.principalOf(KEY).tenant;
  let upstream: http.Server;
  let upstreamPort: number;
  let engine: http.Server;
  let base: string;
  const records: Array<{ start: PortConnectionStart; end?: PortConnectionEnd }> = [];
  let proxy: PortProxy;

  beforeAll(async () => {
    const app = express();
    app.get('/hello', (req, res) => {
      res.json({ host: req.headers.host, authorization: req.headers.authorization ?? null, url: req.url });
    });
    app.post('/echo', (req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
    });
    app.get('/events', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      // The second event waits for the client to say it saw the first.
      app.locals.next = () => res.end('data: 2\n\n');
    });
    app.get('/seen', (_req, res) => {
      (app.locals.next as () => void)();
      res.status(204).end();
    });
    upstream = http.createServer(app);
    const wss = new WebSocketServer({ server: upstream });
    wss.on('connection', (ws) => ws.on('message', (data, binary) => ws.send(data, { binary })));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamPort = (upstream.address() as AddressInfo).port;

    const sessions = {
      get: (t: string, id: string) => {
        if (t !== tenant || id !== 'ses_1') throw new NotFoundError(`session ${id} not found`);
        return { id, tenant: t };
      },
    } as unknown as SessionsService;
    const ports = {
      check: () => undefined,
      connect: (_sid: string, port: number) => {
        if (port !== 8000) return Promise.reject(new PortClosedError(`nothing listens on port ${port}`));
        return Promise.resolve({
          stream: net.connect(upstreamPort, '127.0.0.1'),
          tier: 'pooled',
          proc: 'prc_1',
          kernel: null,
        });
      },
    } as unknown as SessionPorts;
    const connections = {
      open: (_session: unknown, start: PortConnectionStart) => {
        const record: { start: PortConnectionStart; end?: PortConnectionEnd } = { start };
        records.push(record);
        return (end: PortConnectionEnd) => (record.end = { ...end });
      },
    } as unknown as PortConnections;
    const auth = new PortAuth(keys, new AccessTokens(config, systemClock), systemClock);
    proxy = new PortProxy(config, auth, sessions, ports, connections);
    const front = express();
    front.use(proxy.middleware());
    front.use((_req, res) => res.status(418).end('not the proxy'));
    engine = http.createServer(front);
    engine.on('upgrade', (req, socket, head) => proxy.upgrade(req, socket, head));
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    proxy.beforeApplicationShutdown();
    engine.closeAllConnections();
    upstream.closeAllConnections();
    await new Promise((resolve) => engine.close(resolve));
    await new Promise((resolve) => upstream.close(resolve));
  });

  const auth = { authorization: `Bearer ${KEY}` };
  const settled = async () => {
    for (let i = 0; i < 50 && records.some((r) => !r.end); i++) await new Promise((r) => setTimeout(r, 10));
  };

  it('proxies a request with Host localhost:PORT, without the key, and records it with its status and bytes', async () => {
    records.length = 0;
    const res = await fetch(`${base}/v1/sessions/ses_1/ports/8000/hello?x=1`, { headers: auth });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ host: 'localhost:8000', authorization: null, url: '/hello?x=1' });
    await settled();
    expect(records).toEqual([
      {
        start: expect.objectContaining({
          port: 8000,
          via: 'path',
          method: 'GET',
          path: '/hello?x=1',
          proc: 'prc_1',
        }),
        end: expect.objectContaining({ status: 200, bytesIn: 0, bytesOut: expect.any(Number) }),
      },
    ]);
    // Other routes are left to the app.
    expect((await fetch(`${base}/v1/sessions/ses_1/ports`)).status).toBe(418);
    expect((await fetch(`${base}/v1/sessions/ses_1/ports/8000/preview`, { method: 'POST' })).status).toBe(
      418,
    );
    expect((await fetch(`${base}/v1/sessions/ses_1/ports/8000/preview`)).status).toBe(418);
  });

  it('streams a body both ways', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024, 7);
    const res = await fetch(`${base}/v1/sessions/ses_1/ports/8000/echo`, {
      method: 'POST',
      headers: auth,
      body,
    });
    expect(Buffer.from(await res.arrayBuffer()).equals(body)).toBe(true);
  });

  it('passes an event stream on event by event', async () => {
    const res = await fetch(`${base}/v1/sessions/ses_1/ports/8000/events`, { headers: auth });
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 1\n\n');
    await fetch(`${base}/v1/sessions/ses_1/ports/8000/seen`, { headers: auth });
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: 2\n\n');
  });

  it('answers refusals with the engine’s error body: 502, 404, 401, 400', async () => {
    const answer = async (url: string, headers: Record<string, string> = auth) => {
      const res = await fetch(`${base}${url}`, { headers });
      return [res.status, ((await res.json()) as { error: { code: string } }).error.code];
    };
    expect(await answer('/v1/sessions/ses_1/ports/9000/')).toEqual([502, 'PORT_CLOSED']);
    expect(await answer('/v1/sessions/ses_2/ports/8000/')).toEqual([404, 'NOT_FOUND']);
    expect(await answer('/v1/sessions/ses_1/ports/8000/', {})).toEqual([401, 'UNAUTHENTICATED']);
    expect(await answer('/v1/sessions/ses_1/ports/x/')).toEqual([400, 'INVALID_PORT']);
  });

  it('upgrades a WebSocket, at the path and at a preview host, and counts its bytes', async () => {
    records.length = 0;
    for (const [url, headers] of [
      [`${base.replace('http', 'ws')}/v1/sessions/ses_1/ports/8000/ws`, auth],
      [`${base.replace('http', 'ws')}/ws`, { ...auth, host: '8000-ses_1.p.test' }],
    ] as const) {
      const ws = new WebSocket(url, { headers });
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      const back = await new Promise<string>((resolve) => {
        ws.once('message', (data: Buffer) => resolve(data.toString()));
        ws.send('hi');
      });
      expect(back).toBe('hi');
      ws.close();
      await new Promise((resolve) => ws.once('close', resolve));
    }
    await settled();
    expect(records.map((r) => [r.start.via, r.start.websocket, r.end?.status])).toEqual([
      ['path', true, 101],
      ['host', true, 101],
    ]);
    expect(records[0].end!.bytesIn).toBeGreaterThan(0);
    expect(records[0].end!.bytesOut).toBeGreaterThan(0);
    const refused = new WebSocket(`${base.replace('http', 'ws')}/v1/sessions/ses_1/ports/8000/ws`);
    const status = await new Promise<number>((resolve) =>
      refused.once('unexpected-response', (_req, res) => resolve(res.statusCode!)),
    );
    expect(status).toBe(401);
  });
});
