import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Duplex } from 'node:stream';
import { resolveWorkspaceOptions, WorkspaceManager } from '@switchyard/workspace';
import { BrowserRouter } from './browser-router';
import { type BrowserModuleOptions, resolveBrowserOptions } from './browser.options';
import type { BrowserOutcome, BrowserRequest } from './browser.types';
import type { PageOperation, PageResult } from './driver/browser-driver.port';
import type { SessionPortDialer } from './session-ports.port';
import { FakeDriver, type FakePage } from './testing';
import { WorkspaceFiles } from './workspace-files';

/** A server standing in for one running in a session's sandbox; each request logged. */
async function server(name: string): Promise<{ server: http.Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const s = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url} host=${req.headers.host}`);
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<title>${name}</title>`);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { server: s, port: (s.address() as AddressInfo).port, hits };
}

/** An error like the engine's `PortClosedError`. */
class PortClosed extends Error {
  readonly code = 'PORT_CLOSED';
}

/**
 * What Chromium does with a navigation, in short: the route interceptor first, then the request through the context's
 * egress proxy (nothing bypasses it, loopback included), and the proxy's marks read off the answer.
 */
async function navigateThroughProxy(op: PageOperation, page: FakePage): Promise<PageResult> {
  if (op.op !== 'navigate') return {};
  const spec = page.context.spec;
  const refused = await spec.requestGuard({
    url: op.url,
    navigation: true,
    mainFrame: true,
    resourceType: 'document',
    page,
  });
  if (refused) throw new Error(`the guard refused ${op.url}: ${refused}`);
  const answer = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port: Number(new URL(spec.proxyServer).port),
      path: op.url,
      headers: { host: new URL(op.url).host },
    });
    req.on('response', resolve);
    req.on('error', reject);
    req.end();
  });
  answer.resume();
  await new Promise((r) => answer.on('end', r));
  const mark = answer.headers[spec.egressDenialHeader];
  page.land(op.url, answer.statusCode);
  return {
    status: answer.statusCode ?? null,
    egressDenied: mark === 'denied',
    ...(mark === 'unreachable' && { egressUnreachable: true }),
  };
}

