import express, { type Request, type Response } from 'express';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RawBodyRequest } from '../http/json-body.middleware';
import type { ReplicaLeases, SessionRoute } from '../../engine/replicas/replica-leases';
import type { ReplicaTakeover } from '../../engine/replicas/replica-takeover';
import type { EngineConfig } from '../../platform/config/engine-config';
import { FORWARDED_BY, SessionForwarding } from './session-forwarding';

/** Preview hosts are `<port>-<session>.preview.test`. */
const CONFIG = { ports: { previewDomain: 'preview.test' } } as unknown as EngineConfig;

/** Fakes of the two collaborators: routes set by the test, takeovers recorded. */
function collaborators(routes: Map<string, SessionRoute>, leaseMs = 600) {
  const takenOver: string[] = [];
  const leases = {
    replicaId: 'me',
    leaseMs,
    route: (id: string) => Promise.resolve(routes.get(id)),
  } as unknown as ReplicaLeases;
  const takeover = {
    takeOver: (replica: string) => {
      takenOver.push(replica);
      for (const [id, r] of routes) if (r.owner === replica) routes.set(id, { owner: 'me', alive: true });
      return Promise.resolve(undefined);
    },
    ready: () => Promise.resolve(),
  } as unknown as ReplicaTakeover;
  return { leases, takeover, takenOver };
}

/** A replica: the forwarding middleware in front of a handler that says who served the request. */
async function replica(forwarding: SessionForwarding): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.use((req: Request, _res, next) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (chunks.length > 0) (req as RawBodyRequest).rawBody = Buffer.concat(chunks);
      next();
    });
  });
  app.use(forwarding.middleware());
  app.all('/{*rest}', (req: Request, res: Response) => {
    res.json({
      servedBy: 'me',
      path: req.originalUrl,
      body: (req as RawBodyRequest).rawBody?.toString() ?? null,
    });
  });
  return listen(app);
}

