import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { eventually } from '../support/host-probes';
import { decodePng } from '../support/png-pixels';

/**
 * The browser tier tests the session's own server (issue 32). An agent writes a small web app (test/support/
 * todo_app.py: a form, a button that fetches `/api/…`, a WebSocket to a second port), starts it as a `process` in the
 * pooled tier (a real Docker container), and drives it with real Chromium at `http://localhost:PORT/`: in a page,
 * localhost is the session's own sandbox, reached through its runner, and nothing on the engine host. Another
 * session's browser at the same URL reaches only its own sandbox, where nothing listens; the engine's own port,
 * privileged ports and the metadata address stay refused.
 */
jest.setTimeout(60_000);

const APP = path.join(__dirname, '..', 'support', 'todo_app.py');
const WEB = 8300;
const LIVE = 8301;
const OWN_PORT = "the session's own sandbox port";

describe('the browser tier on the session’s own server (real engine, pooled tier, real Chromium)', () => {
  let engine: EngineHarness;
  let sid: string;
  const browse = (session: string, body: Record<string, unknown>): Promise<any> =>
    engine.action(session, { type: 'browser', ...body });
  /** The app's log as the process logs API gives it, once it holds `text`. */
  const logsUntil = async (text: string): Promise<string> => {
    let seen = '';
    const found = await eventually(
      async () => {
        const r = await engine.action(sid, { type: 'process', op: 'logs', processId: 'todo' });
        seen = `${r.stdout}${r.stderr}`;
        return seen.includes(text);
      },
      20_000,
      100,
    );
    if (!found) throw new Error(`"${text}" never appeared in the app's log:\n${seen}`);
    return seen;
  };

  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_BROWSER_TIMEOUT_MS: '15000' });
    // The agent writes its app as a file and starts it as a background process, as it would any dev server.
    sid = await engine.createSession();
    const written = await engine.action(sid, {
      type: 'file',
      op: 'write',
      path: 'app/todo_app.py',
      content: readFileSync(APP, 'utf8'),
    });
    expect(written.status).toBe('succeeded');
    const started = await engine.action(sid, {
      type: 'process',
      op: 'start',
      command: `python3 -u todo_app.py ${WEB} ${LIVE}`,
      cwd: 'app',
      name: 'todo',
      tier: 'pooled',
    });
    expect(started).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    await logsUntil('listening on');
  });
  afterAll(() => engine?.stop());

  it('navigates to localhost, clicks, fills, submits and screenshots the app, whose log shows the browser', async () => {
    // A session without network (the default): its own sandbox is not the network.
    expect((await engine.request('GET', `/v1/sessions/${sid}`)).body.network).toEqual({ allow: [] });
    const nav = await browse(sid, { op: 'navigate', url: `http://localhost:${WEB}/` });
    expect(nav).toMatchObject({
      status: 'succeeded',
      output: { url: `http://localhost:${WEB}/`, title: 'Todo', status: 200 },
    });
    // Each connection the page made to the session's port is on the action, as the egress proxy's are.
    expect(nav.egress).toContainEqual({
      host: 'localhost',
      port: WEB,
      allowed: true,
      reason: OWN_PORT,
      bytesIn: expect.any(Number),
      bytesOut: 0,
    });

    // The page's WebSocket to the session's other port, answered by the app.
    const live = await browse(sid, { op: 'wait_for', text: 'live: the sandbox got' });
    expect(live.status).toBe('succeeded');

    // Fill and submit the form: a POST, then the app's redirect back to /.
    expect((await browse(sid, { op: 'fill', selector: '#item', value: 'buy milk' })).status).toBe(
      'succeeded',
    );
    const saved = await browse(sid, { op: 'click', selector: '#save' });
    expect(saved.status).toBe('succeeded');
    expect(saved.egress).toContainEqual(
      expect.objectContaining({ host: 'localhost', port: WEB, bytesOut: 13 }),
    );
    expect((await browse(sid, { op: 'wait_for', text: 'buy milk' })).status).toBe('succeeded');

    // The button fetches /api/greet and writes the answer into the page.
    expect((await browse(sid, { op: 'click', selector: '#greet' })).status).toBe('succeeded');
    expect((await browse(sid, { op: 'wait_for', text: 'hello, browser, from the sandbox' })).status).toBe(
      'succeeded',
    );
    const text = await browse(sid, { op: 'extract', mode: 'text', selector: 'body' });
    expect(text.output.data.content).toContain('buy milk');
    expect(text.output.data.content).toContain('hello, browser, from the sandbox');
    expect(text.output.data.content).toContain("live: the sandbox got 'hello from the page'");

    // A screenshot of the page as it is: a PNG of the app's own colours, with its text on it.
    const shot = await browse(sid, { op: 'screenshot', path: 'shots/todo.png' });
    expect(shot).toMatchObject({
      status: 'succeeded',
      output: { artifacts: [{ path: 'shots/todo.png', mimeType: 'image/png' }] },
    });
    const png = decodePng(readFileSync(path.join(engine.workspaceOf(sid), 'shots', 'todo.png')));
    expect([png.width, png.height]).toEqual([1280, 720]);
    const colours = png.histogram();
    // The app's background (#fffbe6) fills most of it; its text and controls are drawn on it.
    expect(colours[0][0]).toBe('#fffbe6');
    expect(colours[0][1]).toBeGreaterThan(png.width * png.height * 0.5);
    expect(colours.length).toBeGreaterThan(20);
    expect(colours.map(([c]) => c)).toContain('#b35900'); // the heading's colour

    // The app's log (the process logs API) shows every request the browser made, on each port.
    const log = await logsUntil('GET /api/greet?name=browser');
    expect(log).toContain(`http GET / host=localhost:${WEB}`);
    expect(log).toContain(`http POST /add host=localhost:${WEB}`);
    expect(log).toContain("added 'buy milk'");
    expect(log).toContain(`ws GET /live HTTP/1.1 host=localhost:${LIVE}`);
    expect(log).toContain("ws message 'hello from the page'");
  });

  it('follows redirects by the same rule: another spelling of localhost is the session’s, metadata is refused', async () => {
    const go = (to: string) => `http://localhost:${WEB}/go?to=${encodeURIComponent(to)}`;
    const same = await browse(sid, { op: 'navigate', url: go(`http://127.0.0.1:${WEB}/`) });
    expect(same).toMatchObject({
      status: 'succeeded',
      output: { url: `http://127.0.0.1:${WEB}/`, title: 'Todo' },
    });
    expect(same.egress).toContainEqual(
      expect.objectContaining({ host: '127.0.0.1', port: WEB, reason: OWN_PORT }),
    );
    const metadata = 'http://169.254.169.254/latest/meta-data/';
    const refused = await browse(sid, { op: 'navigate', url: go(metadata) });
    expect(refused).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'ADDRESS_REFUSED' } });
    expect(refused.error.message).toContain(`refused ${metadata}: `);
    expect(refused.error.message).toContain('link-local');
  });

  it('keeps the engine host and other ports out: the engine’s own port is the sandbox’s, privileged ports refused', async () => {
    const enginePort = Number(new URL(engine.baseUrl).port);
    for (const url of [`http://localhost:${enginePort}/health`, `http://127.0.0.1:${enginePort}/health`]) {
      const r = await browse(sid, { op: 'navigate', url });
      // The session's sandbox has nothing on the engine's port: the engine itself is never reached.
      expect({ url, status: r.status, code: r.error?.code }).toEqual({
        url,
        status: 'failed',
        code: 'PORT_CLOSED',
      });
      expect(r.error.message).toContain(`nothing listens on port ${enginePort}`);
      const page = await browse(sid, { op: 'extract', mode: 'text' });
      expect(page.output.data.content).not.toContain('"status"');
    }
    const cases: [string, string][] = [
      ['http://127.0.0.1:22/', 'SWITCHYARD_PORTS_ALLOWED'],
      ['http://localhost/', 'SWITCHYARD_PORTS_ALLOWED'],
      ['http://169.254.169.254/', 'link-local'],
      [`http://127.0.0.2:${WEB}/`, 'loopback'],
    ];
    for (const [url, why] of cases) {
      const r = await browse(sid, { op: 'navigate', url });
      expect({ url, status: r.status, code: r.error?.code }).toEqual({
        url,
        status: 'denied',
        code: 'ADDRESS_REFUSED',
      });
      expect(r.error.message).toContain(why);
    }
  });

  it('another session’s browser at the same URL reaches only its own sandbox, where nothing listens', async () => {
    const before = (await logsUntil('listening on')).split('\n').length;
    const other = await engine.createSession();
    // No sandbox at all yet: nothing to reach.
    const none = await browse(other, { op: 'navigate', url: `http://localhost:${WEB}/` });
    expect(none).toMatchObject({
      status: 'failed',
      error: { class: 'validation', code: 'PORT_CLOSED' },
      output: { status: 502 },
    });
    expect(none.error.message).toContain(`could not open localhost:${WEB}: nothing listens on port ${WEB}`);
    expect(none.error.message).toContain("localhost is this session's own sandbox");
    const shown = await browse(other, { op: 'extract', mode: 'text' });
    expect(shown.output.data.content).toContain(`nothing listens on port ${WEB}`);
    expect(none.egress).toEqual([
      expect.objectContaining({ host: 'localhost', port: WEB, allowed: true, bytesIn: 0, bytesOut: 0 }),
    ]);
    // A sandbox of its own, with something running, but not the app: still nothing there.
    const sleeper = await engine.action(other, {
      type: 'process',
      op: 'start',
      command: 'sleep 300',
      tier: 'pooled',
    });
    expect(sleeper.status).toBe('succeeded');
    const own = await browse(other, { op: 'navigate', url: `http://localhost:${WEB}/` });
    expect(own).toMatchObject({ status: 'failed', error: { code: 'PORT_CLOSED' } });
    expect(own.error.message).toContain(`nothing listens on port ${WEB}`);
    // The app heard nothing from the other session.
    expect((await logsUntil('listening on')).split('\n').length).toBe(before);
  });
});
