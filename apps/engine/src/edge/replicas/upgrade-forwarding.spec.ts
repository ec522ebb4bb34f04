import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { ReplicaLeases, SessionRoute } from '../../engine/replicas/replica-leases';
import type { ReplicaTakeover } from '../../engine/replicas/replica-takeover';
import type { UpgradeRoutes } from '../http/upgrade-routes';
import { FORWARDED_BY } from './session-forwarding';
import { UpgradeForwarding } from './upgrade-forwarding';

interface Server {
  url: string;
  close(): Promise<void>;
}

async function listen(server: http.Server): Promise<Server> {
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

/** A replica's WebSockets: echoes each message prefixed with its name; `/missing` is refused 404 as the engine does. */
function echoServer(name: string, seen: http.IncomingHttpHeaders[] = []): http.Server {
  const wss = new WebSocketServer({ noServer: true });
  const server = http.createServer();
  server.on('upgrade', (req, socket, head) => {
    seen.push(req.headers);
    if (req.url?.includes('/missing')) {
      const body = '{"error":{"code":"NOT_FOUND","message":"no terminal"}}';
      socket.end(
        `HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) =>
      ws.on('message', (data: Buffer) => ws.send(`${name}:${data.toString()}`)),
    );
  });
  return server;
}

/** The replica a client reaches: offers each upgrade to the forwarding, serves it itself when told to. */
function frontServer(forwarding: UpgradeForwarding): http.Server {
  const local = echoServer('front');
  const server = http.createServer();
  server.on('upgrade', (req, socket, head) => {
    void forwarding.forward('ses_1', req, socket, head).then((taken) => {
      if (!taken) local.emit('upgrade', req, socket, head);
    });
  });
  return server;
}

function forwardingTo(route: SessionRoute | undefined): UpgradeForwarding {
  const leases = {
    replicaId: 'me',
    leaseMs: 600,
    route: () => Promise.resolve(route),
  } as unknown as ReplicaLeases;
  const takeover = {
    takeOver: () => Promise.resolve(),
    ready: () => Promise.resolve(),
  } as unknown as ReplicaTakeover;
  const routes = { forwardWith: () => undefined } as unknown as UpgradeRoutes;
  return new UpgradeForwarding(leases, takeover, routes);
}

/** Opens a WebSocket, sends one message and answers the reply, or the HTTP status of a refused upgrade. */
function roundTrip(url: string): Promise<{ reply?: string; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on('open', () => ws.send('hello'));
    ws.on('message', (data: Buffer) => {
      resolve({ reply: data.toString() });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    ws.on('error', reject);
  });
}

describe('UpgradeForwarding', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('pipes a WebSocket of a session another replica serves to it, both ways, marked as forwarded', async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    const owner = await listen(echoServer('owner', seen));
    servers.push(owner);
    const front = await listen(frontServer(forwardingTo({ owner: 'other', alive: true, url: owner.url })));
    servers.push(front);
    const answer = await roundTrip(`${front.url.replace('http', 'ws')}/v1/sessions/ses_1/terminals/trm_1/ws`);
    expect(answer).toEqual({ reply: 'owner:hello' });
    expect(seen[0]).toMatchObject({ [FORWARDED_BY]: 'me', upgrade: 'websocket' });
  });

  it("passes the owner's refusal back as it is", async () => {
    const owner = await listen(echoServer('owner'));
    servers.push(owner);
    const front = await listen(frontServer(forwardingTo({ owner: 'other', alive: true, url: owner.url })));
    servers.push(front);
    const answer = await roundTrip(
      `${front.url.replace('http', 'ws')}/v1/sessions/ses_1/terminals/missing/ws`,
    );
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body!)).toEqual({ error: { code: 'NOT_FOUND', message: 'no terminal' } });
  });

  it('leaves a session this replica serves to it', async () => {
    const front = await listen(frontServer(forwardingTo({ owner: 'me', alive: true, url: 'http://unused' })));
    servers.push(front);
    expect(await roundTrip(`${front.url.replace('http', 'ws')}/v1/sessions/ses_1/x`)).toEqual({
      reply: 'front:hello',
    });
  });

  it('answers 503 while the owner is being taken over', async () => {
    const front = await listen(
      frontServer(forwardingTo({ owner: 'other', alive: false, url: 'http://127.0.0.1:1' })),
    );
    servers.push(front);
    const answer = await roundTrip(`${front.url.replace('http', 'ws')}/v1/sessions/ses_1/x`);
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body!).error.code).toBe('REPLICA_UNAVAILABLE');
  });
});
