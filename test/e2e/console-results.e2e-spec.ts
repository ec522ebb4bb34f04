/**
 * A code cell's rich results in the web console, in a real Chromium against a real engine: a Python session cell
 * displays a real PNG (built with zlib and struct in the cell) and answers HTML carrying scripts. The image is drawn
 * inline at its own size; the HTML is drawn in a sandboxed frame where its scripts do not run. Screenshots go to
 * .runtime/console-screens/ (not committed).
 */
import { type Browser, chromium, type Page } from 'playwright-core';
import { overflow, screen } from '../support/console-screens';
import { EngineHarness } from '../support/engine-harness';

jest.setTimeout(120_000);

// A 37 x 23 PNG written byte by byte (png() draws rows of blue, or those `row` gives), shown with display(); then a
// table whose HTML tries two ways to run script, as the cell's value.
const CELL = `
import struct, zlib

def png(width, height, row=None):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    blue = bytes([37, 99, 235]) * width
    rows = b"".join(b"\\x00" + (row(y) if row else blue) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")

class Picture:
    def _repr_png_(self):
        return png(37, 23)

class Table:
    def _repr_html_(self):
        return (
            "<table><thead><tr><th>city</th><th>visitors</th></tr></thead>"
            "<tbody><tr><td>Lyon</td><td>1234.5</td></tr><tr><td>Oslo</td><td>42</td></tr></tbody></table>"
            "<script>document.body.insertAdjacentHTML('beforeend', '<p id=ran>script ran</p>')</script>"
            "<img src='data:,' onerror=\\"document.body.setAttribute('data-ran', 'onerror')\\">"
        )

    def __repr__(self):
        return "Table(2 rows)"

display(Picture())
Table()
`;

// A PNG of noise, which does not compress: about 270 KB, over the engine's cap for one result (set below).
const BIG = `
import random

class Noise:
    def _repr_png_(self):
        return png(300, 300, lambda y: random.Random(y).randbytes(3 * 300))

display(Noise())
`;

