import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { HostVerdict } from '../url-policy/url-policy';
import { EgressProxy } from './egress-proxy';
import { parseUpstreamProxy, type UpstreamProxy } from './upstream-proxy';

const DENIAL = 'x-switchyard-egress-test';

describe('parseUpstreamProxy', () => {
  it('reads host, port (80 by default) and credentials as a Basic authorization', () => {
    expect(parseUpstreamProxy('http://proxy.corp:3128')).toEqual({ host: 'proxy.corp', port: 3128 });
    expect(parseUpstreamProxy('http://10.1.2.3/')).toEqual({ host: '10.1.2.3', port: 80 });
    expect(parseUpstreamProxy('http://[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseUpstreamProxy('http://al%40ice:p%3Ass@proxy:3128')).toEqual({
      host: 'proxy',
      port: 3128,
      authorization: `Basic ${Buffer.from('al@ice:p:ss').toString('base64')}`,
    });
  });

  it('refuses what the egress proxy cannot speak to, saying why', () => {
    expect(parseUpstreamProxy('proxy:3128')).toMatchObject({ reason: expect.stringContaining('http://') });
    expect(parseUpstreamProxy('https://proxy:3128')).toMatchObject({
      reason: expect.stringContaining('https:'),
    });
    expect(parseUpstreamProxy('socks5://proxy:1080')).toMatchObject({
      reason: expect.stringContaining('http://'),
    });
    expect(parseUpstreamProxy('http://proxy:3128/path')).toMatchObject({
      reason: expect.stringContaining('no path'),
    });
    expect(parseUpstreamProxy('not a url')).toMatchObject({ reason: expect.stringContaining('not a URL') });
  });
});

/** An origin on loopback that says who it is and what Host it was asked for. */
async function origin(): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((req, res) => res.end(`origin says hi to ${req.headers.host} ${req.url}`));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.31', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * A stand-in for an operator's proxy on loopback: records each request (method, target, Proxy-Authorization), tunnels
 * CONNECTs and forwards absolute-URI requests to the origin, whatever name they carry; refuses targets it is told to.
 */
