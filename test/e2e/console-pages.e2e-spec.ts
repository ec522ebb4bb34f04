/**
 * Every page of the web console read as a person reads it, in a real Chromium (1280 and 390 px) against a real
 * engine: inputs drawn as code with their line breaks, a chart image and an HTML table inline, a file's picture and a
 * browser screenshot, the graph of a 40-action session readable at its default zoom, the session's browser tab
 * watched live, and no page scrolling sideways on a phone. Screenshots of each page at both widths go to
 * .runtime/console-screens/ (the run before's kept as <name>.prev.png).
 */
import { type Browser, chromium, type Page } from 'playwright-core';
import { BrowserSite } from '../support/browser-site';
import { contextAt, overflow, PHONE, screen, WIDE } from '../support/console-screens';
import { EngineHarness } from '../support/engine-harness';

jest.setTimeout(120_000);

// A session cell that displays a bar chart (a PNG built with zlib and struct, also saved to the workspace) and
// answers an HTML table.
const CHART_CELL = `
import os, struct, zlib

def png(width, height, pixel):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = b"".join(b"\\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")

class Chart:
    bars = [20, 45, 32, 52]
    def _repr_png_(self):
        def pixel(x, y):
            inside = x % 40 > 6 and 60 - y <= self.bars[x // 40]
            return (37, 99, 235) if inside else (255, 255, 255)
        return png(160, 60, pixel)

class Table:
    def _repr_html_(self):
        return ("<table><thead><tr><th>city</th><th>visitors</th></tr></thead>"
                "<tbody><tr><td>Lyon</td><td>1234.5</td></tr><tr><td>Oslo</td><td>42</td></tr></tbody></table>")

os.makedirs("img", exist_ok=True)
with open("img/chart.png", "wb") as f:
    f.write(Chart()._repr_png_())
display(Chart())
Table()
`;

const LOOP = 'total = 0\nfor i in range(4):\n    total += i\n    print(i, total)\n';

/** What the graph draws at its default zoom: how many labels, and the pairs of them that overlap. */
interface LabelCheck {
  zoom: number;
  nodes: number;
  labelled: number;
  overlaps: string[];
  legend: boolean;
}

const checkLabels = (page: Page): Promise<LabelCheck> =>
  page.evaluate(`(() => {
    const cy = document.querySelector('.graph-box .cyto').cy;
    const zoom = cy.zoom();
    const drawn = cy.nodes().filter((n) => {
      const label = n.pstyle('label').strValue;
      const size = n.pstyle('font-size').pfValue * zoom;
      return n.visible() && label && size >= n.pstyle('min-zoomed-font-size').pfValue;
    });
    const boxes = drawn.map((n) => ({ id: n.data('short'), b: n.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true }) }));
    const overlaps = [];
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i].b, b = boxes[j].b;
        if (a.w > 0 && b.w > 0 && a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2)
          overlaps.push(boxes[i].id + ' / ' + boxes[j].id);
      }
    const legend = document.querySelector('[data-testid="graph-legend"]');
    return { zoom, nodes: cy.nodes().length, labelled: boxes.length, overlaps: overlaps.slice(0, 10),
      legend: !!legend && legend.getBoundingClientRect().height > 0 };
  })()`);

/** Whether the picture arrived and decoded: its natural width (0 when broken). */
const naturalWidth = (page: Page, selector: string): Promise<number> =>
  page
    .locator(selector)
    .first()
    .evaluate((el: any) => el.decode().then(() => el.naturalWidth as number));

