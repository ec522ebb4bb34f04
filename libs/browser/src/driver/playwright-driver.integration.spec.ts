import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { PageOperationError } from '../browser.errors';
import { resolveBrowserOptions } from '../browser.options';
import { EgressProxy, parseAllowlist, UrlPolicy } from '@switchyard/network';
import type { ContextSpec, DriverBrowser, DriverPage, GuardedRequest } from './browser-driver.port';
import { PlaywrightDriver } from './playwright-driver';

/** The Playwright adapter against the real Chromium, every request through a real egress proxy. */
describe('PlaywrightDriver (real Chromium)', () => {
  jest.setTimeout(30_000);
  let tmp: string;
  let server: http.Server;
  let base: string;
  const hits: string[] = [];
  let proxy: EgressProxy;
  let driver: PlaywrightDriver;
  let browser: DriverBrowser;
  const guarded: GuardedRequest[] = [];
  const denialHeader = 'x-switchyard-egress-it';

  const spec = (acceptDownloads = false): ContextSpec => ({
    proxyServer: proxy.url,
    egressDenialHeader: denialHeader,
    acceptDownloads,
    requestGuard: async (r) => {
      guarded.push(r);
      return r.url.includes('/forbidden') ? 'forbidden by the test guard' : undefined;
    },
  });

  beforeAll(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sy-driver-'));
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      const page = (body: string) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(`<!doctype html><html><head><title>T ${req.url}</title></head><body>${body}</body></html>`);
      };
      if (req.url === '/file.txt') {
        res.writeHead(200, {
          'content-type': 'text/plain',
          'content-disposition': 'attachment; filename="f.txt"',
        });
        return res.end('file body');
      }
      if (req.url === '/hop') {
        res.writeHead(302, { location: 'http://127.0.0.1:8080/secret' });
        return res.end();
      }
      page(
        '<h1>Hi</h1><p class="p">one</p><p class="p">two</p><a href="/a">A</a><a id="dl" href="/file.txt">dl</a>' +
          '<img src="/forbidden.png"><input id="in"><button onclick="document.title=\'clicked\'">b</button>',
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
    base = `http://127.0.0.2:${(server.address() as AddressInfo).port}`;
    const policy = new UrlPolicy({ allowlist: parseAllowlist(['127.0.0.2']) });
    proxy = await EgressProxy.start({ checkHost: (h) => policy.checkHost(h), denialHeader });
    driver = new PlaywrightDriver(resolveBrowserOptions({ stateDir: tmp }));
    expect(await driver.probe()).toEqual({ available: true });
    browser = await driver.launchShared('it-shared');
  });
  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await new Promise((r) => server.close(r));
    rmSync(tmp, { recursive: true, force: true });
  });

  it('reports a missing executable without launching', async () => {
    const none = new PlaywrightDriver(
      resolveBrowserOptions({ stateDir: tmp, executablePath: '/nonexistent/chromium' }),
    );
    expect(await none.probe()).toMatchObject({
      available: false,
      reason: expect.stringContaining('/nonexistent/chromium'),
    });
  });

  it('knows the browser process, whose environment holds none of the engine variables', () => {
    const pid = browser.pid()!;
    expect(pid).toBeGreaterThan(0);
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain('--switchyard-browser=it-shared');
    const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    expect(env).toContain(`HOME=${path.join(tmp, 'home')}`);
    expect(env.some((e) => e.startsWith('JEST_WORKER_ID='))).toBe(false);
  });

  describe('a shared context', () => {
    let page: DriverPage;
    beforeAll(async () => {
      const ctx = await browser.newContext(spec());
      page = await ctx.newPage();
    });

    it('navigates through the proxy and the guard, and aborts what the guard refuses', async () => {
      const r = await page.perform({ op: 'navigate', url: `${base}/`, waitUntil: 'load' }, 10_000);
      expect(r).toEqual({ status: 200, egressDenied: false });
      expect(page.status()).toBe(200);
      expect(await page.title(1000)).toBe('T /');
      expect(guarded).toContainEqual({
        url: `${base}/`,
        navigation: true,
        mainFrame: true,
        resourceType: 'document',
        page,
      });
      expect(guarded).toContainEqual(
        expect.objectContaining({ url: `${base}/forbidden.png`, navigation: false, page }),
      );
      expect(hits).not.toContain('/forbidden.png');
    });

    it('extracts text, html, links and an accessibility snapshot', async () => {
      expect(
        (await page.perform({ op: 'extract', mode: 'text', selector: '.p', maxItems: 10 }, 5000)).data,
      ).toEqual({
        content: 'one\ntwo',
        matches: 2,
      });
      expect(
        (await page.perform({ op: 'extract', mode: 'html', selector: 'h1', maxItems: 10 }, 5000)).data,
      ).toEqual({
        content: '<h1>Hi</h1>',
        matches: 1,
      });
      const links = await page.perform({ op: 'extract', mode: 'links', maxItems: 1 }, 5000);
      expect(links.data).toEqual({ links: [{ text: 'A', href: `${base}/a` }], total: 2 });
      const a11y = await page.perform({ op: 'extract', mode: 'accessibility', maxItems: 10 }, 5000);
      expect(a11y.data?.content).toContain('heading "Hi"');
    });

    it('fills, clicks, evaluates and takes screenshots', async () => {
      await page.perform({ op: 'fill', selector: '#in', value: 'typed' }, 5000);
      await page.perform({ op: 'click', selector: 'button' }, 5000);
      expect(await page.title(1000)).toBe('clicked');
      expect(
        (await page.perform({ op: 'evaluate', script: 'document.querySelector("#in").value' }, 5000)).data,
      ).toEqual({
        value: 'typed',
      });
      expect((await page.perform({ op: 'evaluate', script: 'const x = 2; x * 21' }, 5000)).data).toEqual({
        value: 42,
      });
      expect((await page.perform({ op: 'evaluate', script: '() => location.pathname' }, 5000)).data).toEqual({
        value: '/',
      });
      const shot = await page.perform({ op: 'screenshot', fullPage: false }, 5000);
      expect(shot.bytes!.subarray(1, 4).toString()).toBe('PNG');
      const pdf = await page.perform({ op: 'pdf' }, 5000);
      expect(pdf.bytes!.subarray(0, 5).toString()).toBe('%PDF-');
    });

    it('turns Playwright errors into page operation errors', async () => {
      const failure = async (p: Promise<unknown>) => {
        try {
          await p;
        } catch (err) {
          if (err instanceof PageOperationError) return [err.failure, err.code, err.message];
          throw err;
        }
        throw new Error('expected a failure');
      };
      expect(await failure(page.perform({ op: 'click', selector: '#missing' }, 200))).toEqual([
        'timeout',
        'TIMEOUT',
        'locator.click: Timeout 200ms exceeded.',
      ]);
      const strict = await failure(page.perform({ op: 'click', selector: 'a' }, 1000));
      expect(strict.slice(0, 2)).toEqual(['selector', 'SELECTOR']);
      expect(strict[2]).toContain('strict mode violation');
      const thrown = await failure(page.perform({ op: 'evaluate', script: 'throw new Error("boom")' }, 1000));
      expect(thrown.slice(0, 2)).toEqual(['script', 'SCRIPT_ERROR']);
      expect(thrown[2]).toContain('boom');
      const unsafe = await failure(
        page.perform({ op: 'navigate', url: 'http://127.0.0.2:1/', waitUntil: 'load' }, 5000),
      );
      expect(unsafe.slice(0, 2)).toEqual(['navigation', 'ERR_UNSAFE_PORT']);
    });

    it('marks a redirect hop refused by the egress proxy, and shows the hop to the guard', async () => {
      const r = await page.perform({ op: 'navigate', url: `${base}/hop`, waitUntil: 'load' }, 10_000);
      expect(r).toEqual({ status: 403, egressDenied: true });
      expect(page.url()).toBe('http://127.0.0.1:8080/secret');
      expect(guarded).toContainEqual({
        url: 'http://127.0.0.1:8080/secret',
        navigation: true,
        mainFrame: true,
        resourceType: 'document',
        page,
      });
    });

    it('tells a tab that never loaded a page from one that did, or that a script wrote', async () => {
      const fresh = await (await browser.newContext(spec())).newPage();
      expect(fresh.url()).toBe('about:blank');
      expect(await fresh.blank(1000)).toBe(true);
      await fresh.perform({ op: 'evaluate', script: 'document.body.innerHTML = "<input id=x>"' }, 1000);
      expect(await fresh.blank(1000)).toBe(false);
      expect(await page.blank(1000)).toBe(false);
    });

    it('stops an operation when its signal fires, rejecting with the reason', async () => {
      const ac = new AbortController();
      const reason = new Error('stopped by the test');
      const started = Date.now();
      setTimeout(() => ac.abort(reason), 100);
      const waiting = page.perform({ op: 'wait_for', selector: '#never' }, 10_000, ac.signal);
      await expect(waiting).rejects.toBe(reason);
      expect(Date.now() - started).toBeLessThan(3000);
    });
  });

  it('downloads in a dedicated (persistent) browser, and notices when it dies', async () => {
    const ctx = await driver.launchDedicated({
      ...spec(true),
      label: 'it-dedicated',
      userDataDir: path.join(tmp, 'profile'),
      downloadsDir: path.join(tmp, 'downloads'),
    });
    const [page] = ctx.pages();
    await page.perform({ op: 'navigate', url: `${base}/`, waitUntil: 'load' }, 10_000);
    const dl = await page.perform({ op: 'download', selector: '#dl', maxBytes: 1000 }, 10_000);
    expect(dl).toMatchObject({ suggestedName: 'f.txt', data: { url: `${base}/file.txt` } });
    expect(dl.bytes!.toString()).toBe('file body');
    const small = page.perform({ op: 'download', selector: '#dl', maxBytes: 4 }, 10_000);
    await expect(small).rejects.toMatchObject({ failure: 'limit', code: 'FILE_TOO_LARGE' });
    // A download that never starts is no longer waited for once the signal fires.
    const ac = new AbortController();
    setTimeout(() => ac.abort('no download coming'), 100);
    const started = Date.now();
    const never = page.perform({ op: 'download', selector: 'button', maxBytes: 1000 }, 10_000, ac.signal);
    await expect(never).rejects.toBe('no download coming');
    expect(Date.now() - started).toBeLessThan(3000);

    const pid = ctx.pid()!;
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain('--switchyard-browser=it-dedicated');
    const closed = new Promise<void>((resolve) => ctx.onClose(resolve));
    process.kill(pid, 'SIGKILL');
    await closed;
    await expect(page.perform({ op: 'extract', mode: 'text', maxItems: 1 }, 1000)).rejects.toMatchObject({
      failure: 'closed',
    });
  });

  it('notices when the shared browser is killed', async () => {
    const other = await driver.launchShared('it-victim');
    const gone = new Promise<void>((resolve) => other.onDisconnected(resolve));
    process.kill(other.pid()!, 'SIGKILL');
    await gone;
    expect(other.isConnected()).toBe(false);
  });
});
