import { MAX_MARKUP, MAX_RESULTS, MAX_TEXT, shownResults } from './results';

// 1x1 PNG, as Jupyter carries it: base64 (with a line break, which Jupyter may keep).
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGA\nhKmMIQAAAABJRU5ErkJggg==';

const one = (result: unknown) => shownResults({ results: [result] }).results;

describe('rich results as the console draws them', () => {
  it('draws a PNG or JPEG inline from a data: URL, with the metadata’s size', () => {
    const [png] = one({
      data: { 'image/png': PNG, 'text/plain': '<Figure>' },
      metadata: { 'image/png': { width: 640, height: 480 } },
    });
    expect(png).toEqual({
      main: false,
      body: {
        kind: 'image',
        mime: 'image/png',
        src: `data:image/png;base64,${PNG.replace('\n', '')}`,
        width: 640,
        height: 480,
      },
      others: ['text/plain'],
      files: [],
    });
    const [jpeg] = one({ data: { 'image/jpeg': '/9j/4AAQ', 'text/plain': 'x' }, metadata: { width: 12.4 } });
    expect(jpeg.body).toEqual({
      kind: 'image',
      mime: 'image/jpeg',
      src: 'data:image/jpeg;base64,/9j/4AAQ',
      width: 12,
    });
  });

  it('ignores sizes that are not positive numbers', () => {
    const [png] = one({ data: { 'image/png': PNG }, metadata: { 'image/png': { width: '9', height: -1 } } });
    expect(png.body).not.toHaveProperty('width');
    expect(png.body).not.toHaveProperty('height');
  });

  it('draws an SVG as an image, never as markup', () => {
    const svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script><circle r="4"/></svg>';
    const [shown] = one({ data: { 'image/svg+xml': svg, 'text/plain': 'circle' } });
    expect(shown.body).toEqual({
      kind: 'image',
      mime: 'image/svg+xml',
      src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`,
    });
    expect(decodeURIComponent((shown.body as { src: string }).src.split(',')[1])).toBe(svg);
  });

  it('falls back to the text when an image is not base64', () => {
    const [shown] = one({ data: { 'image/png': 'not base64!', 'text/plain': 'a figure' } });
    expect(shown.body).toEqual({ kind: 'text', mime: 'text/plain', text: 'a figure', omitted: 0 });
    expect(shown.others).toEqual(['image/png']);
  });

  it('puts HTML in a frame document with its own policy, sized by its rows', () => {
    const html = '<table><tr><th>a</th></tr><tr><td>1</td></tr></table><script>parent.x=1</script>';
    const [shown] = one({ data: { 'text/html': html, 'text/plain': '   a\n0  1' }, isMainResult: true });
    expect(shown.main).toBe(true);
    expect(shown.body).toMatchObject({ kind: 'html', mime: 'text/html', height: 2 * 23 + 24 });
    const srcdoc = (shown.body as { srcdoc: string }).srcdoc;
    expect(srcdoc).toContain(
      `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`,
    );
    expect(srcdoc).toContain(`<body>${html}</body>`);
    expect(shown.others).toEqual(['text/plain']);
  });

  it('shows HTML too long for a frame as its plain text', () => {
    const html = `<p>${'x'.repeat(MAX_MARKUP)}</p>`;
    expect(one({ data: { 'text/html': html, 'text/plain': 'short' } })[0].body).toMatchObject({
      kind: 'text',
      mime: 'text/plain',
      text: 'short',
    });
    expect(one({ data: { 'text/html': html } })[0].body).toMatchObject({ kind: 'text', mime: 'text/html' });
  });

  it('shows markdown, LaTeX and JSON as text, JSON pretty-printed', () => {
    expect(one({ data: { 'text/markdown': '# Hi', 'text/plain': 'Hi' } })[0].body).toEqual({
      kind: 'text',
      mime: 'text/markdown',
      text: '# Hi',
      omitted: 0,
    });
    expect(one({ data: { 'text/latex': '$x^2$', 'text/plain': 'x' } })[0].body).toMatchObject({
      mime: 'text/latex',
      text: '$x^2$',
    });
    expect(one({ data: { 'application/json': { a: [1, 2] }, 'text/plain': '{}' } })[0].body).toMatchObject({
      mime: 'application/json',
      text: '{\n  "a": [\n    1,\n    2\n  ]\n}',
    });
    expect(
      one({ data: { 'application/vnd.vegalite.v5+json': { mark: 'bar' }, 'text/plain': 'chart' } })[0].body,
    ).toMatchObject({ mime: 'application/vnd.vegalite.v5+json', text: '{\n  "mark": "bar"\n}' });
  });

  it('shows plain text as it is, and cuts text past its cap, counting what it left out', () => {
    expect(one({ data: { 'text/plain': "'hello'" } })[0].body).toEqual({
      kind: 'text',
      mime: 'text/plain',
      text: "'hello'",
      omitted: 0,
    });
    const long = one({ data: { 'text/plain': 'y'.repeat(MAX_TEXT + 7) } })[0].body;
    expect(long).toMatchObject({ kind: 'text', omitted: 7 });
    expect((long as { text: string }).text).toHaveLength(MAX_TEXT);
  });

  it('names entries written to the workspace with their path and size', () => {
    const [shown] = one({
      data: { 'text/plain': '<Figure size 6400x4800>' },
      files: [
        { mimeType: 'image/png', path: '.switchyard/results/act_1-0.png', bytes: 9_000_000 },
        { mimeType: 'image/png', path: 42, bytes: 1 },
      ],
    });
    expect(shown.body).toMatchObject({ kind: 'text', text: '<Figure size 6400x4800>' });
    expect(shown.files).toEqual([
      { mimeType: 'image/png', path: '.switchyard/results/act_1-0.png', bytes: 9_000_000 },
    ]);
  });

  it('keeps the cell’s order, marks only its value as main, and skips what is not a bundle', () => {
    const { results } = shownResults({
      results: [
        { data: { 'text/plain': 'first' } },
        'junk',
        { data: null },
        { data: { 'text/plain': 'value' }, isMainResult: true },
      ],
    });
    expect(results.map((r) => [r.main, (r.body as { text: string }).text])).toEqual([
      [false, 'first'],
      [true, 'value'],
    ]);
  });

  it('draws at most MAX_RESULTS and counts the rest', () => {
    const many = Array.from({ length: MAX_RESULTS + 5 }, (_, i) => ({ data: { 'text/plain': String(i) } }));
    const shown = shownResults({ results: many });
    expect(shown.results).toHaveLength(MAX_RESULTS);
    expect(shown.omitted).toBe(5);
  });

  it('shows an older engine’s output.result as the value, and nothing for other outputs', () => {
    expect(shownResults({ kernel: {}, result: '2' }).results).toEqual([
      {
        main: true,
        body: { kind: 'text', mime: 'text/plain', text: '2', omitted: 0 },
        others: [],
        files: [],
      },
    ]);
    expect(shownResults({ kernel: {} })).toEqual({ results: [], omitted: 0 });
    expect(shownResults(undefined)).toEqual({ results: [], omitted: 0 });
    expect(shownResults({ results: [] })).toEqual({ results: [], omitted: 0 });
  });
});
