/**
 * A real JupyterLab (the client venv's, `bash scripts/client-tools.sh`) started with `--gateway-url` on a session's
 * Jupyter URL and the engine's key, driven in headless Chromium: a notebook on the python3 kernelspec runs a typed
 * cell, and the state it leaves is the session kernel's, for the REST API too. Everything on 127.0.0.1. Screenshots
 * go to .runtime/test-artifacts/jupyterlab/ (not committed).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { EngineHarness } from '../support/engine-harness';
import { JupyterServer, requireJupyterClients } from '../support/jupyter-clients';

jest.setTimeout(90_000);

const SHOTS = path.join(__dirname, '..', '..', '.runtime', 'test-artifacts', 'jupyterlab');
const KEY = 'jupyterlab-key-0123456789abcdef';
const LAB_TOKEN = randomBytes(16).toString('hex');
const CELL = "x = 6 * 7\nprint('from lab', x)";

/** A notebook of one empty code cell on the python3 kernelspec: opening it starts that kernel, with no dialog. */
const NOTEBOOK = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: {
    kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' },
    language_info: { name: 'python' },
  },
  cells: [{ cell_type: 'code', id: 'first', metadata: {}, source: '', outputs: [], execution_count: null }],
};

describe('JupyterLab with --gateway-url runs its cells in the session', () => {
  let engine: EngineHarness;
  let home: string;
  let lab: JupyterServer;
  let browser: Browser;
  let sid: string;

  beforeAll(async () => {
    requireJupyterClients(['jupyter-lab']);
    mkdirSync(SHOTS, { recursive: true });
    home = mkdtempSync(path.join(os.tmpdir(), 'switchyard-jupyterlab-'));
    writeFileSync(path.join(home, 'lab.ipynb'), JSON.stringify(NOTEBOOK));
    // No "official Jupyter news?" prompt over the page (JupyterLab's user settings, under JUPYTER_CONFIG_DIR).
    const settings = path.join(home, 'config', 'lab', 'user-settings', '@jupyterlab', 'apputils-extension');
    mkdirSync(settings, { recursive: true });
    writeFileSync(
      path.join(settings, 'notification.jupyterlab-settings'),
      JSON.stringify({ fetchNews: 'false', checkForUpdates: false }),
    );
    engine = (await EngineHarness.start({ SWITCHYARD_API_KEYS: KEY })).as(KEY);
    sid = await engine.createSession({ metadata: { agent: 'jupyterlab-e2e' } });
    [lab, browser] = await Promise.all([
      JupyterServer.start(
        home,
        `${engine.baseUrl}/v1/sessions/${sid}/jupyter`,
        { key: KEY, token: LAB_TOKEN },
        {
          app: 'lab',
          // Nothing outside loopback: no update check, no news feed.
          args: [
            '--no-browser',
            '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
            '--LabApp.news_url=None',
          ],
        },
      ),
      chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    // Before the engine: JupyterLab deletes its kernels through the gateway as it shuts down.
    await lab?.stop();
    await engine?.stop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  it('opens a python3 notebook, runs a typed cell (Shift+Enter) and shows its output; the state is the session kernel’s', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    try {
      await page.goto(`${lab.url}/lab/tree/lab.ipynb?token=${LAB_TOKEN}`);
      const notebook = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
      await notebook.waitFor({ timeout: 30_000 });
      // The kernel is up once the toolbar's indicator says so (its status comes over the gateway's WebSocket).
      await page
        .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status="idle"]')
        .waitFor({ timeout: 30_000 });

      await notebook.locator('.jp-Cell').first().locator('.cm-content').click();
      const [first, second] = CELL.split('\n');
      await page.keyboard.type(first);
      await page.keyboard.press('Enter');
      await page.keyboard.type(second);
      await page.keyboard.press('Shift+Enter');

      const output = notebook.locator('.jp-OutputArea-output', { hasText: 'from lab 42' });
      // On a loaded machine JupyterLab may take the key press before its kernel connection can send: the cell then
      // stays unrun (`[ ]:`, not `[*]:`). Run it again from its editor, a bounded number of times.
      const prompt = notebook.locator('.jp-Cell').first().locator('.jp-InputPrompt');
      for (let attempt = 0; attempt < 3; attempt++) {
        const shown = await output.waitFor({ timeout: 10_000 }).then(
          () => true,
          () => false,
        );
        if (shown || (await prompt.innerText()).trim() !== '[ ]:') break;
        await notebook.locator('.jp-Cell').first().locator('.cm-content').click();
        await page.keyboard.press('Control+Enter');
      }
      await output.waitFor({ timeout: 30_000 });
      expect(await output.first().innerText()).toContain('from lab 42');
      await expect(notebook.locator('.jp-Cell').first().locator('.jp-InputPrompt').innerText()).resolves.toBe(
        '[1]:',
      );
      await shot(page, 'ran-cell');
    } catch (err) {
      await shot(page, 'failure').catch(() => undefined);
      throw new Error(
        `${(err as Error).message}\npage errors: ${pageErrors.join('\n')}\njupyter lab's log:\n${lab.logTail()}`,
      );
    } finally {
      await context.close();
    }

    const next = await engine.action(sid, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'x + 1',
    });
    expect(next).toMatchObject({ status: 'succeeded', output: { result: '43' } });

    // The notebook's cell is a recorded action of the session, before the REST one.
    const listed = await engine.request('GET', `/v1/sessions/${sid}/actions`);
    expect(listed.status).toBe(200);
    const actions: any[] = listed.body.actions;
    expect(actions.map((a) => [a.type, a.status])).toEqual([
      ['code', 'succeeded'],
      ['code', 'succeeded'],
    ]);
    const [cell, rest] = actions;
    expect(rest.id).toBe(next.id);
    expect(cell.inputSummary).toContain('x = 6 * 7');
    expect(cell.inputSummary).toContain("print('from lab', x)");
    const recorded = await engine.request('GET', `/v1/sessions/${sid}/actions/${cell.id}`);
    expect(recorded.body.input).toMatchObject({
      type: 'code',
      language: 'python',
      state: 'session',
      code: CELL,
    });
  });
});
