import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { canonicalHost, type HostVerdict, parseAllowlist, UrlPolicy } from '../url-policy/url-policy';
import { parseIp } from '../url-policy/ip-address';
import { type EgressAttempt, type EgressRefusal, EgressProxy } from './egress-proxy';

const DENIAL = 'x-switchyard-egress-test';

/** An origin server on a loopback address that records what reached it. */
async function origin(host: string): Promise<{ server: http.Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url} host=${req.headers.host}`);
    res.writeHead(200, { 'content-type': 'text/plain', 'x-from': host });
    res.end(`hello from ${host}`);
  });
  server.on('upgrade', (req, socket) => {
    hits.push(`UPGRADE ${req.url}`);
    socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

/** Sends one absolute-form request through the proxy (its Host header: the URL's, unless `hostHeader` is given). */
function viaProxy(
  proxy: EgressProxy,
  url: string,
  hostHeader?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const host = hostHeader ?? (URL.canParse(url) ? new URL(url).host : 'proxy');
    const req = http.request({ host: '127.0.0.1', port: proxy.port, path: url, headers: { host } });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Opens a CONNECT tunnel; returns the proxy's status line and the socket. */
function connect(proxy: EgressProxy, authority: string): Promise<{ head: string; socket: net.Socket }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxy.port, '127.0.0.1', () => {
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    });
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        socket.off('data', onData);
        resolve({ head: buf.slice(0, end), socket });
      }
    };
    socket.on('data', onData);
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`closed before answering: ${buf}`)));
  });
}

describe('EgressProxy', () => {
  let allowed: Awaited<ReturnType<typeof origin>>;
  let other: Awaited<ReturnType<typeof origin>>;
  let proxy: EgressProxy;
  const refusals: EgressRefusal[] = [];

  beforeAll(async () => {
    allowed = await origin('127.0.0.2');
    other = await origin('127.0.0.1');
  });
  afterAll(async () => {
    await new Promise((r) => allowed.server.close(r));
    await new Promise((r) => other.server.close(r));
  });

  beforeEach(async () => {
    refusals.length = 0;
    const policy = new UrlPolicy({
      allowlist: parseAllowlist(['127.0.0.2']),
      resolver: {
        lookup: async (name) => {
          if (name === 'site.test') return [{ address: '127.0.0.2', family: 4 }];
          if (name === 'evil.test') return [{ address: '127.0.0.1', family: 4 }];
          throw new Error(`ENOTFOUND ${name}`);
        },
      },
    });
    proxy = await EgressProxy.start({
      checkHost: (h) => policy.checkHost(h),
      vetoAddress: (address, port) => (port === proxy.port ? 'the proxy itself' : undefined),
      denialHeader: DENIAL,
      onRefusal: (r) => refusals.push(r),
    });
  });
  afterEach(() => proxy.close());

  it('forwards plain http to an allowed host, connecting to the address the policy returned', async () => {
    // site.test exists only in the policy's resolver: the proxy must dial the vetted address, not resolve again.
    const r = await viaProxy(proxy, `http://site.test:${allowed.port}/page?q=1`);
    expect(r).toMatchObject({ status: 200, body: 'hello from 127.0.0.2' });
    expect(r.headers[DENIAL]).toBeUndefined();
    expect(allowed.hits).toContain(`GET /page?q=1 host=site.test:${allowed.port}`);
  });

  it('refuses plain http to a refused host before connecting, with the denial mark', async () => {
    const before = other.hits.length;
    for (const url of [
      `http://127.0.0.1:${other.port}/`,
      `http://127.1:${other.port}/`,
      `http://evil.test:${other.port}/`,
      `http://[::ffff:127.0.0.1]:${other.port}/`,
    ]) {
      const r = await viaProxy(proxy, url);
      expect(r.status).toBe(403);
      expect(r.headers[DENIAL]).toBe('denied');
      expect(r.body).toContain('loopback');
    }
    expect(other.hits.length).toBe(before);
    expect(refusals.map((x) => [x.via, x.host])).toEqual([
      ['HTTP', '127.0.0.1'],
      ['HTTP', '127.0.0.1'],
      ['HTTP', 'evil.test'],
      ['HTTP', '::ffff:7f00:1'],
    ]);
    expect(refusals[0]).toMatchObject({
      target: `http://127.0.0.1:${other.port}/`,
      refusal: { code: 'ADDRESS_REFUSED' },
    });
  });

  it('answers 502 for names that do not resolve, without calling it a refusal', async () => {
    const r = await viaProxy(proxy, 'http://nowhere.test/');
    expect(r.status).toBe(502);
    expect(r.headers[DENIAL]).toBeUndefined();
    expect(refusals).toEqual([]);
  });

  it('does not let a site forge the denial mark', async () => {
    const forging = http.createServer((_req, res) => {
      res.writeHead(200, { [DENIAL]: 'denied' });
      res.end('ok');
    });
    await new Promise<void>((resolve) => forging.listen(0, '127.0.0.2', resolve));
    const r = await viaProxy(proxy, `http://127.0.0.2:${(forging.address() as AddressInfo).port}/`);
    expect(r.status).toBe(200);
    expect(r.headers[DENIAL]).toBeUndefined();
    await new Promise((resolve) => forging.close(resolve));
  });

  it('tunnels CONNECT to an allowed host and refuses it to a refused one', async () => {
    const ok = await connect(proxy, `127.0.0.2:${allowed.port}`);
    expect(ok.head).toBe('HTTP/1.1 200 Connection Established');
    const answer = new Promise<string>((resolve) => {
      let body = '';
      ok.socket.on('data', (d: Buffer) => (body += d.toString()));
      ok.socket.on('end', () => resolve(body));
    });
    ok.socket.write(`GET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(await answer).toContain('hello from 127.0.0.2');

    const before = other.hits.length;
    for (const authority of [
      `127.0.0.1:${other.port}`,
      `[::1]:${other.port}`,
      '169.254.169.254:443',
      `localhost:${other.port}`,
    ]) {
      const no = await connect(proxy, authority);
      expect(no.head).toMatch(/^HTTP\/1\.1 403 /);
      expect(no.head).toContain(`${DENIAL}: denied`);
      no.socket.destroy();
    }
    expect(other.hits.length).toBe(before);
    expect(refusals.map((x) => x.via)).toEqual(['CONNECT', 'CONNECT', 'CONNECT', 'CONNECT']);
    expect(refusals[2].refusal.reason).toContain('link-local');
  });

  it('refuses to be its own destination, even when loopback is allowed', async () => {
    const policy = new UrlPolicy({ allowlist: parseAllowlist(['127.0.0.0/8']) });
    const open = await EgressProxy.start({
      checkHost: (h) => policy.checkHost(h),
      vetoAddress: (_a, port) => (port === open.port ? 'it is the proxy' : undefined),
      denialHeader: DENIAL,
    });
    try {
      const loop = await connect(open, `127.0.0.1:${open.port}`);
      expect(loop.head).toContain('403');
      loop.socket.destroy();
      // Anything else on loopback is allowed by this allowlist.
      expect(await viaProxy(open, `http://127.0.0.1:${other.port}/`)).toMatchObject({
        status: 200,
        body: 'hello from 127.0.0.1',
      });
    } finally {
      await open.close();
    }
  });

  it('forwards absolute-form upgrades to allowed hosts only', async () => {
    const upgrade = (url: string, host = new URL(url).host) =>
      new Promise<string>((resolve) => {
        const s = net.connect(proxy.port, '127.0.0.1', () =>
          s.write(
            `GET ${url} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
          ),
        );
        let buf = '';
        s.on('data', (d: Buffer) => {
          buf += d.toString();
          if (buf.includes('\r\n\r\n')) {
            s.destroy();
            resolve(buf.split('\r\n')[0]);
          }
        });
      });
    expect(await upgrade(`http://127.0.0.2:${allowed.port}/ws`)).toBe('HTTP/1.1 101 Switching Protocols');
    expect(allowed.hits).toContain('UPGRADE /ws');
    expect(await upgrade(`http://127.0.0.1:${other.port}/ws`)).toMatch(/^HTTP\/1\.1 403 /);
    expect(other.hits).not.toContain('UPGRADE /ws');
    // An upgrade naming another host in its Host header than its target is not forwarded.
    const before = allowed.hits.length;
    expect(await upgrade(`http://127.0.0.2:${allowed.port}/ws2`, 'evil.test')).toMatch(/^HTTP\/1\.1 400 /);
    expect(allowed.hits.length).toBe(before);
  });

  it('rejects origin-form requests and non-http absolute URLs', async () => {
    const r = await viaProxy(proxy, '/relative');
    expect(r.status).toBe(400);
    const f = await viaProxy(proxy, 'ftp://127.0.0.2/x');
    expect(f.status).toBe(400);
  });

  it('cuts open tunnels when closed', async () => {
    const t = await connect(proxy, `127.0.0.2:${allowed.port}`);
    const closed = new Promise<void>((resolve) => t.socket.on('close', () => resolve()));
    await proxy.close();
    await closed;
    await proxy.close(); // idempotent
  });
});

/**
 * Host confusion: a policy that allows `*.site.test` and resolves names the way a URL parser reads them (as the
 * engine's did: the policy matched the raw CONNECT text, the resolution its URL-parsed host). The proxy must hand it
 * one strictly parsed host, or refuse the request: never a text that two parsers read as two hosts.
 */
describe('EgressProxy: one canonical host, checked and dialled', () => {
  let site: Awaited<ReturnType<typeof origin>>;
  let elsewhere: Awaited<ReturnType<typeof origin>>;
  let proxy: EgressProxy;
  const asked: string[] = [];
  const attempts: EgressAttempt[] = [];

  beforeAll(async () => {
    site = await origin('127.0.0.2');
    elsewhere = await origin('127.0.0.3');
    proxy = await EgressProxy.start({
      checkHost: async (host): Promise<HostVerdict> => {
        asked.push(host);
        if (!host.endsWith('.site.test')) {
          return {
            allowed: false,
            host,
            refusal: { code: 'ADDRESS_REFUSED', reason: `${host} not allowed` },
          };
        }
        const read = canonicalHost(host);
        return { allowed: true, host, addresses: [read && parseIp(read) ? read : '127.0.0.2'] };
      },
      denialHeader: DENIAL,
      onAttempt: (a) => attempts.push(a),
    });
  });
  afterAll(async () => {
    await proxy.close();
    await new Promise((r) => site.server.close(r));
    await new Promise((r) => elsewhere.server.close(r));
  });
  beforeEach(() => {
    asked.length = 0;
    attempts.length = 0;
  });

  it.each(['/', '?', '#', '\\'])(
    'refuses CONNECT <address>%s.site.test:port with 400, recorded, without asking the policy or dialling',
    async (sep) => {
      const authority = `127.0.0.3${sep}.site.test:${elsewhere.port}`;
      const r = await connect(proxy, authority);
      expect(r.head).toMatch(/^HTTP\/1\.1 400 /);
      r.socket.destroy();
      expect(asked).toEqual([]);
      expect(elsewhere.hits).toEqual([]);
      expect(attempts).toEqual([
        expect.objectContaining({ via: 'CONNECT', host: authority, allowed: false, bytesIn: 0, bytesOut: 0 }),
      ]);
      expect(attempts[0].reason).toContain('bad proxy request');
    },
  );

  it('refuses the same confusion in an absolute-form request', async () => {
    for (const url of [
      `http://127.0.0.3:${elsewhere.port}%5c.site.test/`,
      `http://x.site.test@127.0.0.3:${elsewhere.port}/`,
    ]) {
      const r = await viaProxy(proxy, url, 'x.site.test');
      expect(r.status).toBe(400);
    }
    expect(asked).toEqual([]);
    expect(elsewhere.hits).toEqual([]);
    expect(attempts.map((a) => a.allowed)).toEqual([false, false]);
  });

  it('checks, dials and records the canonical host: lower case, no trailing dot, IDNA', async () => {
    const ok = await connect(proxy, `WWW.Site.Test.:${site.port}`);
    expect(ok.head).toBe('HTTP/1.1 200 Connection Established');
    ok.socket.destroy();
    const plain = await viaProxy(proxy, `http://B.Site.Test.:${site.port}/p`, `b.site.test:${site.port}`);
    expect(plain.status).toBe(200);
    expect(asked).toEqual(['www.site.test', 'b.site.test']);
    // The upstream hears the host that was checked, whatever spelling the client used.
    expect(site.hits).toContain(`GET /p host=b.site.test:${site.port}`);
    await new Promise((r) => setTimeout(r, 100));
    expect(attempts.map((a) => [a.host, a.allowed])).toEqual([
      ['www.site.test', true],
      ['b.site.test', true],
    ]);
    attempts.length = 0;
  });

  it('refuses a forward request whose Host header names another host (fronting), recorded', async () => {
    const before = site.hits.length;
    const r = await viaProxy(proxy, `http://a.site.test:${site.port}/`, 'other.test');
    expect(r.status).toBe(400);
    expect(r.body).toContain('Host header');
    const port = await viaProxy(proxy, `http://a.site.test:${site.port}/`, `a.site.test:${site.port + 1}`);
    expect(port.status).toBe(400);
    expect(site.hits.length).toBe(before);
    expect(attempts).toEqual([
      expect.objectContaining({ via: 'HTTP', host: 'a.site.test', port: site.port, allowed: false }),
      expect.objectContaining({ via: 'HTTP', host: 'a.site.test', port: site.port, allowed: false }),
    ]);
    // The same host in another spelling is the same host.
    const same = await viaProxy(proxy, `http://a.site.test:${site.port}/`, `A.SITE.TEST.:${site.port}`);
    expect(same.status).toBe(200);
  });
});