async function listen(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('SessionForwarding', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((c) => c()));
  });

  it("streams a session's request to its owner and the answer back: body bytes as sent, hop headers dropped", async () => {
    let seen: { headers: http.IncomingHttpHeaders; body: string; url?: string } | undefined;
    const owner = await listen((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen = { headers: req.headers, body, url: req.url };
        res.writeHead(201, { 'content-type': 'application/json', 'x-from': 'owner', connection: 'close' });
        res.end('{"servedBy":"owner"}');
      });
    });
    closers.push(owner.close);
    const routes = new Map<string, SessionRoute>([
      ['ses_1', { owner: 'other', url: owner.url, alive: true }],
    ]);
    const { leases, takeover } = collaborators(routes);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);

    const body = '{ "type":"code",  "code":"print(1)" }';
    const res = await fetch(`${me.url}/v1/sessions/ses_1/actions?wait=true`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer k',
        'proxy-authorization': 'Basic eA==',
      },
      body,
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-from')).toBe('owner');
    expect(await res.json()).toEqual({ servedBy: 'owner' });
    expect(seen?.url).toBe('/v1/sessions/ses_1/actions?wait=true');
    expect(seen?.body).toBe(body);
    expect(seen?.headers).toMatchObject({ authorization: 'Bearer k', [FORWARDED_BY]: 'me' });
    expect(seen?.headers['proxy-authorization']).toBeUndefined();
    // Its own sessions, unknown ids and other paths are served here.
    routes.set('ses_mine', { owner: 'me', alive: true });
    for (const path of [
      '/v1/sessions/ses_mine',
      '/v1/sessions/ses_unknown/actions',
      '/v1/sessions',
      '/health',
    ]) {
      expect(((await (await fetch(`${me.url}${path}`)).json()) as { servedBy: string }).servedBy).toBe('me');
    }
  });

  it('forwards a request to a preview host of a session another replica serves, whatever its path, Host kept', async () => {
    let seen: { host?: string; url?: string } | undefined;
    const owner = await listen((req, res) => {
      seen = { host: req.headers.host, url: req.url };
      res.end('owner');
    });
    closers.push(owner.close);
    const routes = new Map<string, SessionRoute>([
      ['ses_p', { owner: 'other', url: owner.url, alive: true }],
    ]);
    const { leases, takeover } = collaborators(routes);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);
    const get = (host: string) =>
      new Promise<string>((resolve, reject) => {
        http
          .get(`${me.url}/assets/app.js?v=1`, { headers: { host } }, (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve(text));
          })
          .on('error', reject);
      });
    expect(await get('8000-ses_p.preview.test:3000')).toBe('owner');
    expect(seen).toEqual({ host: '8000-ses_p.preview.test:3000', url: '/assets/app.js?v=1' });
    // Another domain's host is not a preview host: served here.
    expect(JSON.parse(await get('8000-ses_p.example.com'))).toMatchObject({ servedBy: 'me' });
  });

  it('takes over a session whose replica lease ran out, and serves it here', async () => {
    const routes = new Map<string, SessionRoute>([
      ['ses_2', { owner: 'dead', url: 'http://127.0.0.1:9', alive: false }],
    ]);
    const { leases, takeover, takenOver } = collaborators(routes);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);
    const res = await fetch(`${me.url}/v1/sessions/ses_2`);
    expect(((await res.json()) as { servedBy: string }).servedBy).toBe('me');
    expect(takenOver).toEqual(['dead']);
  });

  it('waits while the owner refuses connections, then serves the request here once its lease runs out', async () => {
    const gone = await listen(() => undefined);
    const url = gone.url;
    await gone.close(); // nothing listens there now: connections are refused
    const routes = new Map<string, SessionRoute>([['ses_3', { owner: 'dying', url, alive: true }]]);
    const { leases, takeover, takenOver } = collaborators(routes);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);
    setTimeout(() => routes.set('ses_3', { owner: 'dying', url, alive: false }), 300);
    const res = await fetch(`${me.url}/v1/sessions/ses_3/actions`, { method: 'POST', body: '{"x":1}' });
    expect(await res.json()).toMatchObject({ servedBy: 'me', body: '{"x":1}' });
    expect(takenOver).toEqual(['dying']);
  });

  it('answers 503 with Retry-After when the owner neither answers nor loses its lease in time', async () => {
    const gone = await listen(() => undefined);
    await gone.close();
    const routes = new Map<string, SessionRoute>([['ses_4', { owner: 'stuck', url: gone.url, alive: true }]]);
    const { leases, takeover } = collaborators(routes, 1000);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);
    const res = await fetch(`${me.url}/v1/sessions/ses_4`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('REPLICA_UNAVAILABLE');
  });

  it('never forwards a request twice: one forwarded to the wrong replica answers 503 REPLICA_MOVED', async () => {
    const routes = new Map<string, SessionRoute>([
      ['ses_5', { owner: 'other', url: 'http://127.0.0.1:9', alive: true }],
    ]);
    const { leases, takeover } = collaborators(routes);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);
    const res = await fetch(`${me.url}/v1/sessions/ses_5`, { headers: { [FORWARDED_BY]: 'someone' } });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('REPLICA_MOVED');
  });

  it('routes MCP requests by the engine session in their Mcp-Session-Id, and the tool catalog by its sessionId', async () => {
    const owner = await listen((req, res) => res.end(JSON.stringify({ servedBy: 'owner', url: req.url })));
    closers.push(owner.close);
    const routes = new Map<string, SessionRoute>([
      ['ses_abc', { owner: 'other', url: owner.url, alive: true }],
    ]);
    const { leases, takeover } = collaborators(routes);
    const me = await replica(new SessionForwarding(leases, takeover, CONFIG));
    closers.push(me.close);
    const mcp = await fetch(`${me.url}/mcp`, {
      method: 'POST',
      headers: { 'mcp-session-id': 'ses_abc.1234' },
    });
    expect(await mcp.json()).toEqual({ servedBy: 'owner', url: '/mcp' });
    const tools = await fetch(`${me.url}/v1/tools?sessionId=ses_abc`);
    expect(await tools.json()).toEqual({ servedBy: 'owner', url: '/v1/tools?sessionId=ses_abc' });
    const init = await fetch(`${me.url}/mcp`, { method: 'POST' });
    expect(((await init.json()) as { servedBy: string }).servedBy).toBe('me');
  });
});
