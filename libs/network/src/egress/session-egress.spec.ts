import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { EgressPolicy } from './egress-policy';
import { SessionEgress } from './session-egress';

/** A request through a Unix-socket proxy: answers the status line and body. */
function viaSocket(socketPath: string, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath, () => s.write(request));
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString()));
    s.on('end', () => resolve(data));
    s.on('error', reject);
  });
}

describe('SessionEgress (real proxy on a Unix socket)', () => {
  let root: string;
  let server: http.Server;
  let egress: SessionEgress;

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-egress-'));
    server = http.createServer((req, res) => res.end(`hi ${req.url}`));
    await new Promise<void>((resolve) => server.listen(8079, '127.0.0.21', () => resolve()));
    egress = new SessionEgress({ root, resolve: new Map([['allowed.test', '127.0.0.21']]) });
  });
  afterAll(async () => {
    await egress.closeAll();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('starts no proxy for a session without network', async () => {
    expect(await egress.open('ses_none', EgressPolicy.none)).toBeUndefined();
    expect(await egress.attempts('ses_none', 0)).toEqual([]);
  });

  it('forwards what the policy allows, refuses the rest with the message, and keeps every attempt', async () => {
    const policy = EgressPolicy.parse(['allowed.test:8079', 'other.test'], 'network.allow');
    const opened = await egress.open('ses_a', policy);
    expect(opened?.socketDir).toBe(egress.socketDirOf('ses_a'));
    const socket = path.join(opened!.socketDir, 'proxy.sock');
    expect(fs.statSync(socket).mode & 0o777).toBe(0o666);
    const since = Date.now();
    const ok = await viaSocket(
      socket,
      'GET http://allowed.test:8079/x HTTP/1.1\r\nHost: allowed.test:8079\r\nConnection: close\r\n\r\n',
    );
    expect(ok).toMatch(/^HTTP\/1.1 200/);
    expect(ok).toContain('hi /x');
    const refused = await viaSocket(
      socket,
      'CONNECT blocked.test:443 HTTP/1.1\r\nHost: blocked.test:443\r\n\r\n',
    );
    expect(refused).toContain(
      "403 switchyard: egress to blocked.test denied by this session's network policy",
    );
    // A name the policy allows but that does not resolve to a public address is refused all the same.
    const loop = await viaSocket(
      socket,
      'GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
    );
    expect(loop).toMatch(/^HTTP\/1.1 403/);
    const attempts = await egress.attempts('ses_a', since);
    expect(attempts.map((a) => [a.host, a.port, a.allowed])).toEqual(
      expect.arrayContaining([
        ['allowed.test', 8079, true],
        ['blocked.test', 443, false],
        ['localhost', 80, false],
      ]),
    );
    expect(attempts.find((a) => a.allowed)!.bytesIn).toBeGreaterThan(0);
  });

  it('answers on further sockets of the session (a pooled container’s own directory) until they stop', async () => {
    const extraDir = fs.mkdtempSync(path.join(root, 'extra-'));
    const extra = path.join(extraDir, 'proxy.sock');
    const stop = await egress.listen('ses_a', extra);
    const ok = await viaSocket(
      extra,
      'GET http://allowed.test:8079/y HTTP/1.1\r\nHost: allowed.test:8079\r\nConnection: close\r\n\r\n',
    );
    expect(ok).toContain('hi /y');
    await stop();
    await expect(viaSocket(extra, 'GET / HTTP/1.1\r\n\r\n')).rejects.toThrow();
  });

  it('checks, resolves and records one canonical host, and refuses a target that is not host:port', async () => {
    const policy = EgressPolicy.parse(['allowed.test:8079', '*.example.test:8079'], 'network.allow');
    const socket = path.join((await egress.open('ses_c', policy))!.socketDir, 'proxy.sock');
    const since = Date.now();
    // Any spelling of the mapped name reaches it: the policy and the resolution see the same host.
    const ok = await viaSocket(
      socket,
      'GET http://ALLOWED.Test.:8079/z HTTP/1.1\r\nHost: allowed.test:8079\r\nConnection: close\r\n\r\n',
    );
    expect(ok).toContain('hi /z');
    const confused = await viaSocket(socket, 'CONNECT 127.0.0.21/.example.test:8079 HTTP/1.1\r\n\r\n');
    expect(confused).toMatch(/^HTTP\/1.1 400 /);
    expect(confused).toContain('bad proxy request');
    const fronted = await viaSocket(
      socket,
      'GET http://allowed.test:8079/ HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n',
    );
    expect(fronted).toMatch(/^HTTP\/1.1 400 /);
    expect((await egress.attempts('ses_c', since)).map((a) => [a.host, a.port, a.allowed])).toEqual([
      ['allowed.test', 8079, true],
      ['127.0.0.21/.example.test:8079', 0, false],
      ['allowed.test', 8079, false],
    ]);
    await egress.close('ses_c');
  });

  it("asks the engine's gate about each connection the network policy allows, with the canonical host", async () => {
    const policy = EgressPolicy.parse(['allowed.test:8079', 'blocked.test:8079'], 'network.allow');
    const asked: string[] = [];
    const gate = async (host: string, port: number) => {
      asked.push(`${host}:${port}`);
      return host === 'allowed.test' ? undefined : `egress to ${host} is blocked by the tenant policy`;
    };
    const socket = path.join((await egress.open('ses_g', policy, gate))!.socketDir, 'proxy.sock');
    const since = Date.now();
    const ok = await viaSocket(
      socket,
      'GET http://Allowed.Test:8079/g HTTP/1.1\r\nHost: allowed.test:8079\r\nConnection: close\r\n\r\n',
    );
    expect(ok).toContain('hi /g');
    const no = await viaSocket(socket, 'CONNECT blocked.test:8079 HTTP/1.1\r\n\r\n');
    expect(no).toContain('403 switchyard: egress to blocked.test is blocked by the tenant policy');
    // Outside the network policy: refused before the gate is asked.
    await viaSocket(socket, 'CONNECT elsewhere.test:8079 HTTP/1.1\r\n\r\n');
    expect(asked).toEqual(['allowed.test:8079', 'blocked.test:8079']);
    expect((await egress.attempts('ses_g', since)).map((a) => [a.host, a.allowed, a.reason])).toEqual([
      ['allowed.test', true, undefined],
      ['blocked.test', false, 'egress to blocked.test is blocked by the tenant policy'],
      ['elsewhere.test', false, expect.stringContaining("not in this session's network policy")],
    ]);
    await egress.close('ses_g');
  });

  it('closes a session: its sockets go', async () => {
    const dir = egress.socketDirOf('ses_a');
    await egress.close('ses_a');
    expect(fs.existsSync(dir)).toBe(false);
  });
});

