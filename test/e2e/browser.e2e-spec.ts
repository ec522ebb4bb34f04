import { BrowserRouter } from '@switchyard/browser';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { BrowserSite } from '../support/browser-site';
import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

/**
 * The browser tier through the REST API, against real Chromium. Pages come from a server on 127.0.0.2;
 * the engine allowlists exactly that address, so every other loopback address stays refused, and localhost
 * (`127.0.0.1`, `[::1]`… in any spelling) is the session's own sandbox, never this host (browser-local-app
 * drives a server there).
 */
// Chromium starts, relaunches and times out in these tests: more than Jest's default 5 s per test.
jest.setTimeout(30_000);

describe('browser actions (real Chromium)', () => {
  let engine: EngineHarness;
  let site: BrowserSite;
  let sid: string;
  const browse = (session: string, body: Record<string, unknown>): Promise<any> =>
    engine.action(session, { type: 'browser', ...body });
  const raw = (session: string, body: Record<string, unknown>) =>
    engine.request('POST', `/v1/sessions/${session}/actions`, { type: 'browser', ...body });

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    engine = await EngineHarness.start({
      SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2',
      SWITCHYARD_BROWSER_EVALUATE: 'true',
      SWITCHYARD_BROWSER_TIMEOUT_MS: '15000',
    });
    sid = await engine.createSession();
  });
  afterAll(async () => {
    await engine?.stop();
    await site?.stop();
  });

  it('reports the browser tier in /health and documents every op in OpenAPI', async () => {
    const h = await engine.request('GET', '/health');
    expect(h.body.tiers.browser).toMatchObject({ available: true, maxContexts: 16 });
    const doc = (await engine.request('GET', '/docs-json')).body;
    const body =
      doc.paths['/v1/sessions/{sessionId}/actions'].post.requestBody.content['application/json'].schema;
    const refs: string[] = body.oneOf.map((r: { $ref: string }) => r.$ref.split('/').pop());
    expect(refs).toEqual(
      expect.arrayContaining(['BrowserNavigateDto', 'BrowserExtractDto', 'BrowserCloseTabDto']),
    );
    const navigate = doc.components.schemas.BrowserNavigateDto;
    expect(navigate.required).toEqual(expect.arrayContaining(['type', 'op', 'url']));
    // Optional, so null (absent) is one of its values too.
    expect(navigate.properties.waitUntil.enum).toEqual([
      'load',
      'domcontentloaded',
      'networkidle',
      'commit',
      null,
    ]);
    expect(doc.components.schemas.BrowserScreenshotDto.required).toEqual(expect.arrayContaining(['path']));
  });

  it('navigates and extracts text, links, html and an accessibility snapshot', async () => {
    const nav = await browse(sid, { op: 'navigate', url: site.url('/') });
    expect(nav).toMatchObject({ type: 'browser', tier: 'browser', status: 'succeeded' });
    expect(nav.output).toMatchObject({
      url: site.url('/'),
      title: 'Switchyard test home',
      status: 200,
      tabId: 'tab_1',
      route: 'shared',
    });

    const text = await browse(sid, { op: 'extract', mode: 'text' });
    expect(text.status).toBe('succeeded');
    expect(text.output.data.content).toContain('Welcome home');
    expect(text.output.data.content).toContain('served on loopback');

    const links = await browse(sid, { op: 'extract', mode: 'links' });
    expect(links.output.data.links).toEqual([
      { text: 'The form', href: site.url('/form') },
      { text: 'Cookies', href: site.url('/cookie/show') },
      { text: 'Away', href: 'https://example.invalid/away' },
    ]);

    const html = await browse(sid, { op: 'extract', mode: 'html', selector: '#intro' });
    expect(html.output.data.content).toBe(
      '<p id="intro">This page is served on loopback for the browser tests.</p>',
    );

    const a11y = await browse(sid, { op: 'extract', mode: 'accessibility' });
    expect(a11y.output.data.content).toContain('heading "Welcome home"');
    expect(a11y.output.data.content).toContain('link "The form"');
  });

  it('fills and submits a form, and reads the result back', async () => {
    const s = await engine.createSession();
    expect((await browse(s, { op: 'navigate', url: site.url('/form') })).status).toBe('succeeded');
    expect((await browse(s, { op: 'fill', selector: '#name', value: 'Ada Lovelace' })).status).toBe(
      'succeeded',
    );
    const sel = await browse(s, { op: 'select', selector: '#color', values: ['blue'] });
    expect(sel.output.data.selected).toEqual(['blue']);
    expect((await browse(s, { op: 'check', selector: '#agree' })).status).toBe('succeeded');
    expect((await browse(s, { op: 'type', selector: '#note', text: 'hi there' })).status).toBe('succeeded');
    expect((await browse(s, { op: 'hover', selector: '#go' })).status).toBe('succeeded');
    expect((await browse(s, { op: 'click', selector: '#go' })).status).toBe('succeeded');
    const waited = await browse(s, { op: 'wait_for', url: '**/submit?*' });
    expect(waited.status).toBe('succeeded');
    expect(waited.output.title).toBe('Submitted');
    const result = await browse(s, { op: 'extract', mode: 'text', selector: '#result' });
    expect(result.output.data.content).toBe('name=Ada Lovelace;color=blue;agree=yes;note=hi there');

    await browse(s, { op: 'back' });
    const back = await browse(s, { op: 'wait_for', selector: '#name' });
    expect(back.output.title).toBe('Form');
    const fwd = await browse(s, { op: 'forward' });
    expect(fwd.output.title).toBe('Submitted');
    const reload = await browse(s, { op: 'reload' });
    expect(reload.output).toMatchObject({ title: 'Submitted', status: 200 });
    const enter = await browse(s, { op: 'press', key: 'Enter' });
    expect(enter.status).toBe('succeeded');
  });

  it('saves screenshots and PDFs in the workspace: file API, code tier and graph all see them', async () => {
    const s = await engine.createSession();
    await browse(s, { op: 'navigate', url: site.url('/') });
    const shot = await browse(s, { op: 'screenshot', path: 'shots/home.png', fullPage: true });
    expect(shot.status).toBe('succeeded');
    expect(shot.output.artifacts).toEqual([
      { path: 'shots/home.png', bytes: expect.any(Number), mimeType: 'image/png' },
    ]);
    const el = await browse(s, { op: 'screenshot', path: 'intro.png', selector: '#intro' });
    expect(el.status).toBe('succeeded');
    const pdf = await browse(s, { op: 'pdf', path: 'page.pdf' });
    expect(pdf.output.artifacts[0]).toMatchObject({ path: 'page.pdf', mimeType: 'application/pdf' });

    const onDisk = readFileSync(path.join(engine.workspaceOf(s), 'shots/home.png'));
    expect(onDisk.subarray(1, 4).toString()).toBe('PNG');
    expect(onDisk.length).toBe(shot.output.artifacts[0].bytes);

    const read = await engine.action(s, { type: 'file', op: 'read', path: 'shots/home.png' });
    expect(read.output.encoding).toBe('base64');
    expect(Buffer.from(read.output.content, 'base64').equals(onDisk)).toBe(true);

    const code = await engine.action(s, {
      type: 'code',
      language: 'python',
      code: "import os\nprint(os.path.getsize('shots/home.png'), open('page.pdf','rb').read(5))",
    });
    expect(code).toMatchObject({ status: 'succeeded', stdout: `${onDisk.length} b'%PDF-'\n` });
    // The code tier may also replace what the browser wrote: the files belong to the sandbox user.
    const rm = await engine.action(s, { type: 'code', language: 'bash', code: 'rm intro.png && echo gone' });
    expect(rm.stdout).toBe('gone\n');

    const g = (await engine.request('GET', `/v1/sessions/${s}/graph`)).body;
    const wrote = (actionId: string, file: string) =>
      g.edges.some(
        (e: { from: string; to: string; type: string }) =>
          e.from === actionId && e.to === `file:${s}:${file}` && e.type === 'WROTE',
      );
    expect(wrote(shot.id, 'shots/home.png')).toBe(true);
    expect(wrote(pdf.id, 'page.pdf')).toBe(true);
  });

  it('downloads into the workspace and uploads from it, in a dedicated browser', async () => {
    const s = await engine.createSession();
    await browse(s, { op: 'navigate', url: site.url('/cookie/set?v=carried') });
    expect((await browse(s, { op: 'navigate', url: site.url('/download') })).output.route).toBe('shared');

    const dl = await browse(s, { op: 'download', selector: '#get', path: 'downloads/' });
    expect(dl.status).toBe('succeeded');
    expect(dl.output.route).toBe('dedicated');
    expect(dl.output.artifacts).toEqual([
      { path: 'downloads/report.csv', bytes: 24, mimeType: 'application/octet-stream' },
    ]);
    expect(readFileSync(path.join(engine.workspaceOf(s), 'downloads/report.csv'), 'utf8')).toBe(
      'id,value\n1,alpha\n2,beta\n',
    );
    const viaApi = await engine.action(s, { type: 'file', op: 'read', path: 'downloads/report.csv' });
    expect(viaApi.output.content).toBe('id,value\n1,alpha\n2,beta\n');
    const viaCode = await engine.action(s, {
      type: 'code',
      language: 'bash',
      code: 'wc -l < downloads/report.csv',
    });
    expect(viaCode.stdout).toBe('3\n');

    // Cookies came along to the dedicated browser.
    await browse(s, { op: 'navigate', url: site.url('/cookie/show') });
    const cookies = await browse(s, { op: 'extract', mode: 'text', selector: '#cookies' });
    expect(cookies.output.data.content).toBe('[flavor=carried]');

    await engine.action(s, { type: 'file', op: 'write', path: 'in/hello.txt', content: 'hello upload' });
    await browse(s, { op: 'navigate', url: site.url('/upload') });
    const up = await browse(s, { op: 'upload', selector: '#file', path: 'in/hello.txt' });
    expect(up.status).toBe('succeeded');
    expect(up.output.data).toMatchObject({ uploaded: 'hello.txt', bytes: 12 });
    const got = await browse(s, { op: 'wait_for', text: 'hello.txt:12:hello upload' });
    expect(got.status).toBe('succeeded');

    const g = (await engine.request('GET', `/v1/sessions/${s}/graph`)).body;
    const edge = (from: string, file: string, type: string) =>
      g.edges.some(
        (e: { from: string; to: string; type: string }) =>
          e.from === from && e.to === `file:${s}:${file}` && e.type === type,
      );
    expect(edge(dl.id, 'downloads/report.csv', 'WROTE')).toBe(true);
    expect(edge(up.id, 'in/hello.txt', 'READ')).toBe(true);

    // Deleting the session closes its dedicated browser.
    const pid = engine.app.get(BrowserRouter).processIds().dedicated[s];
    expect(pid).toBeGreaterThan(0);
    expect((await engine.request('DELETE', `/v1/sessions/${s}`)).status).toBe(204);
    await engine.tornDown();
    expect(engine.app.get(BrowserRouter).processIds().dedicated[s]).toBeUndefined();
    expect(processAlive(pid)).toBe(false);
  });

  it('shows a person the current tab as a JPEG with its URL and title, without recording or opening anything', async () => {
    const s = await engine.createSession();
    // No browser yet: the look never opens one.
    const none = await engine.request('GET', `/v1/sessions/${s}/browser/view`);
    expect(none.status).toBe(404);
    expect(none.body.error.code).toBe('NO_BROWSER');
    expect((await browse(s, { op: 'navigate', url: site.url('/form') })).status).toBe('succeeded');
    const actionsBefore = (await engine.request('GET', `/v1/sessions/${s}/actions`)).body.actions.length;
    const res = await fetch(`${engine.baseUrl}/v1/sessions/${s}/browser/view`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    expect(decodeURIComponent(res.headers.get('x-switchyard-page-url')!)).toBe(site.url('/form'));
    expect(decodeURIComponent(res.headers.get('x-switchyard-page-title')!)).toBe('Form');
    expect(res.headers.get('x-switchyard-tab')).toBe('tab_1');
    const jpeg = Buffer.from(await res.arrayBuffer());
    expect([...jpeg.subarray(0, 3)]).toEqual([0xff, 0xd8, 0xff]);
    expect(jpeg.length).toBeGreaterThan(1000);
    // Not an action: the session's record is as it was.
    const actionsAfter = (await engine.request('GET', `/v1/sessions/${s}/actions`)).body.actions.length;
    expect(actionsAfter).toBe(actionsBefore);
    // Another session's browser is not this one's: still none there.
    const other = await engine.createSession();
    expect((await engine.request('GET', `/v1/sessions/${other}/browser/view`)).status).toBe(404);
  });

  it("keeps two sessions' cookies apart", async () => {
    const a = await engine.createSession();
    const b = await engine.createSession();
    await browse(a, { op: 'navigate', url: site.url('/cookie/set?v=apple') });
    await browse(b, { op: 'navigate', url: site.url('/cookie/set?v=banana') });
    await browse(a, { op: 'navigate', url: site.url('/cookie/show') });
    await browse(b, { op: 'navigate', url: site.url('/cookie/show') });
    const ca = await browse(a, { op: 'extract', mode: 'text', selector: '#cookies' });
    const cb = await browse(b, { op: 'extract', mode: 'text', selector: '#cookies' });
    expect(ca.output.data.content).toBe('[flavor=apple]');
    expect(cb.output.data.content).toBe('[flavor=banana]');
    const fresh = await engine.createSession();
    await browse(fresh, { op: 'navigate', url: site.url('/cookie/show') });
    expect(
      (await browse(fresh, { op: 'extract', mode: 'text', selector: '#cookies' })).output.data.content,
    ).toBe('[]');
  });

  it('manages tabs by id', async () => {
    const s = await engine.createSession();
    await browse(s, { op: 'navigate', url: site.url('/') });
    const t2 = await browse(s, { op: 'new_tab', url: site.url('/form') });
    expect(t2.output).toMatchObject({ tabId: 'tab_2', title: 'Form' });
    expect(t2.output.data.tabs.map((t: { id: string }) => t.id)).toEqual(['tab_1', 'tab_2']);
    const sw = await browse(s, { op: 'switch_tab', tabId: 'tab_1' });
    expect(sw.output).toMatchObject({ tabId: 'tab_1', title: 'Switchyard test home' });
    expect((await browse(s, { op: 'extract', mode: 'text', selector: 'h1' })).output.data.content).toBe(
      'Welcome home',
    );
    const closed = await browse(s, { op: 'close_tab', tabId: 'tab_1' });
    expect(closed.output).toMatchObject({ tabId: 'tab_2', data: { closed: 'tab_1' } });
    const missing = await browse(s, { op: 'switch_tab', tabId: 'tab_1' });
    expect(missing).toMatchObject({ status: 'failed', error: { code: 'TAB_NOT_FOUND' } });
  });

  it('refuses SSRF targets before connecting, recording each as denied with the reason', async () => {
    const s = await engine.createSession();
    const p = site.port;
    const refused: [string, string][] = [
      [`http://127.0.0.3:${p}/`, 'loopback'],
      [`http://0x7f000003:${p}/`, 'loopback'],
      [`http://[::ffff:127.0.0.3]:${p}/`, 'loopback'],
      [`http://[64:ff9b::7f00:1]:${p}/`, 'loopback'],
      // This machine on a port the session's sandbox may not open (SWITCHYARD_PORTS_ALLOWED: 1024-65535).
      ['http://127.0.0.1:22/', 'loopback'],
      ['http://localhost/', 'loopback'],
      ['http://169.254.169.254/latest/meta-data/', 'link-local'],
      ['http://[::ffff:a9fe:a9fe]/latest/meta-data/', 'link-local'],
      ['http://[::ffff:169.254.169.254]/', 'link-local'],
      ['http://2852039166/', 'link-local'],
      ['http://0xa9fea9fe/', 'link-local'],
      ['http://[64:ff9b::a9fe:a9fe]/', 'link-local'],
      ['http://10.0.0.1/', 'private'],
      ['http://192.168.1.1/', 'private'],
      ['http://100.64.0.1/', 'carrier-grade NAT'],
      ['http://0.0.0.0/', 'unspecified'],
      ['http://[fd00::1]/', 'unique-local'],
      ['http://[fe80::1]/', 'link-local'],
    ];
    for (const [url, why] of refused) {
      const r = await browse(s, { op: 'navigate', url });
      expect({ url, status: r.status, code: r.error?.code }).toEqual({
        url,
        status: 'denied',
        code: 'ADDRESS_REFUSED',
      });
      expect(r.error).toMatchObject({ class: 'policy' });
      expect(r.error.message).toContain(why);
      expect(r.error.message).toContain('SWITCHYARD_BROWSER_ALLOWLIST');
    }
    // This machine, however it is spelled, is the session's own sandbox: not the site on this host. The session has
    // no sandbox running, so nothing listens there.
    const own = [
      `http://127.1:${p}/`,
      `http://2130706433:${p}/`,
      `http://0x7f000001:${p}/`,
      `http://0177.0.0.1:${p}/`,
      `http://127.0.0.1:${p}/`,
      `http://[::1]:${p}/`,
      `http://[::ffff:127.0.0.1]:${p}/`,
      `http://localhost:${p}/`,
      `http://LOCALHOST.:${p}/`,
      `http://sub.localhost:${p}/`,
    ];
    const hitsBefore = site.hits.length;
    for (const url of own) {
      const r = await browse(s, { op: 'navigate', url });
      expect({ url, status: r.status, code: r.error?.code }).toEqual({
        url,
        status: 'failed',
        code: 'PORT_CLOSED',
      });
      expect(r.error.message).toContain("localhost is this session's own sandbox");
    }
    expect(site.hits.length).toBe(hitsBefore);
    // The allowlisted address is allowed however it is spelled, IPv4-mapped included.
    const mapped = await browse(s, { op: 'navigate', url: `http://[::ffff:7f00:2]:${p}/` });
    expect(mapped).toMatchObject({ status: 'succeeded', output: { title: 'Switchyard test home' } });
    // Nothing reached the site through any of its other spellings.
    expect(site.hits.slice(hitsBefore)).toEqual(['/']);
    expect(site.hits).not.toContain('/latest/meta-data/');
    const timeline = (await engine.request('GET', `/v1/sessions/${s}/actions?limit=100`)).body.actions;
    expect(timeline).toHaveLength(refused.length + own.length + 1);
    expect(timeline.filter((a: { status: string }) => a.status === 'denied')).toHaveLength(refused.length);
  });

  it('refuses a redirect from the allowed host to a refused one, over http and https', async () => {
    const s = await engine.createSession();
    const to = (target: string) => site.url(`/redirect?to=${encodeURIComponent(target)}`);
    const cases = [
      `http://127.0.0.3:${site.port}/secret`,
      'http://169.254.169.254/latest/meta-data/',
      `https://127.0.0.3:${site.port}/x`,
    ];
    for (const target of cases) {
      const r = await browse(s, { op: 'navigate', url: to(target) });
      expect({ target, status: r.status, class: r.error?.class }).toEqual({
        target,
        status: 'denied',
        class: 'policy',
      });
      expect(r.error.message).toMatch(/loopback|link-local/);
    }
    expect(site.hits.filter((h) => h.startsWith('/redirect'))).toHaveLength(cases.length);
    expect(site.hits).not.toContain('/secret');
    // The session is fine afterwards.
    expect((await browse(s, { op: 'navigate', url: site.url('/') })).status).toBe('succeeded');
  });

  it('ends a download whose own request is refused at once, denied naming the URL and the rule', async () => {
    const s = await engine.createSession();
    const report = `/files/report.csv?refused`;
    const cases: { href: string; refused: string; why: string }[] = [
      {
        href: 'http://169.254.169.254/latest/meta-data/',
        refused: 'http://169.254.169.254/latest/meta-data/',
        why: 'link-local',
      },
      // 127.0.0.3 is not on the allowlist, even with the site's own port.
      {
        href: `http://127.0.0.3:${site.port}${report}`,
        refused: `http://127.0.0.3:${site.port}${report}`,
        why: 'loopback',
      },
      // A redirect hop from the allowed host: Chromium follows it unasked, the egress proxy refuses it.
      {
        href: site.url(`/redirect?to=${encodeURIComponent(`http://0x7f000003:${site.port}${report}`)}`),
        refused: `http://127.0.0.3:${site.port}${report}`,
        why: 'loopback',
      },
    ];
    for (const { href, refused, why } of cases) {
      // A dedicated browser from the start, so the link rewritten below is on the page the download uses.
      await browse(s, { op: 'navigate', url: site.url('/download'), needsFileAccess: true });
      await browse(s, {
        op: 'evaluate',
        script: `document.getElementById("get").href = ${JSON.stringify(href)}`,
      });
      const started = Date.now();
      const r = await browse(s, { op: 'download', selector: '#get', path: 'downloads/', timeoutMs: 30_000 });
      const took = Date.now() - started;
      expect({ href, status: r.status, class: r.error?.class, code: r.error?.code }).toEqual({
        href,
        status: 'denied',
        class: 'policy',
        code: 'ADDRESS_REFUSED',
      });
      expect(took).toBeLessThan(5000);
      expect(r.error.message).toMatch(/^refused /);
      expect(r.error.message).toContain(`refused ${refused}: `);
      expect(r.error.message).toContain(why);
      expect(r.error.message).toContain('SWITCHYARD_BROWSER_ALLOWLIST');
      expect(r.output.blocked).toContainEqual({ url: refused, reason: expect.stringContaining(why) });
    }
    expect(site.hits).not.toContain(report);
    expect(existsSync(path.join(engine.workspaceOf(s), 'downloads'))).toBe(false);
    // The session still downloads what it may.
    await browse(s, { op: 'navigate', url: site.url('/download') });
    const ok = await browse(s, { op: 'download', selector: '#get', path: 'downloads/' });
    expect(ok).toMatchObject({
      status: 'succeeded',
      output: { artifacts: [{ path: 'downloads/report.csv' }] },
    });
  });

  it('ends a navigation, new tab or click whose document is refused after a redirect at once, denied', async () => {
    const s = await engine.createSession();
    const metadata = 'http://169.254.169.254/latest/meta-data/';
    const tunnel = `https://127.0.0.3:${site.port}/x`;
    const via = (target: string) => site.url(`/redirect?to=${encodeURIComponent(target)}`);
    const cases: { body: Record<string, unknown>; refused: string; before?: string }[] = [
      { body: { op: 'navigate', url: via(metadata) }, refused: metadata },
      { body: { op: 'navigate', url: via(tunnel) }, refused: tunnel },
      { body: { op: 'new_tab', url: via(metadata) }, refused: metadata },
      { body: { op: 'click', selector: '#get' }, refused: metadata, before: via(metadata) },
      { body: { op: 'click', selector: '#get' }, refused: metadata, before: metadata },
    ];
    for (const { body, refused, before } of cases) {
      if (before !== undefined) {
        await browse(s, { op: 'navigate', url: site.url('/download') });
        await browse(s, {
          op: 'evaluate',
          script: `document.getElementById("get").href = ${JSON.stringify(before)}`,
        });
      }
      const started = Date.now();
      const r = await browse(s, { ...body, timeoutMs: 30_000 });
      const took = Date.now() - started;
      expect({ body, status: r.status, code: r.error?.code }).toEqual({
        body,
        status: 'denied',
        code: 'ADDRESS_REFUSED',
      });
      expect(took).toBeLessThan(5000);
      expect(r.error.message).toContain(`refused ${refused}: `);
      expect(r.error.message).toMatch(/^refused .*(loopback|link-local)/);
      expect(r.output.blocked).toContainEqual({ url: refused, reason: expect.any(String) });
    }
    expect((await browse(s, { op: 'navigate', url: site.url('/') })).status).toBe('succeeded');
  });

  it('fails selector ops on a tab that never loaded a page at once, saying to navigate first', async () => {
    const s = await engine.createSession();
    const ops: Record<string, unknown>[] = [
      { op: 'click', selector: '#go' },
      { op: 'fill', selector: '#name', value: 'x' },
      { op: 'wait_for', selector: '#go' },
      { op: 'download', selector: '#get', path: 'downloads/' },
    ];
    for (const body of ops) {
      const started = Date.now();
      const r = await browse(s, { ...body, timeoutMs: 30_000 });
      expect(Date.now() - started).toBeLessThan(5000);
      expect(r).toMatchObject({
        status: 'failed',
        error: {
          class: 'validation',
          code: 'PAGE_NOT_LOADED',
          message: `${String(body.op)} needs a page, but the tab has no page loaded (about:blank): navigate first`,
        },
        output: { url: 'about:blank' },
      });
    }
    // A new blank tab is no different; once a script has written into it, it is a page.
    expect((await browse(s, { op: 'new_tab' })).output.tabId).toBe('tab_2');
    expect(await browse(s, { op: 'hover', selector: 'body', timeoutMs: 30_000 })).toMatchObject({
      status: 'failed',
      error: { code: 'PAGE_NOT_LOADED' },
    });
    await browse(s, { op: 'evaluate', script: 'document.body.innerHTML = "<button id=b>b</button>"' });
    expect(await browse(s, { op: 'click', selector: '#b' })).toMatchObject({ status: 'succeeded' });
  });

  it('blocks refused subresources, websockets and service workers while the page still loads', async () => {
    const s = await engine.createSession();
    const img = await browse(s, {
      op: 'navigate',
      url: site.url(`/subresource?src=${encodeURIComponent('http://169.254.169.254/pixel.png')}`),
    });
    expect(img.status).toBe('succeeded');
    expect(img.output.blocked).toEqual([
      { url: 'http://169.254.169.254/pixel.png', reason: expect.stringContaining('link-local') },
    ]);

    const ws = site.url(
      `/ws?to=${encodeURIComponent(`ws://127.0.0.2:${site.port}/ok`)}&to=${encodeURIComponent(`ws://127.0.0.3:${site.port}/nope`)}`,
    );
    await browse(s, { op: 'navigate', url: ws });
    const report = await browse(s, { op: 'wait_for', text: '1=error' });
    expect(report.status).toBe('succeeded');
    expect((await browse(s, { op: 'extract', mode: 'text', selector: '#ws' })).output.data.content).toBe(
      '0=open 1=error',
    );
    expect(site.hits).toContain('WS /ok');
    expect(site.hits).not.toContain('WS /nope');

    await browse(s, { op: 'navigate', url: site.url('/sw') });
    await browse(s, { op: 'wait_for', text: 'registrations=0' });
    expect(site.hits).not.toContain('/sw.js');
  });

  it('refuses file:, view-source:, chrome:, data: and javascript: URLs in any spelling', async () => {
    const s = await engine.createSession();
    const urls = [
      'file:///etc/passwd',
      'FILE:///etc/passwd',
      '  file:///etc/passwd',
      '\tfile:///etc/passwd',
      'fi\nle:///etc/passwd',
      'File://localhost/etc/passwd',
      'view-source:http://127.0.0.2/',
      'VIEW-SOURCE:file:///etc/passwd',
      'chrome://settings',
      'Chrome://version',
      'data:text/html,<h1>hi</h1>',
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      ' javascript:alert(1)',
    ];
    for (const url of urls) {
      const r = await browse(s, { op: 'navigate', url });
      expect({ url, status: r.status, code: r.error?.code }).toEqual({
        url,
        status: 'denied',
        code: 'URL_SCHEME',
      });
    }
    const tab = await browse(s, { op: 'new_tab', url: 'file:///etc/passwd' });
    expect(tab).toMatchObject({ status: 'denied', error: { code: 'URL_SCHEME' } });
    // A URL that does not parse is no policy matter: the action fails, recorded, as a DNS failure would.
    const bad = await browse(s, { op: 'navigate', url: 'not a url' });
    expect(bad).toMatchObject({
      status: 'failed',
      error: { class: 'validation', code: 'URL_INVALID', message: 'not an absolute URL: not a url' },
    });
  });

  it('times out a navigation without wedging the session', async () => {
    const s = await engine.createSession();
    const t0 = Date.now();
    const r = await browse(s, { op: 'navigate', url: site.url('/hang'), timeoutMs: 1500 });
    expect(r).toMatchObject({ status: 'timed_out', error: { class: 'timeout', code: 'TIMEOUT' } });
    expect(Date.now() - t0).toBeLessThan(6000);
    const next = await browse(s, { op: 'navigate', url: site.url('/') });
    expect(next).toMatchObject({ status: 'succeeded', output: { title: 'Switchyard test home' } });
    const busy = await browse(s, { op: 'evaluate', script: 'while (true) {}', timeoutMs: 1000 });
    expect(busy).toMatchObject({ status: 'timed_out', error: { class: 'timeout' } });
    expect(busy.error.message).toContain('closed');
    const after = await browse(s, { op: 'navigate', url: site.url('/form') });
    expect(after).toMatchObject({ status: 'succeeded', output: { title: 'Form' } });
  });

  it('evaluates page JavaScript when enabled, and refuses critical scripts', async () => {
    const s = await engine.createSession();
    await browse(s, { op: 'navigate', url: site.url('/') });
    const v = await browse(s, { op: 'evaluate', script: 'document.title + " / " + location.pathname' });
    expect(v).toMatchObject({ status: 'succeeded', output: { data: { value: 'Switchyard test home / /' } } });
    const fn = await browse(s, { op: 'evaluate', script: 'async () => [1, 2, 3].map((x) => x * 2)' });
    expect(fn.output.data.value).toEqual([2, 4, 6]);
    const thrown = await browse(s, { op: 'evaluate', script: 'throw new Error("boom")' });
    expect(thrown).toMatchObject({ status: 'failed', error: { code: 'SCRIPT_ERROR' } });
    expect(thrown.error.message).toContain('boom');
    const critical = await browse(s, {
      op: 'evaluate',
      script: 'fetch("http://x"); eval(atob("ZmV0Y2g=")); new WebSocket("ws://x"); require("child_process")',
    });
    expect(critical).toMatchObject({
      status: 'denied',
      risk: { level: 'critical' },
      error: { code: 'RISK_CRITICAL' },
    });
  });

  it('gives WebRTC no UDP path of its own: ICE gathering yields no candidate at all', async () => {
    // Without the IP-handling policy this page gathers a host candidate per interface (mDNS-named, still a UDP
    // socket anyone could reach out from); with it, non-proxied UDP is off and gathering completes empty.
    const s = await engine.createSession();
    await browse(s, { op: 'navigate', url: site.url('/') });
    const r = await browse(s, {
      op: 'evaluate',
      script: `async () => {
        const pc = new RTCPeerConnection({ iceServers: [] });
        pc.createDataChannel('probe');
        const candidates = [];
        const gathered = new Promise((resolve) => {
          pc.onicecandidate = (e) => (e.candidate ? e.candidate.candidate && candidates.push(e.candidate.candidate) : resolve('complete'));
          setTimeout(() => resolve('timeout'), 5000);
        });
        await pc.setLocalDescription(await pc.createOffer());
        const state = await gathered;
        pc.close();
        return { state, candidates };
      }`,
    });
    expect(r).toMatchObject({
      status: 'succeeded',
      output: { data: { value: { state: 'complete', candidates: [] } } },
    });
  });

  it('recovers when the Chromium process is killed mid-action', async () => {
    const s = await engine.createSession();
    expect((await browse(s, { op: 'navigate', url: site.url('/') })).status).toBe('succeeded');
    const router = engine.app.get(BrowserRouter);
    const pid = router.processIds().shared;
    expect(pid).toBeGreaterThan(0);
    const inFlight = browse(s, { op: 'navigate', url: site.url('/slow?ms=5000') });
    await site.waitFor('/slow');
    process.kill(pid!, 'SIGKILL');
    const r = await inFlight;
    expect(r).toMatchObject({ status: 'error', error: { class: 'internal', code: 'BROWSER_CRASHED' } });
    expect(r.error.message).toContain('next action');
    const next = await browse(s, { op: 'navigate', url: site.url('/form') });
    expect(next).toMatchObject({ status: 'succeeded', output: { title: 'Form', tabId: 'tab_1' } });
    const newPid = router.processIds().shared;
    expect(newPid).toBeGreaterThan(0);
    expect(newPid).not.toBe(pid);
  });

  it('answers 400 naming the field for malformed browser actions', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ op: 'teleport' }, 'op'],
      [{ op: 'navigate' }, 'url'],
      [{ op: 'click' }, 'selector'],
      [{ op: 'extract', mode: 'everything' }, 'mode'],
      [{ op: 'wait_for' }, 'op'],
      [{ op: 'switch_tab', tabId: 'window-1' }, 'tabId'],
      [{ op: 'navigate', url: 'http://a', colour: 'red' }, 'colour'],
      [{ op: 'navigate', url: 'http://a', timeoutMs: '5' }, 'timeoutMs'],
      [{ op: 'screenshot', path: '../escape.png' }, 'path'],
      [{ op: 'screenshot', path: '/etc/x.png' }, 'path'],
    ];
    for (const [body, field] of cases) {
      const res = await raw(sid, body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(fieldsOf(res.body)).toContain(field);
    }
  });
});

