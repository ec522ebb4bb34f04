import * as http from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PathRejectedError, resolveWorkspaceOptions, WorkspaceManager } from '@switchyard/workspace';
import { capData } from './browser-output';
import { BrowserRouter } from './browser-router';
import { BrowserLaunchError, PageOperationError } from './browser.errors';
import { type BrowserModuleOptions, resolveBrowserOptions } from './browser.options';
import type { BrowserOutcome, BrowserRequest } from './browser.types';
import type { GuardedRequest } from './driver/browser-driver.port';
import { type FakeContext, FakeDriver, type FakePage } from './testing';
import { WorkspaceFiles } from './workspace-files';

const DNS: Record<string, string[]> = {
  'public.example': ['93.184.216.34'],
  'metadata.example': ['169.254.169.254'],
};

describe('BrowserRouter', () => {
  let tmp: string;
  let driver: FakeDriver;
  let router: BrowserRouter;
  let manager: WorkspaceManager;
  let now: number;
  const workspaces = new Map<string, string>();

  async function start(options: Partial<BrowserModuleOptions> = {}): Promise<void> {
    await router?.onApplicationShutdown();
    const wsOptions = resolveWorkspaceOptions({ root: path.join(tmp, 'workspaces'), sandboxUid: null });
    manager = new WorkspaceManager(wsOptions);
    driver = new FakeDriver();
    router = new BrowserRouter(
      resolveBrowserOptions({
        stateDir: path.join(tmp, 'browser'),
        allowlist: ['127.0.0.2'],
        allowlistSetting: 'SWITCHYARD_BROWSER_ALLOWLIST',
        timing: { deadlineGraceMs: 50, probeMs: 50, housekeepingMs: 1000, crashWaitMs: 50 },
        ...options,
      }),
      driver,
      new WorkspaceFiles(manager, wsOptions),
      {
        lookup: async (host) => {
          const a = DNS[host];
          if (!a) throw new Error(`ENOTFOUND ${host}`);
          return a.map((address) => ({ address, family: 4 }));
        },
      },
      { now: () => new Date(now), monotonic: () => now },
    );
    await router.onModuleInit();
  }

  /** Which fake context each session got (the one created during its action). */
  const contextOf = new Map<string, FakeContext>();

  async function run(
    sessionId: string,
    request: BrowserRequest,
    signal?: AbortSignal,
  ): Promise<BrowserOutcome> {
    if (!workspaces.has(sessionId)) workspaces.set(sessionId, await manager.create(sessionId));
    const before = new Set(driver.allContexts());
    const out = await router.execute(
      { sessionId, workspaceDir: workspaces.get(sessionId)!, request },
      signal,
    );
    const created = driver.allContexts().find((c) => !before.has(c));
    if (created) contextOf.set(sessionId, created);
    return out;
  }
  const act = run;

  const nav = (url = 'http://127.0.0.2/') => ({ op: 'navigate' as const, url });
  /** The session's first open tab. */
  const pageOf = (sessionId: string): FakePage => contextOf.get(sessionId)!.pagesOpen.find((p) => !p.closed)!;

  beforeEach(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sy-router-'));
    now = 0;
    workspaces.clear();
    contextOf.clear();
    await start();
  });
  afterEach(async () => {
    await router.onApplicationShutdown();
    rmSync(tmp, { recursive: true, force: true });
  });

  describe('routing', () => {
    it('gives each session its own context in one shared browser, and reuses it', async () => {
      expect(await act('a', nav())).toMatchObject({
        status: 'succeeded',
        output: { tabId: 'tab_1', url: 'http://127.0.0.2/', status: 200, route: 'shared' },
      });
      await act('b', nav('http://127.0.0.2/b'));
      await act('a', { op: 'extract', mode: 'text' });
      expect(driver.shared).toHaveLength(1);
      expect(driver.shared[0].contexts).toHaveLength(2);
      expect(driver.shared[0].contexts[0].pagesOpen[0].performed.map((o) => o.op)).toEqual([
        'navigate',
        'extract',
      ]);
      // Each context has its own egress proxy.
      const [ca, cb] = driver.shared[0].contexts;
      expect(ca.spec.proxyServer).not.toBe(cb.spec.proxyServer);
      expect(ca.spec.acceptDownloads).toBe(false);
    });

    it.each<[string, BrowserRequest]>([
      ['needsFileAccess', { ...nav(), needsFileAccess: true }],
      ['persistProfile', { ...nav(), persistProfile: true }],
    ])('sends a session asking for %s to a dedicated browser', async (_why, request) => {
      expect((await act('a', request)).output?.route).toBe('dedicated');
      expect(driver.shared).toHaveLength(0);
      const [d] = driver.dedicated;
      expect(d.spec.userDataDir).toBe(path.join(tmp, 'browser', 'sessions', 'a', 'profile'));
      expect(d.spec.downloadsDir).toBe(path.join(tmp, 'browser', 'sessions', 'a', 'downloads'));
      expect(d.spec.acceptDownloads).toBe(true);
      expect(existsSync(d.spec.userDataDir)).toBe(true);
      // The persistent context's first tab is the session's first.
      expect(d.context.pagesOpen).toHaveLength(1);
      expect(d.context.pagesOpen[0].currentUrl).toBe('http://127.0.0.2/');
    });

    it('moves a session to a dedicated browser on its first download, carrying cookies and the current tab', async () => {
      await act('a', nav('http://127.0.0.2/download'));
      const shared = driver.shared[0].contexts[0];
      shared.cookieJar.push({
        name: 'k',
        value: 'v',
        domain: '127.0.0.2',
        path: '/',
        expires: -1,
        httpOnly: false,
        secure: false,
        sameSite: 'Lax',
      });
      const out = await act('a', { op: 'download', selector: '#get', path: 'files/' });
      expect(out).toMatchObject({
        status: 'succeeded',
        output: {
          route: 'dedicated',
          tabId: 'tab_1',
          url: 'http://127.0.0.2/download',
          artifacts: [{ path: 'files/data.csv', bytes: 4 }],
        },
        files: [{ path: 'files/data.csv', access: 'write' }],
      });
      expect(shared.closed).toBe(true);
      const dedicated = driver.dedicated[0].context;
      expect(dedicated.cookieJar.map((c) => c.name)).toEqual(['k']);
      expect(dedicated.pagesOpen[0].performed.map((o) => o.op)).toEqual(['navigate', 'download']);
      expect(readFileSync(path.join(workspaces.get('a')!, 'files/data.csv'), 'utf8')).toBe('a,b\n');
      // It stays there.
      expect((await act('a', { op: 'extract', mode: 'text' })).output?.route).toBe('dedicated');
      expect(driver.dedicated).toHaveLength(1);
    });
  });

  describe('URL policy', () => {
    it('refuses file: and friends and private addresses before any browser starts', async () => {
      for (const url of [
        'file:///etc/passwd',
        ' JAVASCRIPT:alert(1)',
        'view-source:http://x/',
        'http://169.254.169.254/',
      ]) {
        const out = await run('a', nav(url));
        expect(out.status).toBe('denied');
        expect(out.error?.class).toBe('policy');
      }
      const viaDns = await run('a', nav('http://metadata.example/'));
      expect(viaDns).toMatchObject({ status: 'denied', error: { code: 'ADDRESS_REFUSED' } });
      expect(viaDns.error?.message).toBe(
        'refused http://metadata.example/: metadata.example resolves to 169.254.169.254, a link-local address (cloud metadata lives here) (169.254.0.0/16); not on SWITCHYARD_BROWSER_ALLOWLIST',
      );
      expect(await run('a', { op: 'new_tab', url: 'http://127.1/' })).toMatchObject({ status: 'denied' });
      expect(driver.shared).toHaveLength(0);
      expect(driver.dedicated).toHaveLength(0);
    });

    it('fails a navigation to a name that does not resolve', async () => {
      expect(await run('a', nav('http://nowhere.example/'))).toMatchObject({
        status: 'failed',
        error: { class: 'validation', code: 'DNS_FAILED' },
      });
    });

    it('precheck refuses what needs no DNS; an unparseable URL is no refusal but a failed action', async () => {
      expect(router.precheck(nav('http://public.example/'))).toEqual({
        risk: { score: 0, level: 'low', reasons: [] },
      });
      expect(router.precheck(nav('http://0x7f.1/')).denial).toMatchObject({ code: 'ADDRESS_REFUSED' });
      expect(router.precheck(nav('nope')).denial).toBeUndefined();
      expect(await run('a', nav('nope'))).toMatchObject({
        status: 'failed',
        error: { class: 'validation', code: 'URL_INVALID', message: 'not an absolute URL: nope' },
      });
    });

    it('attributes a redirect hop refused by the egress proxy to the navigation', async () => {
      await run('a', nav());
      const proxy = new URL(contextOf.get('a')!.spec.proxyServer);
      const page = pageOf('a');
      page.behaviour = async (op) => {
        if (op.op !== 'navigate') return {};
        // The hop Chromium would send through the context's proxy after a 302 to a refused host.
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.request({
            host: '127.0.0.1',
            port: Number(proxy.port),
            path: 'http://127.1:9/secret',
          });
          req.on('response', (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          req.end();
        });
        page.land('http://127.1:9/secret', status, '');
        return { status, egressDenied: status === 403 };
      };
      const out = await run('a', nav('http://127.0.0.2/redirect'));
      expect(out).toMatchObject({
        status: 'denied',
        error: {
          class: 'policy',
          code: 'ADDRESS_REFUSED',
          message:
            'refused http://127.0.0.1:9/secret: 127.0.0.1 is a loopback address (127.0.0.0/8); not on SWITCHYARD_BROWSER_ALLOWLIST',
        },
        output: { status: 403, blocked: [{ url: 'http://127.0.0.1:9/secret' }] },
      });
    });

    it('lists subresources the interceptor refused, and denies a refused main document', async () => {
      await run('a', nav());
      const ctx = contextOf.get('a')!;
      const page = pageOf('a');
      page.behaviour = async (op) => {
        if (op.op === 'navigate') {
          page.land(op.url);
          const guard = ctx.spec.requestGuard;
          await guard({
            url: 'http://169.254.169.254/pixel.png',
            navigation: false,
            mainFrame: true,
            resourceType: 'image',
          });
          await guard({
            url: 'http://127.0.0.2/ok.png',
            navigation: false,
            mainFrame: true,
            resourceType: 'image',
          });
          return { status: 200 };
        }
        if (op.op === 'click') {
          const refused = await ctx.spec.requestGuard({
            url: 'http://10.0.0.1/admin',
            navigation: true,
            mainFrame: true,
            resourceType: 'document',
          });
          expect(refused).toContain('private');
          throw new PageOperationError('navigation', 'ERR_BLOCKED_BY_CLIENT', 'net::ERR_BLOCKED_BY_CLIENT');
        }
        return {};
      };
      const loaded = await run('a', nav('http://127.0.0.2/with-image'));
      expect(loaded.status).toBe('succeeded');
      expect(loaded.output?.blocked).toEqual([
        { url: 'http://169.254.169.254/pixel.png', reason: expect.stringContaining('link-local') },
      ]);
      const clicked = await run('a', { op: 'click', selector: 'a' });
      expect(clicked).toMatchObject({
        status: 'denied',
        error: {
          class: 'policy',
          code: 'ADDRESS_REFUSED',
          message: expect.stringContaining('http://10.0.0.1/admin'),
        },
      });
      // A failed navigation with only a refused image is a plain failure, not a refusal.
      page.behaviour = async (op) => {
        if (op.op !== 'navigate') return {};
        await ctx.spec.requestGuard({
          url: 'http://10.0.0.9/x.png',
          navigation: false,
          mainFrame: true,
          resourceType: 'image',
        });
        throw new PageOperationError('navigation', 'ERR_CONNECTION_REFUSED', 'net::ERR_CONNECTION_REFUSED');
      };
      expect(await run('a', nav('http://127.0.0.2:9/'))).toMatchObject({
        status: 'failed',
        error: { class: 'validation', code: 'ERR_CONNECTION_REFUSED' },
      });
    });

    it('ends a download whose own request is refused at once, denied and naming the URL and the rule', async () => {
      await run('a', { ...nav('http://127.0.0.2/download'), needsFileAccess: true });
      const ctx = contextOf.get('a')!;
      const page = pageOf('a');
      page.behaviour = async (op) => {
        if (op.op !== 'download') return {};
        // The click's navigation, refused by the interceptor: the download event will never come.
        await ask(ctx, 'http://169.254.169.254/report.csv', page);
        return new Promise<never>(() => undefined);
      };
      const started = Date.now();
      const out = await run('a', { op: 'download', selector: '#get', path: 'files/', timeoutMs: 30_000 });
      expect(Date.now() - started).toBeLessThan(1000);
      expect(out).toMatchObject({
        status: 'denied',
        error: {
          class: 'policy',
          code: 'ADDRESS_REFUSED',
          message:
            'refused http://169.254.169.254/report.csv: 169.254.169.254 is a link-local address (cloud metadata lives here) (169.254.0.0/16); not on SWITCHYARD_BROWSER_ALLOWLIST',
        },
        output: { tabId: 'tab_1', blocked: [{ url: 'http://169.254.169.254/report.csv' }] },
        files: [],
      });
      // The driver's call was stopped with the refusal, not left waiting.
      const signal = page.signals[page.signals.length - 1];
      expect(signal?.aborted).toBe(true);
      expect(String(signal?.reason)).toContain('169.254.169.254/report.csv');
      expect(existsSync(path.join(workspaces.get('a')!, 'files'))).toBe(false);
      // The session goes on.
      page.behaviour = undefined;
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded' });
    });

    it("ends an action when a redirect hop of its tab's document is refused, or a popup it opened", async () => {
      await run('a', nav());
      const ctx = contextOf.get('a')!;
      const page = pageOf('a');
      page.behaviour = async (op) => {
        if (op.op === 'click') await ask(ctx, 'http://10.0.0.1/popup', ctx.openPage());
        // What the driver reports for a hop Chromium follows by itself: the guard cannot abort it.
        else await ask(ctx, 'http://127.1:9/secret', page);
        return new Promise<never>(() => undefined);
      };
      expect(await run('a', { op: 'reload', timeoutMs: 30_000 })).toMatchObject({
        status: 'denied',
        error: {
          code: 'ADDRESS_REFUSED',
          message: expect.stringMatching(
            /^refused http:\/\/127\.1:9\/secret: 127\.0\.0\.1 is a loopback address/,
          ),
        },
      });
      const clicked = await run('a', { op: 'click', selector: 'a[target=_blank]', timeoutMs: 30_000 });
      expect(clicked).toMatchObject({
        status: 'denied',
        error: { code: 'ADDRESS_REFUSED', message: expect.stringContaining('http://10.0.0.1/popup') },
        output: { tabId: 'tab_1', blocked: [{ url: 'http://10.0.0.1/popup' }] },
      });
    });

    it('keeps an action going when only subresources, subframes or other tabs are refused', async () => {
      await run('a', nav());
      await run('a', { op: 'new_tab', url: 'http://127.0.0.2/other' });
      await run('a', { op: 'switch_tab', tabId: 'tab_1' });
      const ctx = contextOf.get('a')!;
      const [first, other] = ctx.pagesOpen;
      first.behaviour = async () => {
        await ask(ctx, 'http://169.254.169.254/pixel.png', first, {
          navigation: false,
          resourceType: 'image',
        });
        await ask(ctx, 'http://10.0.0.2/frame', first, { mainFrame: false });
        await ask(ctx, 'http://10.0.0.3/elsewhere', other);
        await new Promise((r) => setTimeout(r, 20));
        return {};
      };
      const out = await run('a', { op: 'click', selector: '#go' });
      expect(out).toMatchObject({ status: 'succeeded', output: { tabId: 'tab_1' } });
      expect(out.output?.blocked?.map((b) => b.url)).toEqual([
        'http://169.254.169.254/pixel.png',
        'http://10.0.0.2/frame',
        'http://10.0.0.3/elsewhere',
      ]);
      expect(first.signals[first.signals.length - 1]?.aborted).toBe(false);
    });

    it('lets data:, blob: and about: requests through the interceptor untouched', async () => {
      await run('a', nav());
      const guard = driver.shared[0].contexts[0].spec.requestGuard;
      for (const url of ['data:image/png;base64,AA==', 'blob:http://127.0.0.2/uuid', 'about:blank']) {
        expect(
          await guard({ url, navigation: false, mainFrame: true, resourceType: 'image' }),
        ).toBeUndefined();
      }
      expect(
        await guard({
          url: 'file:///etc/passwd',
          navigation: true,
          mainFrame: false,
          resourceType: 'document',
        }),
      ).toContain('file:');
    });
  });

  describe('tabs that never loaded a page', () => {
    it.each<[string, BrowserRequest]>([
      ['click', { op: 'click', selector: '#go' }],
      ['fill', { op: 'fill', selector: '#name', value: 'x' }],
      ['type', { op: 'type', selector: '#name', text: 'x' }],
      ['select', { op: 'select', selector: '#color', values: ['red'] }],
      ['hover', { op: 'hover', selector: '#go' }],
      ['check', { op: 'check', selector: '#agree' }],
      ['press on an element', { op: 'press', key: 'Enter', selector: '#name' }],
      ['wait_for a selector', { op: 'wait_for', selector: '#go' }],
      ['wait_for a text', { op: 'wait_for', text: 'hello' }],
      ['extract from an element', { op: 'extract', mode: 'text', selector: 'h1' }],
      ['screenshot of an element', { op: 'screenshot', path: 's.png', selector: 'h1' }],
      ['download', { op: 'download', selector: '#get', path: 'files/' }],
    ])('fail %s at once, naming the fix', async (_what, request) => {
      const out = await run('a', { ...request, timeoutMs: 30_000 });
      expect(out).toMatchObject({
        status: 'failed',
        error: {
          class: 'validation',
          code: 'PAGE_NOT_LOADED',
          message: `${request.op} needs a page, but the tab has no page loaded (about:blank): navigate first`,
        },
        output: { tabId: 'tab_1', url: 'about:blank' },
        files: [],
      });
      expect(pageOf('a').performed).toEqual([]);
    });

    it('let ops that need no element run, and fail an upload at once too', async () => {
      for (const request of [
        { op: 'extract', mode: 'text' },
        { op: 'screenshot', path: 'blank.png' },
        { op: 'press', key: 'Tab' },
        { op: 'wait_for', loadState: 'load' },
        { op: 'reload' },
      ] as BrowserRequest[]) {
        expect({ op: request.op, status: (await run('a', request)).status }).toEqual({
          op: request.op,
          status: 'succeeded',
        });
      }
      writeFileSync(path.join(workspaces.get('a')!, 'up.txt'), 'x');
      expect(await run('a', { op: 'upload', selector: '#f', path: 'up.txt' })).toMatchObject({
        status: 'failed',
        error: { code: 'PAGE_NOT_LOADED' },
      });
      // Once it has a page, the same op runs.
      await run('a', nav());
      expect(await run('a', { op: 'click', selector: '#go' })).toMatchObject({ status: 'succeeded' });
    });
  });

  describe('evaluate', () => {
    it('is refused while disabled, whatever its risk', async () => {
      expect(await run('a', { op: 'evaluate', script: '1 + 1' })).toMatchObject({
        status: 'denied',
        error: { class: 'policy', code: 'EVALUATE_DISABLED' },
      });
      expect(driver.shared).toHaveLength(0);
    });

    it('runs when enabled, unless the risk policy calls the script critical', async () => {
      await start({
        evaluate: true,
        assessScript: (s) =>
          s.includes('fetch')
            ? { score: 90, level: 'critical', reasons: ['network: fetch('] }
            : { score: 0, level: 'low', reasons: [] },
      });
      expect(await run('a', { op: 'evaluate', script: 'document.title' })).toMatchObject({
        status: 'succeeded',
        output: { data: { value: 42 } },
      });
      const critical = router.precheck({ op: 'evaluate', script: 'fetch("/x")' });
      expect(critical).toMatchObject({ risk: { level: 'critical' }, denial: { code: 'RISK_CRITICAL' } });
      expect(await run('a', { op: 'evaluate', script: 'fetch("/x")' })).toMatchObject({ status: 'denied' });
    });
  });

  describe('files', () => {
    it('saves screenshots and PDFs into the workspace and reports them', async () => {
      await run('a', nav());
      const shot = await run('a', { op: 'screenshot', path: 'out/s.png' });
      expect(shot).toMatchObject({
        status: 'succeeded',
        output: { artifacts: [{ path: 'out/s.png', bytes: 9, mimeType: 'image/png' }] },
        files: [{ path: 'out/s.png', access: 'write' }],
      });
      expect(readFileSync(path.join(workspaces.get('a')!, 'out/s.png'), 'latin1')).toBe('\x89PNG fake');
      const pdf = await run('a', { op: 'pdf', path: 'p.pdf' });
      expect(pdf.files).toEqual([{ path: 'p.pdf', access: 'write' }]);
    });

    it('uploads a workspace file (read by the router, handed over as bytes) from a dedicated browser', async () => {
      await run('a', nav());
      writeFileSync(path.join(workspaces.get('a')!, 'up.txt'), 'payload');
      const out = await run('a', { op: 'upload', selector: '#f', path: 'up.txt' });
      expect(out).toMatchObject({
        status: 'succeeded',
        output: { route: 'dedicated', data: { uploaded: 'up.txt', bytes: 7 } },
        files: [{ path: 'up.txt', access: 'read' }],
      });
      const op = driver.dedicated[0].context.pagesOpen[0].performed.find((o) => o.op === 'upload');
      expect(op).toMatchObject({
        file: { name: 'up.txt', mimeType: 'text/plain', buffer: Buffer.from('payload') },
      });
      expect(await run('a', { op: 'upload', selector: '#f', path: 'missing.txt' })).toMatchObject({
        status: 'failed',
        error: { code: 'ENOENT' },
      });
    });

    it('throws path refusals for the engine (a 400)', async () => {
      await run('a', nav());
      symlinkSync('/etc', path.join(workspaces.get('a')!, 'etc'));
      await expect(run('a', { op: 'screenshot', path: 'etc/x.png' })).rejects.toBeInstanceOf(
        PathRejectedError,
      );
      expect(existsSync('/etc/x.png')).toBe(false);
    });

    it('caps artifacts', async () => {
      await start({ maxArtifactBytes: 4 });
      await run('a', nav());
      expect(await run('a', { op: 'screenshot', path: 's.png' })).toMatchObject({
        status: 'failed',
        error: { class: 'limit', code: 'FILE_TOO_LARGE' },
      });
      expect(existsSync(path.join(workspaces.get('a')!, 's.png'))).toBe(false);
    });
  });

  describe('tabs', () => {
    it('opens, switches and closes tabs by id, and adopts popups', async () => {
      await act('a', nav());
      const t2 = await act('a', { op: 'new_tab', url: 'http://127.0.0.2/two' });
      expect(t2.output).toMatchObject({
        tabId: 'tab_2',
        url: 'http://127.0.0.2/two',
        data: { tabs: [{ id: 'tab_1' }, { id: 'tab_2' }] },
      });
      expect((await act('a', { op: 'switch_tab', tabId: 'tab_1' })).output).toMatchObject({
        tabId: 'tab_1',
        url: 'http://127.0.0.2/',
      });
      const ctx = contextOf.get('a')!;
      ctx.pagesOpen[0].behaviour = async () => {
        ctx.openPage().land('http://127.0.0.2/popup');
        return {};
      };
      expect((await act('a', { op: 'click', selector: 'a[target=_blank]' })).output?.openedTabs).toEqual([
        'tab_3',
      ]);
      expect(await act('a', { op: 'close_tab' })).toMatchObject({
        output: { tabId: 'tab_3', data: { closed: 'tab_1' } },
      });
      expect(await act('a', { op: 'switch_tab', tabId: 'tab_1' })).toMatchObject({
        status: 'failed',
        error: { code: 'TAB_NOT_FOUND' },
      });
      await act('a', { op: 'close_tab', tabId: 'tab_2' });
      expect((await act('a', { op: 'close_tab' })).output).toMatchObject({ tabId: null, url: '' });
      // The next page op opens a fresh tab.
      expect((await act('a', nav())).output?.tabId).toBe('tab_4');
    });
  });

  describe('limits and lifecycle', () => {
    it('closes the least recently used idle context to make room, and refuses when all are busy', async () => {
      await start({ maxContexts: 2, maxDedicated: 1 });
      await run('a', nav());
      now = 10;
      await run('b', nav());
      now = 20;
      await run('c', nav());
      const [ca, cb, cc] = driver.shared[0].contexts;
      expect([ca.closed, cb.closed, cc.closed]).toEqual([true, false, false]);

      // b and c busy: d cannot get a context.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      for (const c of [cb, cc]) {
        c.pagesOpen[0].behaviour = async () => {
          await gate;
          return {};
        };
      }
      const busyB = run('b', { op: 'hover', selector: 'x' });
      const busyC = run('c', { op: 'hover', selector: 'x' });
      await new Promise((r) => setTimeout(r, 20));
      expect(await run('d', nav())).toMatchObject({
        status: 'denied',
        error: { class: 'limit', code: 'BROWSER_CONTEXT_LIMIT' },
      });
      release();
      expect((await busyB).status).toBe('succeeded');
      expect((await busyC).status).toBe('succeeded');

      // One dedicated browser at most: a second one replaces the first.
      await run('e', { ...nav(), needsFileAccess: true });
      await run('f', { ...nav(), needsFileAccess: true });
      expect(driver.dedicated.map((d) => d.context.closed)).toEqual([true, false]);
    });

    it('closes contexts idle for longer than idleMs', async () => {
      await start({ idleMs: 1000 });
      await run('a', nav());
      now = 500;
      await run('b', nav());
      now = 1200;
      await router.sweepIdle();
      expect(driver.shared[0].contexts.map((c) => c.closed)).toEqual([true, false]);
      // The idle session simply starts afresh.
      expect((await run('a', nav())).output?.tabId).toBe('tab_1');
      expect(driver.shared[0].contexts).toHaveLength(3);
    });

    it("runs one session's actions one at a time", async () => {
      await run('a', nav());
      const page = pageOf('a');
      let running = 0;
      let most = 0;
      page.behaviour = async () => {
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 10));
        running--;
        return {};
      };
      await Promise.all([1, 2, 3, 4].map(() => run('a', { op: 'hover', selector: 'x' })));
      expect(most).toBe(1);
    });

    it('releases a session: its context and proxy close, its profile goes', async () => {
      await run('a', { ...nav(), persistProfile: true });
      const { context, spec } = driver.dedicated[0];
      const proxy = new URL(spec.proxyServer);
      await router.releaseSession('a');
      expect(context.closed).toBe(true);
      expect(existsSync(path.dirname(spec.userDataDir))).toBe(false);
      await expect(fetch(`http://127.0.0.1:${proxy.port}/`)).rejects.toThrow();
      expect(router.processIds().dedicated).toEqual({});
    });

    it('closes everything on shutdown and refuses new work', async () => {
      await run('a', nav());
      await run('b', { ...nav(), needsFileAccess: true });
      await router.onApplicationShutdown();
      expect(driver.shared[0].closedByRouter).toBe(true);
      expect(driver.allContexts().every((c) => c.closed)).toBe(true);
      expect(await run('c', nav())).toMatchObject({ status: 'error', error: { code: 'SHUTTING_DOWN' } });
    });

    it('reports availability, and denies actions when disabled or without a browser', async () => {
      expect(await router.availability()).toMatchObject({ available: true, shared: 'stopped', contexts: 0 });
      await run('a', nav());
      expect(await router.availability()).toMatchObject({ shared: 'running', contexts: 1, dedicated: 0 });
      driver.available = false;
      now += 1000; // past the probe cache
      expect(await run('a', nav())).toMatchObject({
        status: 'denied',
        error: {
          class: 'policy',
          code: 'TIER_UNAVAILABLE',
          message: expect.stringContaining('no browser executable'),
        },
      });
      await start({ enabled: false });
      expect(await router.availability()).toEqual({
        available: false,
        reason: 'the browser tier is disabled by configuration',
      });
      expect(await run('a', nav())).toMatchObject({ status: 'denied', error: { code: 'TIER_UNAVAILABLE' } });
    });

    it('reports a launch failure as a spawn error and tries again next time', async () => {
      driver.failNextLaunch = new BrowserLaunchError('could not start the browser (/usr/bin/chromium): boom');
      expect(await run('a', nav())).toMatchObject({
        status: 'error',
        error: { class: 'spawn', code: 'BROWSER_LAUNCH_FAILED' },
      });
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded' });
    });
  });

  describe('faults', () => {
    it('reports a browser crash under an action, then relaunches for the next one', async () => {
      await run('a', nav());
      await run('b', nav());
      const browser = driver.shared[0];
      pageOf('a').behaviour = async () => {
        browser.crash();
        throw new PageOperationError(
          'closed',
          'PAGE_CLOSED',
          'Target page, context or browser has been closed',
        );
      };
      expect(await run('a', nav('http://127.0.0.2/slow'))).toMatchObject({
        status: 'error',
        error: {
          class: 'internal',
          code: 'BROWSER_CRASHED',
          message: expect.stringContaining('next action'),
        },
      });
      // Both sessions start afresh on a new browser.
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded', output: { tabId: 'tab_1' } });
      expect(await run('b', { op: 'extract', mode: 'text' })).toMatchObject({ status: 'succeeded' });
      expect(driver.shared).toHaveLength(2);
      expect(router.processIds().shared).toBe(driver.shared[1].pid());
    });

    it('relaunches a dedicated browser that died between actions', async () => {
      await run('a', { ...nav(), needsFileAccess: true });
      driver.dedicated[0].context.die();
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded', output: { route: 'dedicated' } });
      expect(driver.dedicated).toHaveLength(2);
      expect(driver.dedicated[1].spec.userDataDir).toBe(driver.dedicated[0].spec.userDataDir);
    });

    it('times out an op that never returns and closes the hung tab; the next action gets a new one', async () => {
      await run('a', nav());
      const page = pageOf('a');
      page.hung = true;
      page.behaviour = () => new Promise(() => undefined);
      const t = await run('a', { op: 'hover', selector: 'x', timeoutMs: 50 });
      expect(t).toMatchObject({
        status: 'timed_out',
        error: { class: 'timeout', code: 'TIMEOUT', message: expect.stringContaining('stopped responding') },
      });
      expect(page.closed).toBe(true);
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded', output: { tabId: 'tab_2' } });
    });

    it('closes the whole context when a hung tab will not even close', async () => {
      await run('a', nav());
      const first = contextOf.get('a')!;
      const page = pageOf('a');
      page.hung = true;
      page.closeHangs = true;
      page.behaviour = () => new Promise(() => undefined);
      expect(await run('a', { op: 'hover', selector: 'x', timeoutMs: 50 })).toMatchObject({
        status: 'timed_out',
      });
      expect(first.closed).toBe(true);
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded', output: { tabId: 'tab_1' } });
      expect(contextOf.get('a')).not.toBe(first);
    });

    it('keeps a responsive tab after an op timeout', async () => {
      await run('a', nav());
      pageOf('a').behaviour = async () => {
        throw new PageOperationError('timeout', 'TIMEOUT', 'locator.click: Timeout 50ms exceeded.');
      };
      expect(await run('a', { op: 'click', selector: '#nope', timeoutMs: 50 })).toMatchObject({
        status: 'timed_out',
        output: { tabId: 'tab_1' },
        error: { message: 'locator.click: Timeout 50ms exceeded.' },
      });
    });

    it('maps page failures to failed outcomes with their code', async () => {
      await run('a', nav());
      const page = pageOf('a');
      page.behaviour = async () => {
        throw new PageOperationError('selector', 'SELECTOR', 'strict mode violation: resolved to 2 elements');
      };
      expect(await run('a', { op: 'click', selector: 'a' })).toMatchObject({
        status: 'failed',
        error: { class: 'validation', code: 'SELECTOR' },
      });
      page.closed = true;
      page.behaviour = undefined;
      // A tab closed by the page itself: the next op just opens a new one.
      expect(await run('a', nav())).toMatchObject({ status: 'succeeded', output: { tabId: 'tab_2' } });
    });

    it('stops waiting when the action is aborted', async () => {
      await run('a', nav());
      pageOf('a').behaviour = () => new Promise(() => undefined);
      const ac = new AbortController();
      const pending = run('a', { op: 'hover', selector: 'x' }, ac.signal);
      const queued = run('a', { op: 'hover', selector: 'y' }, ac.signal);
      setTimeout(() => ac.abort(new Error('session ended')), 20);
      expect(await pending).toMatchObject({
        status: 'error',
        error: { code: 'ABORTED', message: expect.stringContaining('session ended') },
      });
      expect(await queued).toMatchObject({ status: 'error', error: { code: 'ABORTED' } });
    });
  });
});

/** The guard's answer for a request of `page` as the interceptor asks it: a top-level document unless told. */
function ask(
  ctx: FakeContext,
  url: string,
  page?: FakePage,
  kind: Partial<GuardedRequest> = {},
): Promise<string | undefined> {
  return ctx.spec.requestGuard({
    url,
    navigation: true,
    mainFrame: true,
    resourceType: 'document',
    page,
    ...kind,
  });
}

describe('capData', () => {
  it('caps long strings and big values at the byte limit, flagging truncated', () => {
    expect(capData({ content: 'abcdef', matches: 1 }, 4)).toEqual({
      content: 'abcd',
      contentBytes: 6,
      matches: 1,
      truncated: true,
    });
    expect(capData({ content: 'ééé' }, 3)).toMatchObject({ content: 'é', truncated: true });
    expect(capData({ value: { a: 'x'.repeat(10) } }, 5)).toMatchObject({
      value: '{"a":',
      valueBytes: 18,
      truncated: true,
    });
    expect(capData({ content: 'ok' }, 4)).toEqual({ content: 'ok' });
    expect(capData(undefined, 4)).toBeUndefined();
  });
});