/**
 * An operator's mirror on an address that is not public (loopback stands in for a private or reserved range): refused
 * unless its range is trusted, and then still only for hosts the session's policy names.
 */
describe('SessionEgress trusted networks', () => {
  let root: string;
  let server: http.Server;
  const resolver = {
    lookup: async (name: string) => {
      if (name === 'mirror.test' || name === 'unlisted.test') return [{ address: '127.0.0.22', family: 4 }];
      if (name === 'elsewhere.test') return [{ address: '127.0.0.23', family: 4 }];
      throw new Error(`ENOTFOUND ${name}`);
    },
  };
  const get = (socket: string, host: string) =>
    viaSocket(
      socket,
      `GET http://${host}:8079/m HTTP/1.1\r\nHost: ${host}:8079\r\nConnection: close\r\n\r\n`,
    );
  const policy = EgressPolicy.parse(['mirror.test:8079', 'elsewhere.test:8079'], 'network.allow');

  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-egress-nets-'));
    server = http.createServer((req, res) => res.end(`mirror ${req.url}`));
    await new Promise<void>((resolve) => server.listen(8079, '127.0.0.22', () => resolve()));
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('refuses a name resolving to a reserved address by default, naming the setting that would allow it', async () => {
    const egress = new SessionEgress({
      root,
      resolver,
      settingNames: { trustedNets: 'SWITCHYARD_EGRESS_TRUSTED_NETS' },
    });
    try {
      const socket = path.join((await egress.open('ses_t0', policy))!.socketDir, 'proxy.sock');
      const r = await get(socket, 'mirror.test');
      expect(r).toMatch(/^HTTP\/1.1 403 /);
      expect(r).toContain('mirror.test resolves to 127.0.0.22');
      expect(r).toContain('SWITCHYARD_EGRESS_TRUSTED_NETS');
    } finally {
      await egress.closeAll();
    }
  });

  it('dials a trusted range for hosts the policy allows, and nothing outside the range or the policy', async () => {
    const egress = new SessionEgress({ root, resolver, trustedNets: ['127.0.0.22/32'] });
    try {
      const socket = path.join((await egress.open('ses_t1', policy))!.socketDir, 'proxy.sock');
      const since = Date.now();
      expect(await get(socket, 'mirror.test')).toContain('mirror /m');
      // Same trusted address, but a host the session's policy does not name.
      expect(await get(socket, 'unlisted.test')).toMatch(/^HTTP\/1.1 403 .*network policy/);
      // Allowed by the policy, but its address is outside the trusted range.
      expect(await get(socket, 'elsewhere.test')).toMatch(/^HTTP\/1.1 403 .*127\.0\.0\.23/);
      expect((await egress.attempts('ses_t1', since)).map((a) => [a.host, a.allowed])).toEqual([
        ['mirror.test', true],
        ['unlisted.test', false],
        ['elsewhere.test', false],
      ]);
    } finally {
      await egress.closeAll();
    }
  });
});
