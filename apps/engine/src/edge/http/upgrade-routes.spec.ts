import type { HttpAdapterHost } from '@nestjs/core';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { UpgradeRoutes } from './upgrade-routes';

/** An HTTP server with the routes' listener on it, as the engine's is after bootstrap. */
async function serve(
  routes: (server: http.Server) => UpgradeRoutes,
): Promise<{ url: string; close(): void }> {
  const server = http.createServer();
  routes(server).onApplicationBootstrap();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Opens a WebSocket and answers its first message, or the status and body of a refused upgrade. */
function attempt(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ message?: string; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('message', (data: Buffer) => {
      resolve({ message: data.toString() });
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

describe('UpgradeRoutes', () => {
  const wss = new WebSocketServer({ noServer: true });
  const greeter = (name: string) => ({
    name: `/${name}`,
    match: (pathname: string) => pathname.startsWith(`/${name}`),
    handle: (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
      wss.handleUpgrade(req, socket, head, (ws) => ws.send(`${name} ${req.url}`)),
  });
  let close: (() => void) | undefined;
  afterEach(() => close?.());

  it('hands each upgrade to the route its path matches, and answers 404 naming the routes otherwise', async () => {
    const server = await serve((s) => {
      const routes = new UpgradeRoutes({
        httpAdapter: { getHttpServer: () => s },
      } as unknown as HttpAdapterHost);
      routes.register(greeter('jupyter'));
      routes.register(greeter('terminals'));
      return routes;
    });
    close = server.close;
    expect(await attempt(`${server.url}/terminals/t1?x=1`)).toEqual({
      message: 'terminals /terminals/t1?x=1',
    });
    expect(await attempt(`${server.url}/jupyter/k`)).toEqual({ message: 'jupyter /jupyter/k' });
    const missing = await attempt(`${server.url}/elsewhere`);
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body!).error).toMatchObject({
      code: 'NOT_FOUND',
      message: 'no WebSocket here: the WebSocket routes are /jupyter, /terminals',
    });
  });

  it('tries routes that match by Host first: every path of a preview host is its app, engine paths included', async () => {
    const server = await serve((s) => {
      const routes = new UpgradeRoutes({
        httpAdapter: { getHttpServer: () => s },
      } as unknown as HttpAdapterHost);
      routes.register(greeter('v1'));
      routes.register({
        name: '/preview-host',
        byHost: true,
        match: (_pathname, req) => req.headers['x-preview'] === 'yes',
        handle: (req, socket, head) =>
          wss.handleUpgrade(req, socket, head, (ws) => ws.send(`preview-host ${req.url}`)),
      });
      return routes;
    });
    close = server.close;
    // Registered later, yet it takes the engine-looking path on its host.
    expect(
      await attempt(`${server.url}/v1/sessions/ses_1/terminals/trm_1/ws`, { 'x-preview': 'yes' }),
    ).toEqual({
      message: 'preview-host /v1/sessions/ses_1/terminals/trm_1/ws',
    });
    expect(await attempt(`${server.url}/v1/sessions/ses_1/terminals/trm_1/ws`)).toEqual({
      message: 'v1 /v1/sessions/ses_1/terminals/trm_1/ws',
    });
  });

  it('offers an upgrade about a session to the forwarder first: by its path, or by what the route says', async () => {
    const offered: string[] = [];
    const server = await serve((s) => {
      const routes = new UpgradeRoutes({
        httpAdapter: { getHttpServer: () => s },
      } as unknown as HttpAdapterHost);
      routes.register(greeter('v1'));
      routes.register({ ...greeter('preview'), sessionOf: (req) => req.headers['x-session'] as string });
      routes.forwardWith((sessionId, _req, socket) => {
        offered.push(sessionId);
        if (sessionId !== 'ses_elsewhere') return Promise.resolve(false);
        socket.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n');
        return Promise.resolve(true);
      });
      return routes;
    });
    close = server.close;
    expect(await attempt(`${server.url}/v1/sessions/ses_here/x/ws`)).toEqual({
      message: 'v1 /v1/sessions/ses_here/x/ws',
    });
    expect((await attempt(`${server.url}/v1/sessions/ses_elsewhere/x/ws`)).status).toBe(503);
    expect(await attempt(`${server.url}/preview/a`, { 'x-session': 'ses_p' })).toEqual({
      message: 'preview /preview/a',
    });
    // Not about a session: never offered.
    expect(await attempt(`${server.url}/v1/other`)).toEqual({ message: 'v1 /v1/other' });
    expect(offered).toEqual(['ses_here', 'ses_elsewhere', 'ses_p']);
  });
});
