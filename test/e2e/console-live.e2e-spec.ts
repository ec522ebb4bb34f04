/**
 * The console's live view of a running session, in a real Chromium against a real engine and a real sandbox: a
 * terminal (xterm.js over the engine's WebSocket, under the console's own Content-Security-Policy) that types and
 * reads back, follows the pane's size and closes; and the session's ports, listing a server a process started, whose
 * link opens the page through the engine's proxy in a new tab. Screenshots at 1280 and 390 px go to
 * .runtime/console-screens/.
 */
import { type Browser, chromium, type Page } from 'playwright-core';
import { contextAt, overflow, PHONE, screen, WIDE } from '../support/console-screens';
import { EngineHarness } from '../support/engine-harness';

jest.setTimeout(120_000);

const PORT = 8765;
const PAGE_TEXT = 'hello from inside the session';

/** The lines of the xterm.js screen (its active buffer), as text. */
const screenLines = (page: Page): Promise<string[]> =>
  page.evaluate(`(() => {
    const term = document.querySelector('[data-testid="terminal"]').term;
    const buffer = term.buffer.active;
    const lines = [];
    for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
    return lines;
  })()`);

describe('the console’s live view: terminal and ports', () => {
  let engine: EngineHarness;
  let browser: Browser;
  let sid: string;
  const problems: string[] = [];

  async function open(size: typeof WIDE | typeof PHONE): Promise<Page> {
    const context = await contextAt(browser, size);
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`@${size.width}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`@${size.width}: page error: ${e.message}`));
    await page.goto(`${engine.baseUrl}/console#/sessions/${sid}/live`);
    return page;
  }

  beforeAll(async () => {
    engine = await EngineHarness.start();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu'],
    });
    sid = await engine.createSession({ metadata: { agent: 'console-live-e2e' } });
    const page = await engine.action(sid, {
      type: 'file',
      op: 'write',
      path: 'site/index.html',
      content: `<!doctype html><title>in the session</title><h1>${PAGE_TEXT}</h1>`,
    });
    expect(page.status).toBe('succeeded');
    const server = await engine.action(sid, {
      type: 'process',
      op: 'start',
      name: 'web',
      command: `python3 -m http.server ${PORT} --bind 127.0.0.1 --directory site`,
    });
    expect([server.status, server.error]).toEqual(['succeeded', undefined]);
  });

  afterAll(async () => {
    await browser?.close();
    await engine?.stop();
  });

  it('lists the server a process started, and its link opens the page through the proxy in a new tab', async () => {
    const page = await open(WIDE);
    const row = page.locator(`[data-testid="ports"] li[data-port="${PORT}"]`);
    await row.waitFor({ timeout: 20_000 });
    await expect(row.textContent()).resolves.toContain('web');
    const link = row.getByTestId('port-link');
    await link.waitFor();
    await expect(link.getAttribute('target')).resolves.toBe('_blank');
    await expect(link.getAttribute('rel')).resolves.toBe('noopener noreferrer');
    const [tab] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
    await tab.waitForLoadState();
    await expect(tab.locator('h1').textContent()).resolves.toBe(PAGE_TEXT);
    expect(tab.url()).toContain(`/v1/sessions/${sid}/ports/${PORT}/`);
    // The page runs the session's code on the engine's origin: it gets no handle on the console's tab.
    await expect(tab.evaluate('window.opener')).resolves.toBeNull();
    await screen(page, 'live-ports-1280');
    await page.context().close();
  });

  it('opens a terminal, types `echo hi` and reads `hi` back, follows the pane’s size, and closes it', async () => {
    const page = await open(WIDE);
    await page.getByRole('button', { name: 'New terminal' }).click();
    const state = page.getByTestId('terminal-link');
    await page.locator('[data-testid="terminal-link"][data-state="open"]').waitFor({ timeout: 30_000 });
    const terminalId = await page.getByTestId('terminal').getAttribute('data-terminal-id');
    await page.locator('[data-testid="terminal"] .xterm').click();
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    // A function, not a string: the console's policy allows no eval, which Playwright's polling of a string needs.
    await page.waitForFunction(
      () => {
        const term = (globalThis as any).document.querySelector('[data-testid="terminal"]').term;
        const buffer = term.buffer.active;
        for (let i = 0; i < buffer.length; i++)
          if (buffer.getLine(i).translateToString(true) === 'hi') return true;
        return false;
      },
      undefined,
      { timeout: 15_000 },
    );
    const lines = await screenLines(page);
    expect(lines.some((l) => l.endsWith('echo hi'))).toBe(true);
    expect(lines).toContain('hi');
    await screen(page, 'live-terminal-1280');

    // The pane sizes the terminal to itself: a narrower window, fewer columns in the session's terminal too.
    const wide = (await engine.request('GET', `/v1/sessions/${sid}/terminals/${terminalId}`)).body;
    await page.setViewportSize({ width: 700, height: 900 });
    let narrow = wide;
    for (let i = 0; i < 100 && narrow.cols >= wide.cols; i++) {
      await page.waitForTimeout(50);
      narrow = (await engine.request('GET', `/v1/sessions/${sid}/terminals/${terminalId}`)).body;
    }
    expect(narrow.cols).toBeLessThan(wide.cols);
    const shown = await page.evaluate<number>(`document.querySelector('[data-testid="terminal"]').term.cols`);
    expect(narrow.cols).toBe(shown);

    await page.getByRole('button', { name: 'Close it' }).click();
    await page.getByText('A shell (bash) in the session').waitFor();
    const closed = (await engine.request('GET', `/v1/sessions/${sid}/terminals/${terminalId}`)).body;
    expect(closed.status).not.toBe('open');
    await expect(state.count()).resolves.toBe(0);
    await page.context().close();
  });

  it('fits a 390 px phone with a terminal open and the ports listed', async () => {
    const page = await open(PHONE);
    await page.getByRole('button', { name: 'New terminal' }).click();
    await page.locator('[data-testid="terminal-link"][data-state="open"]').waitFor({ timeout: 30_000 });
    await page.locator(`[data-testid="ports"] li[data-port="${PORT}"]`).waitFor({ timeout: 20_000 });
    await screen(page, 'live-terminal-390');
    const seen = await overflow(page);
    expect(seen.scrollWidth).toBeLessThanOrEqual(seen.clientWidth);
    await page.getByRole('button', { name: 'Close it' }).click();
    await page.context().close();
  });

  it('says when a policy asks a person before a terminal opens, and attaches it once approved', async () => {
    const asked = await engine.createSession({
      policy: { rules: [{ effect: 'ask', match: { type: 'terminal' } }] },
    });
    const context = await contextAt(browser, WIDE);
    const page = await context.newPage();
    page.on('pageerror', (e) => problems.push(`approval: page error: ${e.message}`));
    await page.goto(`${engine.baseUrl}/console#/sessions/${asked}/live`);
    await page.getByRole('button', { name: 'New terminal' }).click();
    await page.getByText('A policy asks a person before this session opens a terminal').waitFor();
    const pending = (await engine.request('GET', '/v1/approvals')).body.approvals.find(
      (a: any) => a.sessionId === asked,
    );
    expect(pending).toMatchObject({ tool: 'terminal' });
    const decided = await engine.request(
      'POST',
      `/v1/sessions/${asked}/actions/${pending.actionId}/approve`,
      { reason: 'watching it' },
    );
    expect(decided.status).toBe(200);
    await page.locator('[data-testid="terminal-link"][data-state="open"]').waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Close it' }).click();
    await page.getByText('A shell (bash) in the session').waitFor();
    await context.close();
  });

  it('came up with no console error: the WebSocket is allowed by the console’s own policy', () => {
    expect(problems).toEqual([]);
  });
});