describe('BrowserRouter: localhost is the session’s own sandbox', () => {
  let tmp: string;
  let router: BrowserRouter;
  let driver: FakeDriver;
  let manager: WorkspaceManager;
  let app: Awaited<ReturnType<typeof server>>;
  let host: Awaited<ReturnType<typeof server>>;
  /** What the dialer was asked for: `session:port`. */
  let dialed: string[];

  /** Session `a` runs the app on its port 3000; nothing else listens anywhere; ports below 1024 are refused. */
  const dialer: SessionPortDialer = {
    refusal: (port) =>
      port < 1024
        ? `port ${port} may not be opened: the allowed ports are 1024-65535 (SWITCHYARD_PORTS_ALLOWED)`
        : undefined,
    connect: (sessionId, port) => {
      dialed.push(`${sessionId}:${port}`);
      if (sessionId !== 'a' || port !== 3000) {
        return Promise.reject(
          new PortClosed(`nothing listens on port ${port} in session ${sessionId}'s sandbox`),
        );
      }
      return new Promise<Duplex>((resolve, reject) => {
        const socket = net.connect(app.port, '127.0.0.1', () => resolve(socket));
        socket.once('error', reject);
      });
    },
  };

  async function start(
    options: Partial<BrowserModuleOptions> = {},
    ports: SessionPortDialer | null = dialer,
  ) {
    await router?.onApplicationShutdown();
    const wsOptions = resolveWorkspaceOptions({ root: path.join(tmp, 'workspaces'), sandboxUid: null });
    manager = new WorkspaceManager(wsOptions);
    driver = new FakeDriver();
    router = new BrowserRouter(
      resolveBrowserOptions({
        stateDir: path.join(tmp, 'browser'),
        allowlistSetting: 'SWITCHYARD_BROWSER_ALLOWLIST',
        ...options,
      }),
      driver,
      new WorkspaceFiles(manager, wsOptions),
      {
        lookup: async (name) => {
          if (name === 'loopback.example') return [{ address: '127.0.0.1', family: 4 }];
          throw new Error(`ENOTFOUND ${name}`);
        },
      },
      undefined,
      ports ?? undefined,
    );
    await router.onModuleInit();
    // Pages of the shared browser fetch through their context's proxy, as Chromium does.
    const launch = driver.launchShared.bind(driver);
    driver.launchShared = async (label) => {
      const browser = await launch(label);
      const newContext = browser.newContext.bind(browser);
      browser.newContext = async (spec) => {
        const context = await newContext(spec);
        const newPage = context.newPage.bind(context);
        context.newPage = async () => {
          const page = (await newPage()) as FakePage;
          page.behaviour = navigateThroughProxy;
          return page;
        };
        return context;
      };
      return browser;
    };
  }

  const workspaces = new Map<string, string>();
  async function run(sessionId: string, request: BrowserRequest): Promise<BrowserOutcome> {
    if (!workspaces.has(sessionId)) workspaces.set(sessionId, await manager.create(sessionId));
    const out = await router.execute({ sessionId, workspaceDir: workspaces.get(sessionId)!, request });
    return out;
  }
  const navigate = (sessionId: string, url: string) => run(sessionId, { op: 'navigate', url });

  beforeAll(async () => {
    app = await server('the session app');
    host = await server('a server of the engine host');
  });
  afterAll(async () => {
    await new Promise((r) => app.server.close(r));
    await new Promise((r) => host.server.close(r));
  });
  beforeEach(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sy-localhost-'));
    dialed = [];
    workspaces.clear();
    app.hits.length = 0;
    host.hits.length = 0;
    await start();
  });
  afterEach(async () => {
    await router.onApplicationShutdown();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('opens the session’s own port for localhost in any spelling, and lists each connection in the result', async () => {
    for (const url of [
      'http://localhost:3000/',
      'http://127.0.0.1:3000/a',
      'http://2130706433:3000/b',
      'http://LOCALHOST.:3000/c',
      'http://[::1]:3000/d',
      'http://0.0.0.0:3000/e',
    ]) {
      const out = await navigate('a', url);
      expect({ url, status: out.status, code: out.error?.code }).toEqual({
        url,
        status: 'succeeded',
        code: undefined,
      });
      expect(out.output?.status).toBe(200);
      expect(out.egress).toEqual([
        {
          host: expect.any(String),
          port: 3000,
          allowed: true,
          reason: "the session's own sandbox port",
          bytesIn: '<title>the session app</title>'.length,
          bytesOut: 0,
        },
      ]);
    }
    expect(dialed).toEqual(Array(6).fill('a:3000'));
    expect(app.hits).toEqual([
      'GET / host=localhost:3000',
      'GET /a host=127.0.0.1:3000',
      'GET /b host=127.0.0.1:3000',
      'GET /c host=localhost:3000',
      'GET /d host=[::1]:3000',
      'GET /e host=0.0.0.0:3000',
    ]);
    expect(host.hits).toEqual([]);
  });

  it('fails a navigation to a port where nothing listens with PORT_CLOSED, saying what localhost is', async () => {
    const out = await navigate('b', 'http://localhost:3000/');
    expect(out).toMatchObject({
      status: 'failed',
      error: {
        class: 'validation',
        code: 'PORT_CLOSED',
        message:
          "could not open localhost:3000: nothing listens on port 3000 in session b's sandbox " +
          "(in the browser, localhost is this session's own sandbox)",
      },
      output: { status: 502 },
    });
    expect(out.egress).toEqual([
      expect.objectContaining({
        host: 'localhost',
        port: 3000,
        allowed: true,
        reason: "the session's own sandbox port: nothing listens on port 3000 in session b's sandbox",
      }),
    ]);
    // Session b reached only its own sandbox: a's server never heard of it.
    expect(dialed).toEqual(['b:3000']);
    expect(app.hits).toEqual([]);
  });

  it('refuses other ports, other loopback addresses and names that resolve to loopback, before a browser opens', async () => {
    const refused: [string, string][] = [
      ['http://127.0.0.1:22/', 'port 22 may not be opened: the allowed ports are 1024-65535'],
      ['http://localhost/', 'port 80 may not be opened'],
      ['https://localhost/', 'port 443 may not be opened'],
      [`http://127.0.0.2:${host.port}/`, 'loopback'],
      ['http://[::ffff:7f00:2]:3000/', 'loopback'],
      ['http://[64:ff9b::7f00:1]:3000/', 'loopback'],
      ['http://169.254.169.254/', 'link-local'],
    ];
    for (const [url, why] of refused) {
      const out = await navigate('a', url);
      expect({ url, status: out.status, code: out.error?.code }).toEqual({
        url,
        status: 'denied',
        code: 'ADDRESS_REFUSED',
      });
      expect(out.error?.message).toContain(why);
    }
    const named = await navigate('a', 'http://loopback.example:3000/');
    expect(named).toMatchObject({ status: 'denied', error: { code: 'ADDRESS_REFUSED' } });
    expect(named.error?.message).toContain('loopback.example resolves to 127.0.0.1');
    expect(driver.shared).toEqual([]);
    expect(dialed).toEqual([]);
  });

  it('keeps an allowlisted loopback address on the engine host, and refuses loopback without a dialer', async () => {
    await start({ allowlist: ['127.0.0.1'] });
    // The allowlist is the operator's word: 127.0.0.1 is this host's loopback, as before.
    const out = await navigate('a', `http://127.0.0.1:${host.port}/allowed`);
    expect(out).toMatchObject({ status: 'succeeded', output: { status: 200 } });
    expect(out.egress).toBeUndefined();
    expect(host.hits).toEqual([`GET /allowed host=127.0.0.1:${host.port}`]);
    // ...and only what it names: localhost is still the session's.
    expect((await navigate('a', 'http://localhost:3000/')).status).toBe('succeeded');
    expect(dialed).toEqual(['a:3000']);
    await start({}, null);
    const pre = router.precheck({ op: 'navigate', url: 'http://localhost:3000/' });
    expect(pre.denial).toMatchObject({ code: 'ADDRESS_REFUSED' });
    expect(pre.denial?.message).toContain('not on SWITCHYARD_BROWSER_ALLOWLIST');
  });
});
