import { FRAME_CSP, frameDocument, frameHeight } from './html-frame';

describe('the document an HTML result is drawn in', () => {
  it('puts its policy in the head, before any of the result', () => {
    const doc = frameDocument('<meta http-equiv="Content-Security-Policy" content="img-src *"><p>hi</p>');
    const policy = doc.indexOf(`<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">`);
    expect(policy).toBeGreaterThan(0);
    expect(policy).toBeLessThan(doc.indexOf('</head>'));
    expect(
      doc.indexOf('<body><meta http-equiv="Content-Security-Policy" content="img-src *">'),
    ).toBeGreaterThan(doc.indexOf('</head>'));
    expect(FRAME_CSP).toBe("default-src 'none'; style-src 'unsafe-inline'; img-src data:");
  });

  it('styles tables: borders, padding, monospace numbers', () => {
    expect(frameDocument('')).toMatch(/th,td\{border:1px solid [^}]*padding:/);
    expect(frameDocument('')).toMatch(/td\{font-family:ui-monospace[^}]*tabular-nums/);
  });
});

describe('the height of an HTML result’s frame', () => {
  const table = (rows: number) => `<table>${'<tr><td>1</td></tr>'.repeat(rows)}</table>`;

  it('grows with a table’s rows, up to a screenful', () => {
    expect(frameHeight(table(3))).toBeLessThan(frameHeight(table(8)));
    expect(frameHeight(table(8))).toBe(8 * 23 + 24);
    expect(frameHeight(table(1000))).toBe(480);
  });

  it('holds a few lines at least, and guesses text from its blocks or its length', () => {
    expect(frameHeight('')).toBe(48);
    expect(frameHeight('<b>x</b>')).toBe(48);
    expect(frameHeight('<p>a</p><p>b</p><p>c</p><br><br/>')).toBe(5 * 19 + 24);
    expect(frameHeight('x'.repeat(1000))).toBe(10 * 19 + 24);
    expect(frameHeight('x'.repeat(10_000_000))).toBe(480);
  });

  it('counts only tags, not words that start like them', () => {
    expect(frameHeight('<track> <trip> '.repeat(5))).toBe(48);
    expect(frameHeight('<tr> '.repeat(5))).toBe(5 * 23 + 24);
  });
});
