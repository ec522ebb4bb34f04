import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { type Duplex, duplexPair } from 'node:stream';
import { isLocalhost } from '../url-policy/localhost';
import type { HostVerdict } from '../url-policy/url-policy';
import { type EgressAttempt, type EgressRefusal, EgressProxy, type LocalRoute } from './egress-proxy';

const DENIAL = 'x-switchyard-egress-test';
/** The "sandbox" ports the route serves, and the one it refuses. */
const APP = 3000;
const ECHO = 3001;
const CLOSED = 3002;
const REFUSED = 22;

/**
 * A stream to a server on this machine that is not a socket (as a runner's tunnel is not): the proxy must need
 * nothing of a stream but reading, writing and closing it.
 */
function tunnelTo(port: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('error', reject);
    socket.once('connect', () => {
      const [ours, theirs] = duplexPair();
      theirs.pipe(socket);
      socket.pipe(theirs);
      socket.on('close', () => theirs.destroy());
      theirs.on('close', () => socket.destroy());
      resolve(ours);
    });
  });
}

/** Writes a raw request to the proxy and reads until `done(text)` says the answer is complete. */
function raw(proxy: EgressProxy, request: string, done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxy.port, '127.0.0.1', () => socket.write(request));
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (done(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

function get(proxy: EgressProxy, url: string, host?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
    (resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1',
        port: proxy.port,
        path: url,
        headers: { host: host ?? new URL(url).host },
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    },
  );
}

describe('EgressProxy local routes (a browser’s localhost as its session’s own ports)', () => {
  let app: http.Server;
  let echo: net.Server;
  const hits: string[] = [];
  let proxy: EgressProxy;
  let opened: number[];
  let checked: string[];
  let attempts: EgressAttempt[];
  let refusals: EgressRefusal[];

  beforeAll(async () => {
    app = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url} host=${req.headers.host}`);
      res.writeHead(200, { 'content-type': 'text/plain', [DENIAL]: 'denied' });
      res.end('hello from the sandbox');
    });
    app.on('upgrade', (req, socket: Duplex) => {
      hits.push(`UPGRADE ${req.url} host=${req.headers.host}`);
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
    echo = net.createServer((s) => s.pipe(s));
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    await new Promise((r) => app.close(r));
    await new Promise((r) => echo.close(r));
  });

  beforeEach(async () => {
    opened = [];
    checked = [];
    attempts = [];
    refusals = [];
    const real: Record<number, number> = {
      [APP]: (app.address() as AddressInfo).port,
      [ECHO]: (echo.address() as AddressInfo).port,
    };
    proxy = await EgressProxy.start({
      denialHeader: DENIAL,
      routeLocal: (
        host,
        port,
      ): LocalRoute | { refusal: { code: 'ADDRESS_REFUSED'; reason: string } } | undefined => {
        if (!isLocalhost(host)) return undefined;
        if (port === REFUSED)
          return { refusal: { code: 'ADDRESS_REFUSED', reason: 'port 22 may not be opened' } };
        return {
          reason: "the session's own sandbox port",
          open: () => {
            opened.push(port);
            const target = real[port];
            return target === undefined
              ? Promise.reject(new Error(`nothing listens on port ${port}`))
              : tunnelTo(target);
          },
        };
      },
      checkHost: async (host): Promise<HostVerdict> => {
        checked.push(host);
        return {
          allowed: false,
          host,
          refusal: { code: 'ADDRESS_REFUSED', reason: `${host} is not public` },
        };
      },
      onAttempt: (a) => attempts.push(a),
      onRefusal: (r) => refusals.push(r),
    });
  });
  afterEach(() => proxy.close());

  it('forwards plain http for localhost over the route, never asking the network policy, and records it', async () => {
    const r = await get(proxy, `http://localhost:${APP}/api/items?x=1`);
    expect(r).toMatchObject({ status: 200, body: 'hello from the sandbox' });
    // A server cannot make its answer look like the proxy's own refusal.
    expect(r.headers[DENIAL]).toBeUndefined();
    expect(hits).toContain(`GET /api/items?x=1 host=localhost:${APP}`);
    // Every spelling of this machine takes the same route.
    for (const url of [`http://127.0.0.1:${APP}/a`, `http://[::1]:${APP}/b`, `http://2130706433:${APP}/c`]) {
      expect((await get(proxy, url)).status).toBe(200);
    }
    expect(hits).toEqual(
      expect.arrayContaining([
        `GET /a host=127.0.0.1:${APP}`,
        `GET /b host=[::1]:${APP}`,
        `GET /c host=127.0.0.1:${APP}`,
      ]),
    );
    expect(checked).toEqual([]);
    expect(opened).toEqual([APP, APP, APP, APP]);
    await waitFor(() => attempts.length === 4);
    expect(attempts[0]).toMatchObject({
      via: 'HTTP',
      host: 'localhost',
      port: APP,
      allowed: true,
      local: true,
      reason: "the session's own sandbox port",
    });
    // The body's bytes, as for any forwarded request.
    expect(attempts[0].bytesIn).toBe('hello from the sandbox'.length);
    expect(attempts.map((a) => a.host)).toEqual(['localhost', '127.0.0.1', '::1', '127.0.0.1']);
  });

  it('tunnels CONNECT and upgrades over the route, and shows a tunnel while it is open', async () => {
    const socket = net.connect(proxy.port, '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', r));
    socket.write(`CONNECT localhost:${ECHO} HTTP/1.1\r\nHost: localhost:${ECHO}\r\n\r\n`);
    const head = await new Promise<string>((r) => socket.once('data', (d: Buffer) => r(d.toString())));
    expect(head).toMatch(/^HTTP\/1.1 200/);
    socket.write('ping');
    expect(await new Promise<string>((r) => socket.once('data', (d: Buffer) => r(d.toString())))).toBe(
      'ping',
    );
    // Still open: reported with its bytes so far, not yet as an attempt.
    expect(proxy.openAttempts()).toEqual([
      expect.objectContaining({
        via: 'CONNECT',
        host: 'localhost',
        port: ECHO,
        local: true,
        bytesIn: 4,
        bytesOut: 4,
      }),
    ]);
    expect(attempts).toEqual([]);
    socket.destroy();
    await waitFor(() => attempts.length === 1);
    expect(proxy.openAttempts()).toEqual([]);

    const upgrade = await raw(
      proxy,
      `GET ws://localhost:${APP}/socket HTTP/1.1\r\nHost: localhost:${APP}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
      (t) => t.includes('\r\n\r\n'),
    );
    expect(upgrade).toMatch(/^HTTP\/1.1 101/);
    expect(hits).toContain(`UPGRADE /socket host=localhost:${APP}`);
    expect(checked).toEqual([]);
  });

  it('answers a port it cannot open 502 marked unreachable, saying why, and records why', async () => {
    const r = await get(proxy, `http://localhost:${CLOSED}/`);
    expect(r.status).toBe(502);
    expect(r.headers[DENIAL]).toBe('unreachable');
    expect(r.body).toBe(`switchyard: nothing listens on port ${CLOSED}\n`);
    const tunnel = await raw(proxy, `CONNECT 127.0.0.1:${CLOSED} HTTP/1.1\r\n\r\n`, (t) =>
      t.includes('\n\n'),
    );
    expect(tunnel).toMatch(/^HTTP\/1.1 502 /);
    expect(tunnel).toContain(`${DENIAL}: unreachable`);
    await waitFor(() => attempts.length === 2);
    expect(attempts.map((a) => a.reason)).toEqual([
      `the session's own sandbox port: nothing listens on port ${CLOSED}`,
      `the session's own sandbox port: nothing listens on port ${CLOSED}`,
    ]);
    // Not a refusal: the route was allowed, and nothing was there.
    expect(refusals).toEqual([]);
  });

  it('refuses what the route refuses, and leaves every other host to the network policy', async () => {
    const r = await get(proxy, `http://localhost:${REFUSED}/`);
    expect(r.status).toBe(403);
    expect(r.headers[DENIAL]).toBe('denied');
    expect(refusals).toEqual([expect.objectContaining({ host: 'localhost', port: REFUSED })]);
    for (const host of ['127.0.0.2', '169.254.169.254', 'example.test']) {
      expect((await get(proxy, `http://${host}:${APP}/`)).status).toBe(403);
    }
    expect(checked).toEqual(['127.0.0.2', '169.254.169.254', 'example.test']);
    expect(opened).toEqual([]);
    expect(hits.filter((h) => h.includes(`host=127.0.0.2`))).toEqual([]);
  });

  it('refuses a request for localhost whose Host header names another host, before opening anything', async () => {
    const r = await get(proxy, `http://localhost:${APP}/`, 'metadata.google.internal');
    expect(r.status).toBe(400);
    expect(r.body).toContain('names another host');
    expect(opened).toEqual([]);
  });
});

async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(ok()).toBe(true);
}