describe('the web console, page by page', () => {
  let site: BrowserSite;
  let engine: EngineHarness;
  let browser: Browser;
  let sid: string;
  let big: string;
  const ids: Record<string, string> = {};
  const problems: string[] = [];

  async function open(size: typeof WIDE | typeof PHONE, hash: string): Promise<Page> {
    const context = await contextAt(browser, size);
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`${hash} @${size.width}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`${hash} @${size.width}: page error: ${e.message}`));
    await page.goto(`${engine.baseUrl}/console${hash}`);
    return page;
  }

  beforeAll(async () => {
    site = await BrowserSite.start('127.0.0.2');
    engine = await EngineHarness.start({ SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2' });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu'],
    });

    // A worked session: code with line breaks, a chart and a table, a file's picture, a browser screenshot.
    sid = await engine.createSession({ metadata: { agent: 'console-pages-e2e' } });
    const run = (body: Record<string, unknown>) => engine.action(sid, body);
    ids.write = (await run({ type: 'file', op: 'write', path: 'src/loop.py', content: LOOP })).id;
    const loop = await run({ type: 'code', language: 'python', code: LOOP });
    expect(loop.status).toBe('succeeded');
    ids.loop = loop.id;
    const chart = await run({
      type: 'code',
      language: 'python',
      state: 'session',
      tier: 'subprocess',
      code: CHART_CELL,
    });
    expect([chart.status, chart.error]).toEqual(['succeeded', undefined]);
    expect(chart.output.results[0].data['image/png']).toEqual(expect.any(String));
    ids.chart = chart.id;
    const read = await run({ type: 'file', op: 'read', path: 'img/chart.png', encoding: 'base64' });
    expect(read.status).toBe('succeeded');
    ids.readImage = read.id;
    expect((await run({ type: 'browser', op: 'navigate', url: site.url('/') })).status).toBe('succeeded');
    const shot = await run({ type: 'browser', op: 'screenshot', path: 'shots/site.png' });
    expect(shot).toMatchObject({ status: 'succeeded', output: { artifacts: [{ path: 'shots/site.png' }] } });
    ids.screenshot = shot.id;
    const failed = await run({ type: 'code', language: 'python', code: 'import sys\nsys.exit(3)' });
    ids.failed = failed.id;
    const plan = await engine.request('POST', `/v1/sessions/${sid}/plans`, {
      goal: 'count the lines of the loop',
      wait: true,
      steps: [
        { id: 'copy', action: { type: 'file', op: 'write', path: 'plan/loop.py', content: LOOP } },
        {
          id: 'count',
          dependsOn: ['copy'],
          action: { type: 'code', language: 'bash', code: 'wc -l plan/loop.py' },
        },
      ],
    });
    expect(plan.body.status).toBe('succeeded');
    ids.plan = plan.body.id;

    // A session of 40 actions for the graph: files written and read, code in two tiers, a failure and its retry.
    big = await engine.createSession({ metadata: { agent: 'console-graph-e2e' } });
    for (let i = 0; i < 14; i++) {
      await engine.action(big, {
        type: 'file',
        op: 'write',
        path: `data/part-${i}.csv`,
        content: `a,b\n${i},${i * i}\n`,
      });
      await engine.action(big, { type: 'file', op: 'read', path: `data/part-${i % 5}.csv` });
    }
    for (let i = 0; i < 10; i++) {
      await engine.action(big, {
        type: 'code',
        language: i % 2 ? 'bash' : 'python',
        code: i % 2 ? `ls data | wc -l` : `print(${i} * 2)`,
      });
    }
    const bad = await engine.action(big, { type: 'code', language: 'python', code: 'raise SystemExit(2)' });
    await engine.request('POST', `/v1/sessions/${big}/actions/${bad.id}/retry`, {
      reason: 'exit cleanly',
      action: { type: 'code', language: 'python', code: 'print("ok")' },
    });
    expect((await engine.request('GET', `/v1/sessions/${big}`)).body.activity.actions).toBe(40);

    // Something waiting on the approvals page.
    const asked = await engine.createSession({
      policy: { rules: [{ effect: 'ask', match: { type: 'code' } }] },
    });
    const pending = await engine.request('POST', `/v1/sessions/${asked}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'echo "waits for a person"',
    });
    expect(pending.body.status).toBe('awaiting_approval');
  });

  afterAll(async () => {
    await browser?.close();
    await engine?.stop();
    await site?.stop();
  });

  it('draws an input as code with its real line breaks and language, not as a JSON string', async () => {
    const page = await open(WIDE, `#/sessions/${sid}/actions/${ids.loop}`);
    const code = page.locator('[data-testid="input"] pre[data-key="code"]');
    await code.waitFor();
    await expect(code.getAttribute('data-language')).resolves.toBe('python');
    const text = await code.locator('code').textContent();
    expect(text).toBe(LOOP);
    expect(text).toContain('\n');
    expect(text).not.toContain('\\n');
    // Drawn on several lines, as the text has them.
    const box = await code.boundingBox();
    expect(box!.height).toBeGreaterThan(4 * 14);
    // A file action's content the same way, in the file's language.
    await page.goto(`${engine.baseUrl}/console#/sessions/${sid}/actions/${ids.write}`);
    const content = page.locator('[data-testid="input"] pre[data-key="content"]');
    await content.waitFor();
    await expect(content.getAttribute('data-language')).resolves.toBe('python');
    await expect(content.textContent()).resolves.toBe(LOOP);
    await page.context().close();
  });

  it('shows pictures inline: a chart result, an image file read, a browser screenshot, with thumbnails in the rows', async () => {
    const page = await open(WIDE, `#/sessions/${sid}/actions/${ids.chart}`);
    const chart = '[data-testid="results"] img[data-mime="image/png"]';
    await page.locator(chart).waitFor();
    expect(await naturalWidth(page, chart)).toBe(160);
    const frame = page.frameLocator('[data-testid="results"] iframe');
    await frame.getByText('Lyon').waitFor();
    await expect(frame.locator('tbody tr').count()).resolves.toBe(2);
    // The rows say what each action made: the chart and the file's picture as thumbnails, the screenshot by name.
    expect(await naturalWidth(page, `[data-action-id="${ids.chart}"] img.thumb`)).toBe(160);
    expect(await naturalWidth(page, `[data-action-id="${ids.readImage}"] img.thumb`)).toBe(160);
    await expect(page.locator(`[data-action-id="${ids.screenshot}"] .chip`).textContent()).resolves.toBe(
      'screenshot',
    );
    await screen(page, 'timeline-chart-1280');

    await page.locator(`[data-action-id="${ids.readImage}"]`).click();
    const read = '[data-testid="output"] img[data-mime="image/png"]';
    await page.locator(read).waitFor();
    expect(await naturalWidth(page, read)).toBe(160);

    await page.locator(`[data-action-id="${ids.screenshot}"]`).click();
    await page.getByRole('button', { name: 'Show the picture' }).click();
    const shot = '[data-testid="action-details"] .artifacts img';
    await page.locator(shot).waitFor();
    expect(await naturalWidth(page, shot)).toBeGreaterThan(100);
    await screen(page, 'timeline-screenshot-1280');
    await page.context().close();
  });

  it.each([
    ['1280', WIDE],
    ['390', PHONE],
  ] as const)('draws the graph of 40 actions readable at its default zoom (%s px)', async (width, size) => {
    const page = await open(size, `#/sessions/${big}/graph`);
    await page.locator('.graph-box .cyto[data-ready="true"]').waitFor();
    const check = await checkLabels(page);
    expect(check.nodes).toBeGreaterThan(40);
    expect(check.legend).toBe(true);
    // Either every label is drawn and none overlaps another, or labels are hidden at this zoom (the legend says
    // what the shapes are, hovering names a node). At zoom 1 they are all drawn.
    expect(check.zoom).toBe(1);
    expect(check.labelled).toBe(check.nodes);
    expect(check.overlaps).toEqual([]);
    // Hovering a node names it in full.
    const first = await page.evaluate<{ x: number; y: number }>(
      `(() => { const cy = document.querySelector('.graph-box .cyto').cy; const p = cy.nodes('[kind = "Action"]').first().renderedPosition(); const r = document.querySelector('.graph-box .cyto').getBoundingClientRect(); return { x: r.left + p.x, y: r.top + p.y }; })()`,
    );
    await page.mouse.move(first.x, first.y);
    await expect(page.getByRole('tooltip').textContent()).resolves.toMatch(
      /^#1 write succeeded: write data\/part-0\.csv/,
    );
    await screen(page, `graph-40-${width}`);
    // Fit shows it all: labels too small to read are hidden, not drawn over each other.
    await page.getByRole('button', { name: 'Fit' }).click();
    const fitted = await checkLabels(page);
    expect(fitted.overlaps).toEqual([]);
    await screen(page, `graph-40-fit-${width}`);
    await page.context().close();
  });

  it('watches the session’s browser tab live (read-only), with its URL, recording nothing', async () => {
    const before = (await engine.request('GET', `/v1/sessions/${sid}/actions?limit=1000`)).body.actions
      .length;
    const page = await open(WIDE, `#/sessions/${sid}/live`);
    await page.getByRole('button', { name: 'Watch' }).click();
    const frame = page.getByTestId('browser-frame');
    await frame.waitFor({ timeout: 20_000 });
    await expect(page.getByTestId('browser-url').textContent()).resolves.toBe(site.url('/'));
    expect(await naturalWidth(page, '[data-testid="browser-frame"] img')).toBeGreaterThan(100);
    // A new frame follows the page: the session navigates, the view shows where it went.
    await engine.action(sid, { type: 'browser', op: 'navigate', url: site.url('/form') });
    await page.getByTestId('browser-url').getByText(site.url('/form')).waitFor({ timeout: 20_000 });
    await screen(page, 'live-1280');
    await page.getByRole('button', { name: 'Stop watching' }).click();
    await page.context().close();
    // Watching is not acting: the only new action is the test's own navigation.
    const after = (await engine.request('GET', `/v1/sessions/${sid}/actions?limit=1000`)).body.actions;
    expect(after.length).toBe(before + 1);
  });

  it('fits a 390 px phone and a 1280 px laptop on every page: no sideways scrolling', async () => {
    const pages: Array<[string, string, string]> = [
      ['sessions', '#/sessions', `[data-session-id="${sid}"]`],
      ['timeline', `#/sessions/${sid}/actions/${ids.loop}`, '[data-testid="input"] pre'],
      ['timeline-chart', `#/sessions/${sid}/actions/${ids.chart}`, '[data-testid="results"] iframe'],
      ['graph', `#/sessions/${sid}/graph`, '.cyto[data-ready="true"]'],
      ['failure', `#/sessions/${sid}/actions/${ids.failed}/failure`, '[data-testid="retry-chain"]'],
      ['file', `#/sessions/${sid}/file?path=src/loop.py`, '[data-testid="lineage"]'],
      ['plans', `#/sessions/${sid}/plans/${ids.plan}`, '[data-testid="plan-steps"]'],
      ['live', `#/sessions/${sid}/live`, '#live-title'],
      ['approvals', '#/approvals', '.approvals li'],
      ['health', '#/health', 'tr[data-tier="subprocess"]'],
    ];
    for (const [size, width] of [
      [PHONE, '390'],
      [WIDE, '1280'],
    ] as const) {
      const context = await contextAt(browser, size);
      const page = await context.newPage();
      page.on('pageerror', (e) => problems.push(`@${width}: page error: ${e.message}`));
      for (const [name, hash, ready] of pages) {
        await page.goto(`${engine.baseUrl}/console${hash}`);
        await page.locator(ready).first().waitFor();
        // A frame's document is drawn after the frame itself: wait for its table before the picture is taken.
        if (name === 'timeline-chart') await page.frameLocator(ready).getByText('Lyon').waitFor();
        await screen(page, `${name}-${width}`);
        const seen = await overflow(page);
        expect({ name, width, ...seen }).toEqual({
          name,
          width,
          scrollWidth: seen.clientWidth,
          clientWidth: seen.clientWidth,
          wide: expect.anything(),
        });
      }
      await context.close();
    }
  });

  it('came up with no console error on any page', () => {
    expect(problems).toEqual([]);
  });
});