async function upstreamProxy(originPort: number, refuse: string[] = []) {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(
      `${req.method} ${req.url} auth=${req.headers['proxy-authorization'] ?? '-'} host=${req.headers.host}`,
    );
    const url = new URL(req.url ?? '');
    const out = http.request(
      { host: '127.0.0.31', port: originPort, path: url.pathname + url.search, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    req.pipe(out);
  });
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
    seen.push(`CONNECT ${req.url} auth=${req.headers['proxy-authorization'] ?? '-'}`);
    if (refuse.includes(req.url ?? '')) {
      socket.end('HTTP/1.1 403 Forbidden by upstream\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const target = net.connect(originPort, '127.0.0.31', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      target.pipe(socket);
      socket.pipe(target);
    });
    target.on('error', () => socket.destroy());
    socket.on('error', () => target.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.32', resolve));
  return { server, port: (server.address() as AddressInfo).port, seen };
}

/** Opens a CONNECT tunnel through the egress proxy; answers the status line and the socket. */
function tunnel(proxy: EgressProxy, authority: string): Promise<{ head: string; socket: net.Socket }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxy.port, '127.0.0.1', () =>
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`),
    );
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      // Paused first: what follows the head is read by the test, not dropped.
      socket.pause();
      socket.off('data', onData);
      resolve({ head: buf.slice(0, end), socket });
      const rest = buf.slice(end + 4);
      if (rest) socket.unshift(Buffer.from(rest, 'latin1'));
    };
    socket.on('data', onData);
    socket.on('error', reject);
  });
}

function readAll(socket: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    socket.on('data', (d: Buffer) => (body += d.toString()));
    socket.on('close', () => resolve(body));
    socket.resume();
  });
}

function viaProxy(proxy: EgressProxy, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port: proxy.port,
      path: url,
      headers: { host: new URL(url).host },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('EgressProxy chained through an upstream proxy (loopback stand-ins)', () => {
  let site: Awaited<ReturnType<typeof origin>>;
  let upstream: Awaited<ReturnType<typeof upstreamProxy>>;
  let proxy: EgressProxy;
  const checked: string[] = [];

  beforeAll(async () => {
    site = await origin();
    upstream = await upstreamProxy(site.port, [`refused.test:${site.port}`]);
  });
  afterAll(async () => {
    await new Promise((r) => site.server.close(r));
    await new Promise((r) => upstream.server.close(r));
  });
  beforeEach(async () => {
    checked.length = 0;
    upstream.seen.length = 0;
    const via: UpstreamProxy = { host: '127.0.0.32', port: upstream.port, authorization: 'Basic dTpw' };
    proxy = await EgressProxy.start({
      // The policy allows *.allowed.test and refused.test, and names an address nobody listens on: only the
      // upstream can reach the origin, so an answer proves the connection went through it.
      checkHost: async (host): Promise<HostVerdict> => {
        checked.push(host);
        return host.endsWith('.allowed.test') || host === 'refused.test'
          ? { allowed: true, host, addresses: ['192.0.2.1'] }
          : { allowed: false, host, refusal: { code: 'ADDRESS_REFUSED', reason: `${host} is not allowed` } };
      },
      denialHeader: DENIAL,
      connectTimeoutMs: 3000,
      upstream: via,
    });
  });
  afterEach(() => proxy.close());

  it('tunnels an allowed CONNECT through the upstream, naming the checked host and sending the credentials', async () => {
    const t = await tunnel(proxy, `WWW.Allowed.Test.:${site.port}`);
    expect(t.head).toBe('HTTP/1.1 200 Connection Established');
    const answer = readAll(t.socket);
    t.socket.write('GET /tunnelled HTTP/1.1\r\nHost: www.allowed.test\r\nConnection: close\r\n\r\n');
    expect(await answer).toContain('origin says hi to www.allowed.test /tunnelled');
    expect(checked).toEqual(['www.allowed.test']);
    expect(upstream.seen).toEqual([`CONNECT www.allowed.test:${site.port} auth=Basic dTpw`]);
  });

  it('forwards plain http to the upstream as an absolute URI of the checked host', async () => {
    const r = await viaProxy(proxy, `http://a.allowed.test:${site.port}/p?q=1`);
    expect(r).toMatchObject({ status: 200, body: `origin says hi to a.allowed.test:${site.port} /p?q=1` });
    expect(upstream.seen).toEqual([
      `GET http://a.allowed.test:${site.port}/p?q=1 auth=Basic dTpw host=a.allowed.test:${site.port}`,
    ]);
  });

  it('never sends a refused host to the upstream', async () => {
    const t = await tunnel(proxy, `other.test:${site.port}`);
    expect(t.head).toMatch(/^HTTP\/1\.1 403 /);
    t.socket.destroy();
    expect((await viaProxy(proxy, `http://other.test:${site.port}/`)).status).toBe(403);
    expect(upstream.seen).toEqual([]);
  });

  it("answers 502 with the upstream's refusal when the upstream will not tunnel", async () => {
    const t = await tunnel(proxy, `refused.test:${site.port}`);
    expect(t.head).toMatch(/^HTTP\/1\.1 502 /);
    expect(await readAll(t.socket)).toContain('403 Forbidden by upstream');
    expect(upstream.seen).toEqual([`CONNECT refused.test:${site.port} auth=Basic dTpw`]);
  });

  it('answers 502 naming the upstream when it cannot be reached', async () => {
    const closed = await EgressProxy.start({
      checkHost: async (host) => ({ allowed: true, host, addresses: ['192.0.2.1'] }),
      denialHeader: DENIAL,
      upstream: { host: '127.0.0.33', port: 9 },
    });
    try {
      const t = await tunnel(closed, 'x.allowed.test:443');
      expect(t.head).toMatch(/^HTTP\/1\.1 502 /);
      expect(await readAll(t.socket)).toContain('upstream proxy http://127.0.0.33:9');
    } finally {
      await closed.close();
    }
  });
});