describe('rich results in the web console', () => {
  let engine: EngineHarness;
  let browser: Browser;
  let sid: string;
  let actionId: string;
  const consoleErrors: string[] = [];

  /** An action opened in the console, its results drawn; every console error is kept for the last test. */
  async function openAction(session: string, action: string, width = 1280, height = 900): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height }, isMobile: width < 500 });
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
    await page.goto(`${engine.baseUrl}/console#/sessions/${session}/actions/${action}`);
    await page.getByTestId('results').waitFor();
    return page;
  }

  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_RESULT_MAX_BYTES: '65536' });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu'],
    });
    sid = await engine.createSession({ metadata: { agent: 'console-results-e2e' } });
    const cell = await engine.action(sid, { type: 'code', language: 'python', state: 'session', code: CELL });
    expect(cell).toMatchObject({ status: 'succeeded', output: { result: 'Table(2 rows)' } });
    // What the API answers is what the console draws: a display, then the cell's value.
    expect(cell.output.results).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ 'image/png': expect.any(String) }) }),
      expect.objectContaining({
        isMainResult: true,
        data: expect.objectContaining({ 'text/html': expect.stringContaining('Lyon') }),
      }),
    ]);
    actionId = cell.id;
  });

  afterAll(async () => {
    await browser?.close();
    await engine?.stop();
  });

  it('draws the PNG inline at its size and the HTML in a frame without scripts, its table readable', async () => {
    const page = await openAction(sid, actionId);
    const results = page.getByTestId('results').locator('> li');
    await expect(results.count()).resolves.toBe(2);

    const picture = results.nth(0);
    await expect(picture.getAttribute('data-main')).resolves.toBe('false');
    await expect(picture.locator('.result-label').textContent()).resolves.toMatch(/^Display/);
    const img = picture.locator('img');
    await expect(img.getAttribute('src')).resolves.toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
    // (Elements as `any`: this project's tests compile without the DOM's types.)
    await img.evaluate((el: any) => el.decode());
    await expect(img.evaluate((el: any) => [el.naturalWidth, el.naturalHeight, el.width])).resolves.toEqual([
      37, 23, 37,
    ]);

    const table = results.nth(1);
    await expect(table.getAttribute('data-main')).resolves.toBe('true');
    await expect(table.locator('.result-label').textContent()).resolves.toMatch(/^Out:/);
    const iframe = table.locator('iframe');
    // Sandboxed with no permission at all: no allow-scripts, no allow-same-origin.
    await expect(iframe.getAttribute('sandbox')).resolves.toBe('');
    await expect(iframe.getAttribute('srcdoc')).resolves.toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`,
    );
    const frame = page.frameLocator(`[data-testid="results"] > li:nth-child(2) iframe`);
    await frame.getByText('Lyon').waitFor({ state: 'visible' });
    await expect(frame.getByText('1234.5').isVisible()).resolves.toBe(true);
    await expect(frame.locator('th', { hasText: 'visitors' }).isVisible()).resolves.toBe(true);
    // Readable: the stylesheet's borders and monospace numbers are in force inside the frame.
    await expect(
      frame.locator('td', { hasText: '1234.5' }).evaluate((td: any) => {
        const style = td.ownerDocument.defaultView.getComputedStyle(td);
        return [style.borderTopStyle, style.fontFamily];
      }),
    ).resolves.toEqual(['solid', expect.stringMatching(/monospace/)]);
    // Neither the script element nor the inline handler ran.
    await expect(frame.locator('#ran').count()).resolves.toBe(0);
    await expect(frame.locator('body').getAttribute('data-ran')).resolves.toBeNull();
    const box = await iframe.boundingBox();
    expect(box!.height).toBeGreaterThanOrEqual(48);
    expect(box!.height).toBeLessThanOrEqual(480);
    await screen(page.getByTestId('results'), 'results-1280');
    await page.context().close();
  });

  it('fits a 390 px wide phone with the results open', async () => {
    const page = await openAction(sid, actionId, 390, 844);
    await page.frameLocator('[data-testid="results"] iframe').getByText('Lyon').waitFor();
    const seen = await overflow(page);
    expect(seen.scrollWidth).toBeLessThanOrEqual(seen.clientWidth);
    await screen(page.getByTestId('results'), 'results-390');
    await page.context().close();
  });

  it('names a result too big to inline by the workspace file it was written to, and its size', async () => {
    const big = await engine.action(sid, { type: 'code', language: 'python', state: 'session', code: BIG });
    expect(big.status).toBe('succeeded');
    const [file] = big.output.results[0].files;
    expect(file).toMatchObject({ mimeType: 'image/png', path: expect.stringMatching(/\.png$/) });
    const page = await openAction(sid, big.id);
    const result = page.getByTestId('results').locator('> li');
    await result.locator('.result-files').waitFor();
    await expect(result.count()).resolves.toBe(1);
    await expect(result.locator('img').count()).resolves.toBe(0);
    await expect(result.locator('.result-files').textContent()).resolves.toBe(
      `image/png in the workspace at ${file.path} (${(file.bytes / 1024).toFixed(1)} KiB)`,
    );
    // The path opens the file's lineage, where the action is its writer.
    await result.getByRole('link', { name: file.path }).click();
    await page.getByTestId('lineage').getByText(big.id).waitFor();
    await page.context().close();
  });

  it('draws a data-science cell: a matplotlib chart at its size and a pandas DataFrame as a table', async () => {
    const ds = await engine.createSession({ template: 'data-science' });
    const cell = await engine.action(ds, {
      type: 'code',
      language: 'python',
      state: 'session',
      timeoutMs: 30_000,
      code: [
        'import matplotlib.pyplot as plt, pandas as pd',
        'plt.plot([1, 3, 2])',
        'plt.title("visits")',
        'pd.DataFrame({"city": ["Lyon", "Oslo", "Quito"], "visits": [1234.5, 42.0, 7.25]})',
      ].join('\n'),
    });
    expect(cell.status).toBe('succeeded');
    const figure = cell.output.results.find((r: any) => r.data['image/png']);
    const { width, height } = figure.metadata['image/png'];
    const page = await openAction(ds, cell.id);
    const chart = page.locator('[data-testid="results"] > li[data-mime="image/png"] img');
    await chart.waitFor();
    await chart.evaluate((el: any) => el.decode());
    await expect(chart.evaluate((el: any) => [el.naturalWidth, el.naturalHeight])).resolves.toEqual([
      width,
      height,
    ]);
    await expect(chart.getAttribute('width')).resolves.toBe(String(width));
    const frame = page.frameLocator(
      '[data-testid="results"] > li[data-mime="text/html"][data-main="true"] iframe',
    );
    await frame.getByText('Quito').waitFor();
    await expect(frame.locator('tbody tr').count()).resolves.toBe(3);
    await expect(frame.locator('th', { hasText: 'visits' }).isVisible()).resolves.toBe(true);
    await screen(page.getByTestId('results'), 'results-data-science');
    await page.context().close();
    await engine.request('DELETE', `/v1/sessions/${ds}`);
  });

  it('came up with no console error but the sandbox refusing the result’s script', () => {
    // Chromium reports each refused script; anything else is the console's own fault.
    const others = consoleErrors.filter((m) => !/^Blocked script execution in 'about:srcdoc'/.test(m));
    expect(others).toEqual([]);
    expect(consoleErrors.length).toBeGreaterThan(0);
  });
});
