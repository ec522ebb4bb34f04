/**
 * The web console (/console) in a real Chromium against a real engine with real actions: code in two tiers,
 * files, a failed action and its retry, a plan with a dependency, a browser action, and one running while the
 * timeline is open. Screenshots of each view go to .runtime/console-screens/ (not committed); every page at 390 px is
 * checked by console-pages.e2e-spec.ts.
 */
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { BrowserSite } from '../support/browser-site';
import { screen } from '../support/console-screens';
import { EngineHarness } from '../support/engine-harness';

jest.setTimeout(120_000);

const KEY = 'console-key-0123456789abcdef';

describe('the web console', () => {
  let site: BrowserSite;
  let engine: EngineHarness;
  let keyed: EngineHarness;
  let browser: Browser;
  let sid: string;
  const ids: Record<string, string> = {};
  const problems: string[] = [];

  /** A page that fails the test on any console error or uncaught exception. */
  async function open(context: BrowserContext, url: string): Promise<Page> {
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`${url}: console error: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`${url}: page error: ${e.message}`));
    await page.goto(url);
    return page;
  }

  const shot = (page: Page, name: string) => screen(page, name);

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    [engine, keyed] = await Promise.all([
      EngineHarness.start({ SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2' }),
      EngineHarness.start({ SWITCHYARD_API_KEYS: KEY }),
    ]);
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu'],
    });

    sid = await engine.createSession({ metadata: { agent: 'console-e2e' } });
    const run = (body: Record<string, unknown>) => engine.action(sid, body);
    ids.write = (await run({ type: 'file', op: 'write', path: 'notes.txt', content: 'hello console\n' })).id;
    ids.read = (await run({ type: 'file', op: 'read', path: 'notes.txt' })).id;
    ids.subprocess = (
      await run({
        type: 'code',
        language: 'python',
        code: 'print(open("notes.txt").read())',
        tier: 'subprocess',
      })
    ).id;
    const pooled = await run({ type: 'code', language: 'bash', code: 'echo from-the-pool', tier: 'pooled' });
    expect(pooled).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    ids.pooled = pooled.id;
    const failed = await run({ type: 'code', language: 'python', code: 'import sys\nsys.exit(3)' });
    expect(failed.status).toBe('failed');
    ids.failed = failed.id;
    const retry = await engine.request('POST', `/v1/sessions/${sid}/actions/${ids.failed}/retry`, {
      reason: 'exit cleanly',
      action: { type: 'code', language: 'python', code: 'print("fixed")' },
    });
    expect(retry.body.status).toBe('succeeded');
    ids.retry = retry.body.id;
    const plan = await engine.request('POST', `/v1/sessions/${sid}/plans`, {
      goal: 'write then read',
      wait: true,
      steps: [
        { id: 'write', action: { type: 'file', op: 'write', path: 'plan.txt', content: 'step one\n' } },
        {
          id: 'read',
          dependsOn: ['write'],
          action: { type: 'code', language: 'bash', code: 'cat plan.txt' },
        },
      ],
    });
    expect(plan.body.status).toBe('succeeded');
    ids.plan = plan.body.id;
    const page = await run({ type: 'browser', op: 'navigate', url: `http://127.0.0.2:${site.port}/` });
    expect(page.status).toBe('succeeded');
    ids.browser = page.id;
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all([engine?.stop(), keyed?.stop()]);
    await site?.stop();
  });

  it('lists the session with its status, actions by status and tiers', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await open(context, `${engine.baseUrl}/console`);
    const row = page.locator(`tr[data-session-id="${sid}"]`);
    await row.waitFor();
    await expect(row.textContent()).resolves.toContain('failing');
    const counts = await row.locator('td.counts').textContent();
    expect(counts).toMatch(/failed\s*1/);
    expect(await row.locator('td').nth(5).textContent()).toMatch(/pooled.*subprocess|subprocess.*pooled/);
    await page.getByRole('searchbox', { name: 'Search sessions' }).fill('no-such-session-anywhere');
    await expect(row.count()).resolves.toBe(0);
    await shot(page, 'console-sessions-1280');
    await context.close();
  });

  it('shows every action of the timeline with its status, and opens one with its input, output and files', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await open(context, `${engine.baseUrl}/console#/sessions/${sid}`);
    const rows = page.locator('.rows [role="option"]');
    await page.locator(`[data-action-id="${ids.browser}"]`).waitFor();
    const statuses = await rows.evaluateAll((els) =>
      Object.fromEntries(els.map((e) => [e.getAttribute('data-action-id'), e.getAttribute('data-status')])),
    );
    expect(statuses).toMatchObject({
      [ids.write]: 'succeeded',
      [ids.subprocess]: 'succeeded',
      [ids.pooled]: 'succeeded',
      [ids.failed]: 'failed',
      [ids.retry]: 'succeeded',
      [ids.browser]: 'succeeded',
    });
    // Keyboard: the list takes focus, arrows move the selection, the selection opens its details.
    await page.locator('.rows').focus();
    const details = page.getByTestId('action-details');
    await page.keyboard.press('ArrowDown');
    await details.locator('h2', { hasText: ids.write }).waitFor();
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    await details.locator('h2', { hasText: ids.subprocess }).waitFor();
    await expect(details.getByTestId('stdout').textContent()).resolves.toContain('hello console');
    await details.getByText('notes.txt').waitFor();
    await shot(page, 'console-timeline-1280');

    // A running action: its output shows up before it ends.
    const started = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo tick-$i; sleep 0.5; done',
      wait: false,
    });
    expect(started.status).toBe(202);
    const running = page.locator(`[data-action-id="${started.body.id}"]`);
    await running.waitFor();
    await running.click();
    await details
      .getByTestId('stdout')
      .getByText(/tick-2/)
      .waitFor({ timeout: 10_000 });
    expect(await running.getAttribute('data-status')).toBe('running');
    await shot(page, 'console-timeline-live-1280');
    await page
      .locator(`[data-action-id="${started.body.id}"][data-status="succeeded"]`)
      .waitFor({ timeout: 30_000 });
    await context.close();
  });

  it('draws the graph with the session’s nodes and the retry’s RETRY_OF edge, and opens a node', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await open(context, `${engine.baseUrl}/console#/sessions/${sid}/graph`);
    await page.getByTestId('graph-summary').waitFor();
    await page.getByText('Nodes and edges as a list').click();
    const labels = await page
      .getByTestId('graph-nodes')
      .locator('li')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-label')));
    for (const label of ['Session', 'Action', 'File', 'Plan', 'Step']) expect(labels).toContain(label);
    const retryEdges = page.getByTestId('graph-edges').locator('li[data-type="RETRY_OF"]');
    await expect(retryEdges.count()).resolves.toBe(1);
    await expect(retryEdges.textContent()).resolves.toContain(ids.retry);
    await page
      .getByTestId('graph-nodes')
      .getByRole('button', { name: /File: notes\.txt/ })
      .click();
    await page.getByTestId('node-details').getByText('Lineage →').waitFor();
    await shot(page, 'console-graph-1280');
    // The API's filters: only failed actions.
    await page.getByRole('group', { name: 'Status' }).getByLabel('failed').check();
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByTestId('graph-summary').getByText(/nodes/).waitFor();
    const actions = page.getByTestId('graph-nodes').locator('li[data-label="Action"]');
    await actions.nth(1).waitFor({ state: 'detached' });
    await expect(actions.count()).resolves.toBe(1);
    await expect(actions.textContent()).resolves.toContain('failed');
    await context.close();
  });

  it('shows a failed action’s context with its retry, a file’s lineage and the plan’s steps', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await open(
      context,
      `${engine.baseUrl}/console#/sessions/${sid}/actions/${ids.failed}/failure`,
    );
    const chain = page.getByTestId('retry-chain');
    await chain.waitFor();
    await expect(chain.textContent()).resolves.toContain(ids.retry);
    await expect(chain.locator('li', { hasText: ids.retry }).textContent()).resolves.toContain(
      'a retry of it',
    );
    await shot(page, 'console-failure-1280');

    await page.goto(`${engine.baseUrl}/console#/sessions/${sid}/file?path=notes.txt`);
    const lineage = page.getByTestId('lineage');
    await lineage.waitFor();
    await expect(lineage.textContent()).resolves.toContain(ids.write);
    await expect(lineage.locator('li', { hasText: ids.read }).textContent()).resolves.toMatch(/^read/);
    await expect(lineage.locator('li', { hasText: ids.write }).textContent()).resolves.toMatch(/^write/);
    await shot(page, 'console-file-1280');

    await page.goto(`${engine.baseUrl}/console#/sessions/${sid}/plans/${ids.plan}`);
    const steps = page.getByTestId('plan-steps');
    await steps.waitFor();
    await expect(steps.locator('tr[data-step-id="write"]').getAttribute('data-status')).resolves.toBe(
      'succeeded',
    );
    await expect(steps.locator('tr[data-step-id="read"]').getAttribute('data-status')).resolves.toBe(
      'succeeded',
    );
    await expect(steps.locator('tr[data-step-id="read"]').textContent()).resolves.toContain('write');
    await shot(page, 'console-plan-1280');

    await page.goto(`${engine.baseUrl}/console#/health`);
    await page.locator('tr[data-tier="subprocess"]').waitFor();
    await expect(page.locator('tr[data-tier="pooled"]').textContent()).resolves.toContain('yes');
    await shot(page, 'console-health-1280');
    await context.close();
  });

  it('shows actions waiting for approval, and approves and rejects them with a reason', async () => {
    const asked = await engine.createSession({
      policy: { rules: [{ effect: 'ask', match: { type: 'code' } }] },
    });
    const submit = async (code: string) =>
      (
        await engine.request('POST', `/v1/sessions/${asked}/actions`, {
          type: 'code',
          language: 'python',
          code,
        })
      ).body;
    const yes = await submit('print("approved in the console")');
    const no = await submit('print("never")');
    expect([yes.status, no.status]).toEqual(['awaiting_approval', 'awaiting_approval']);

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await open(context, `${engine.baseUrl}/console#/approvals`);
    const item = (id: string) => page.locator(`li[data-action-id="${id}"]`);
    await item(yes.id).waitFor();
    await expect(item(no.id).textContent()).resolves.toContain('python needs approval');
    await shot(page, 'console-approvals-1280');
    await item(no.id).getByLabel('Reason (recorded with the decision)').fill('not today');
    await item(no.id).getByRole('button', { name: 'Reject' }).click();
    await item(no.id).waitFor({ state: 'detached' });
    await item(yes.id).getByRole('button', { name: 'Approve' }).click();
    await item(yes.id).waitFor({ state: 'detached' });
    await page.getByText('No action is waiting for approval.').waitFor();
    await context.close();

    const ended = async (id: string) => {
      for (;;) {
        const r = (await engine.request('GET', `/v1/sessions/${asked}/actions/${id}`)).body;
        if (r.status !== 'running' && r.status !== 'awaiting_approval') return r;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    expect(await ended(yes.id)).toMatchObject({ status: 'succeeded', approval: { decision: 'approved' } });
    expect(await ended(no.id)).toMatchObject({
      status: 'denied',
      error: { code: 'APPROVAL_REJECTED' },
      approval: { decision: 'rejected', reason: 'not today' },
    });
  });

  it('asks for an API key once when keys are on, names a wrong one, and keeps a right one for the tab', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await open(context, `${keyed.baseUrl}/console`);
    const key = page.getByLabel('Key');
    await key.fill('not-the-key-0000000000');
    await page.getByRole('button', { name: 'Open the console' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/refused this API key/);
    await shot(page, 'console-key-refused-1280');
    await key.fill(KEY);
    await page.getByRole('button', { name: 'Open the console' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    // Kept for the tab: a reload does not ask again; a new tab's storage is its own.
    await page.reload();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    expect(await page.evaluate<number>('localStorage.length')).toBe(0);
    await context.close();
  });

  it('serves only its own files, and no console error came up in any view', async () => {
    const index = await fetch(`${engine.baseUrl}/console`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-security-policy')).toContain("connect-src 'self'");
    expect(await index.text()).toContain('/console/console.js');
    // The terminal pane's module and stylesheet (loaded when a terminal is shown), under the same policy.
    for (const [file, type] of [
      ['terminal.js', 'text/javascript'],
      ['xterm.css', 'text/css'],
    ]) {
      const asset = await fetch(`${engine.baseUrl}/console/${file}`);
      expect([file, asset.status, asset.headers.get('content-type')]).toEqual([
        file,
        200,
        expect.stringContaining(type),
      ]);
      expect(asset.headers.get('content-security-policy')).toContain("script-src 'self'");
    }
    const missing = await fetch(`${engine.baseUrl}/console/../package.json`);
    expect(missing.status).toBe(404);
    const traversal = await fetch(`${engine.baseUrl}/console/%2e%2e%2fpackage.json`);
    expect(traversal.status).toBe(404);
    const post = await fetch(`${engine.baseUrl}/console`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(problems).toEqual([]);
  });
});