describe('browser actions with the default configuration', () => {
  let engine: EngineHarness;
  let site: BrowserSite;

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    engine = await EngineHarness.start();
  });
  afterAll(async () => {
    await engine?.stop();
    await site?.stop();
  });

  it('refuses loopback addresses (this machine on a port the sandbox may not open too), and evaluate', async () => {
    const s = await engine.createSession();
    for (const url of [site.url('/'), 'http://127.0.0.1/', `http://[::ffff:127.0.0.3]:${site.port}/`]) {
      const r = await engine.action(s, { type: 'browser', op: 'navigate', url });
      expect(r).toMatchObject({ status: 'denied', error: { code: 'ADDRESS_REFUSED' } });
    }
    const e = await engine.action(s, { type: 'browser', op: 'evaluate', script: '1 + 1' });
    expect(e).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'EVALUATE_DISABLED' } });
    expect(e.error.message).toContain('SWITCHYARD_BROWSER_EVALUATE');
    expect(site.hits).toEqual([]);
    // Nothing needed a browser: none was started.
    expect(engine.app.get(BrowserRouter).processIds().shared).toBeUndefined();
  });
});

describe('browser tier without Chromium', () => {
  it('reports itself unavailable and denies browser actions with the reason', async () => {
    const engine = await EngineHarness.start({
      SWITCHYARD_BROWSER_EXECUTABLE: '/nonexistent/chromium',
      SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2',
    });
    try {
      const h = await engine.request('GET', '/health');
      expect(h.body.tiers.browser).toMatchObject({
        available: false,
        reason: expect.stringContaining('/nonexistent/chromium'),
      });
      const s = await engine.createSession();
      const r = await engine.action(s, { type: 'browser', op: 'navigate', url: 'http://127.0.0.2:9999/' });
      expect(r).toMatchObject({
        status: 'denied',
        tier: 'browser',
        error: {
          class: 'policy',
          code: 'TIER_UNAVAILABLE',
          message: expect.stringContaining('install Chromium'),
        },
      });
      // The rest of the engine is unaffected.
      expect((await engine.action(s, { type: 'file', op: 'write', path: 'a', content: 'b' })).status).toBe(
        'succeeded',
      );
    } finally {
      await engine.stop();
    }
  });
});

describe('browser tier shutdown', () => {
  it('closes every context and browser when the engine stops', async () => {
    const site = await BrowserSite.start('127.0.0.2');
    const engine = await EngineHarness.start({ SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2' });
    try {
      const a = await engine.createSession();
      const b = await engine.createSession();
      await engine.action(a, { type: 'browser', op: 'navigate', url: site.url('/') });
      await engine.action(b, { type: 'browser', op: 'navigate', url: site.url('/'), needsFileAccess: true });
      const pids = engine.app.get(BrowserRouter).processIds();
      const all = [pids.shared!, pids.dedicated[b]];
      expect(all.every((pid) => pid > 0 && processAlive(pid))).toBe(true);
      await engine.stop();
      expect(all.filter(processAlive)).toEqual([]);
    } finally {
      await site.stop();
    }
  });
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}
