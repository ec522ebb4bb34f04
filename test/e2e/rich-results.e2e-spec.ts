import { EngineHarness } from '../support/engine-harness';

/**
 * Rich results of session kernels through the API (real bubblewrap, real Docker, the real data-science template
 * image with pandas and matplotlib): `output.results` holds the MIME bundles a cell displayed, in order, in both
 * tiers that hold state; over the caps they go to workspace files; they are redacted like stdout.
 */

/** A python snippet defining `png(w, h)` (a real, decodable PNG) and `Chart`, which displays as PNG and HTML. */
const CHART = `
import random, struct, zlib
def png(w, h):
    def chunk(kind, body):
        return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))
    noise = random.Random(w * h)  # noise does not compress: the PNG is about 3 * w * h bytes
    rows = b''.join(b'\\x00' + noise.randbytes(3 * w) for _ in range(h))
    return (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
class Chart:
    def __init__(self, w, h): self.w, self.h = w, h
    def _repr_png_(self): return png(self.w, self.h)
    def _repr_html_(self): return '<table><tr><td>%d</td></tr></table>' % self.w
    def __repr__(self): return 'Chart(%d, %d)' % (self.w, self.h)
`;

const pngSize = (b64: string): [number, number] => {
  const raw = Buffer.from(b64, 'base64');
  expect(raw.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  return [raw.readUInt32BE(16), raw.readUInt32BE(20)];
};

describe('rich results of kernel cells (output.results)', () => {
  let engine: EngineHarness;

  beforeAll(async () => {
    engine = await EngineHarness.start({
      SWITCHYARD_RESULT_MAX_BYTES: '65536',
      SWITCHYARD_CELL_RESULTS_MAX_BYTES: '262144',
      SWITCHYARD_SECRET_PATTERNS: JSON.stringify(['acme_[0-9]{8}']),
    });
  });
  afterAll(() => engine.stop());

  const cell = (sid: string, code: string, extra: Record<string, unknown> = {}): Promise<any> =>
    engine.action(sid, {
      type: 'code',
      language: 'python',
      code,
      state: 'session',
      timeoutMs: 30_000,
      ...extra,
    });

  describe.each(['subprocess', 'pooled'])('in the %s tier', (tier) => {
    let sid: string;
    beforeAll(async () => {
      sid = await engine.createSession();
      expect((await cell(sid, CHART, { tier })).status).toBe('succeeded');
    });
    afterAll(() => engine.request('DELETE', `/v1/sessions/${sid}`));

    it('gives display() and _repr_*_ bundles in order, and the final value as the main result', async () => {
      const r = await cell(sid, "display(Chart(4, 3))\nprint('between')\ndisplay('x')\nChart(6, 5)", {
        tier,
      });
      expect(r).toMatchObject({ status: 'succeeded', tier, stdout: 'between\n' });
      expect(r.output.result).toBe('Chart(6, 5)');
      const [first, second, main] = r.output.results;
      expect(r.output.results).toHaveLength(3);
      expect(Object.keys(first.data).sort()).toEqual(['image/png', 'text/html', 'text/plain']);
      expect(pngSize(first.data['image/png'])).toEqual([4, 3]);
      expect(first.metadata).toEqual({ 'image/png': { width: 4, height: 3 } });
      expect(first.data['text/html']).toBe('<table><tr><td>4</td></tr></table>');
      expect(first.isMainResult).toBeUndefined();
      expect(second).toEqual({ data: { 'text/plain': "'x'" } });
      expect(main).toMatchObject({ isMainResult: true, metadata: { 'image/png': { width: 6, height: 5 } } });
      // A statement shows nothing; a plain value is a text-only main result.
      expect((await cell(sid, 'y = 1', { tier })).output.results).toEqual([]);
      expect((await cell(sid, 'y + 1', { tier })).output.results).toEqual([
        { data: { 'text/plain': '2' }, isMainResult: true },
      ]);
    });

    it('writes a result over the cap to the workspace and names the file, never cutting it', async () => {
      const r = await cell(sid, 'display(Chart(200, 200))', { tier }); // 120 KB, over the 64 KiB cap
      expect(r.status).toBe('succeeded');
      const [big] = r.output.results;
      expect(big.data['image/png']).toBeUndefined();
      const file = big.files.find((f: any) => f.mimeType === 'image/png');
      expect(file.path).toMatch(/^\.switchyard\/results\/cell-\d+-0-[0-9a-f]{6}\.png$/);
      const read = await engine.action(sid, { type: 'file', op: 'read', path: file.path });
      expect(read.output.encoding).toBe('base64');
      expect(pngSize(read.output.content)).toEqual([200, 200]);
      expect(Buffer.from(read.output.content, 'base64')).toHaveLength(file.bytes);
      // The HTML was small enough: it stays inline.
      expect(big.data['text/html']).toBe('<table><tr><td>200</td></tr></table>');
    });

    it('redacts secrets in results as in stdout', async () => {
      const r = await cell(
        sid,
        "display({'text/html': '<b>acme_12345678</b>', 'text/plain': 'acme_12345678'}, raw=True)",
        {
          tier,
        },
      );
      expect(JSON.stringify(r.output.results)).not.toContain('acme_12345678');
      expect(r.redacted).toBe(true);
    });
  });

  it('a node cell displays with display(value, mime); a bash cell has no rich results', async () => {
    const sid = await engine.createSession();
    const node = await engine.action(sid, {
      type: 'code',
      language: 'node',
      state: 'session',
      code: "display('<i>hi</i>', 'text/html'); display({a: 1}, 'application/json'); 1 + 1",
    });
    expect(node.output.results).toEqual([
      { data: { 'text/html': '<i>hi</i>', 'text/plain': '<i>hi</i>' } },
      { data: { 'application/json': { a: 1 }, 'text/plain': '{ a: 1 }' } },
      { data: { 'text/plain': '2' }, isMainResult: true },
    ]);
    const bash = await engine.action(sid, {
      type: 'code',
      language: 'bash',
      state: 'session',
      code: 'echo hi',
    });
    expect(bash.output.results).toEqual([]);
    await engine.request('DELETE', `/v1/sessions/${sid}`);
  });

  describe('a data-science session (pandas, matplotlib)', () => {
    let sid: string;
    beforeAll(async () => {
      const res = await engine.request('POST', '/v1/sessions', { template: 'data-science' });
      expect(res.status).toBe(201);
      sid = res.body.id;
    });
    afterAll(() => engine.request('DELETE', `/v1/sessions/${sid}`));

    it('shows a matplotlib figure left open at the end of the cell as a PNG, without any code change', async () => {
      const r = await cell(sid, 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("t")\nNone');
      expect(r.status).toBe('succeeded');
      expect(r.stderr).toBe('');
      expect(r.output.results).toHaveLength(1);
      const [fig] = r.output.results;
      expect(fig.data['text/plain']).toMatch(/^<Figure size \d+x\d+ with 1 Axes>$/);
      const [w, h] = pngSize(fig.data['image/png']);
      expect(fig.metadata['image/png']).toEqual({ width: w, height: h });
      expect(w).toBeGreaterThan(300);
      // It was closed: the next cell shows nothing of it.
      expect((await cell(sid, 'len(plt.get_fignums())')).output.result).toBe('0');
    });

    it('plt.show() displays at once, and a figure as the final value is shown once, as the main result', async () => {
      const shown = await cell(sid, "plt.plot([1, 2])\nplt.show()\nprint('after')");
      expect(shown.status).toBe('succeeded');
      expect(shown.output.results.map((x: any) => Object.keys(x.data).sort())).toEqual([
        ['image/png', 'text/plain'],
      ]);
      const main = await cell(sid, 'fig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\nfig');
      expect(main.output.results).toHaveLength(1);
      expect(main.output.results[0]).toMatchObject({ isMainResult: true });
      expect(main.output.results[0].data['image/png']).toBeDefined();
    });

    it('a pandas DataFrame gives its HTML table and plain text', async () => {
      const r = await cell(sid, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3.5, 4.5]})\ndf");
      const [main] = r.output.results;
      expect(main.isMainResult).toBe(true);
      expect(main.data['text/html']).toContain('<table');
      expect(main.data['text/html']).toContain('<th>b</th>');
      expect(main.data['text/plain']).toBe(r.output.result);
      expect(main.data['text/plain']).toContain('3.5');
    });
  });

  it('the graph records what a cell displayed, and the spilled file as written by it', async () => {
    const sid = await engine.createSession();
    await cell(sid, CHART);
    const r = await cell(sid, 'display(Chart(2, 2))\ndisplay(Chart(300, 300))');
    const stored = await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}`);
    expect(stored.body.output.results).toEqual(r.output.results);
    const graph = await engine.request('GET', `/v1/sessions/${sid}/graph`);
    const node = graph.body.nodes.find((n: any) => n.id === r.id);
    expect(node.properties.outputExcerpt).toContain('[displayed image/png');
    const { path: spilled, bytes } = r.output.results[1].files[0] as { path: string; bytes: number };
    expect(bytes).toBeGreaterThan(270_000); // 300×300 of noise
    expect(node.properties.outputExcerpt).toContain(`image/png ${bytes} B in ${spilled}`);
    // The file the cap sent the chart to is a file the action wrote, in the graph's lineage.
    const wrote = graph.body.edges.filter((e: any) => e.from === r.id && e.type === 'WROTE');
    expect(wrote.map((e: any) => e.to)).toContainEqual(expect.stringContaining(spilled));
    await engine.request('DELETE', `/v1/sessions/${sid}`);
  });
});
