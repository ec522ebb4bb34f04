import { inputView, languageOfPath, MAX_BLOCK, valueView } from './input-view';

describe('inputs and outputs as a person reads them', () => {
  it('shows code as a block with its language and real line breaks, short fields as facts', () => {
    const view = inputView({
      type: 'code',
      language: 'python',
      code: 'import sys\nprint(1)',
      tier: 'subprocess',
    });
    expect(view.facts).toEqual([
      { key: 'language', value: 'python' },
      { key: 'tier', value: 'subprocess' },
    ]);
    expect(view.blocks).toEqual([
      { key: 'code', language: 'python', text: 'import sys\nprint(1)', omitted: 0 },
    ]);
  });

  it('names the language of a file by its name, a command as bash, a node script as javascript', () => {
    const write = inputView({ type: 'file', op: 'write', path: 'src/app.ts', content: 'x' });
    expect(write.blocks).toEqual([{ key: 'content', language: 'typescript', text: 'x', omitted: 0 }]);
    expect(inputView({ type: 'process', op: 'start', command: 'npm start' }).blocks[0].language).toBe('bash');
    expect(inputView({ type: 'code', language: 'node', code: '1' }).blocks[0].language).toBe('javascript');
    expect(languageOfPath('Makefile')).toBe('text');
    expect(languageOfPath('a/b.PY')).toBe('python');
  });

  it('opens nested objects into dotted keys, and shows arrays as JSON', () => {
    const view = inputView({
      type: 'skill',
      name: 'report',
      input: { query: 'SELECT 1\nFROM t', limit: 3 },
      tags: [1, 2],
    });
    expect(view.facts).toEqual([
      { key: 'name', value: 'report' },
      { key: 'input.limit', value: '3' },
      { key: 'tags', value: '[1,2]' },
    ]);
    expect(view.blocks).toEqual([
      { key: 'input.query', language: 'text', text: 'SELECT 1\nFROM t', omitted: 0 },
    ]);
  });

  it('draws the base64 content of an image file as a picture, and other base64 as text', () => {
    const image = valueView({ path: 'chart.png', encoding: 'base64', content: 'iVBORw0KGgo=' });
    expect(image.images).toEqual([
      { key: 'content', mime: 'image/png', src: 'data:image/png;base64,iVBORw0KGgo=' },
    ]);
    expect(image.blocks).toEqual([]);
    const bytes = valueView({ path: 'blob.bin', encoding: 'base64', content: 'AAEC' });
    expect(bytes.blocks[0]).toMatchObject({ key: 'content', language: 'base64' });
    // Not base64 at all: text, never an image source.
    const bad = valueView({ path: 'x.png', encoding: 'base64', content: '"><script>' });
    expect(bad.images).toEqual([]);
  });

  it('bounds a huge block and counts what it leaves out', () => {
    const view = inputView({ type: 'code', language: 'bash', code: 'x'.repeat(MAX_BLOCK + 5) });
    expect(view.blocks[0].text).toHaveLength(MAX_BLOCK);
    expect(view.blocks[0].omitted).toBe(5);
  });

  it('reads any JSON without throwing', () => {
    expect(valueView(null)).toEqual({ facts: [], blocks: [], images: [] });
    expect(valueView('a\nb').blocks[0]).toMatchObject({ language: 'text', text: 'a\nb' });
    expect(valueView([1]).blocks[0]).toMatchObject({ language: 'json' });
    const deep = valueView({ a: { b: { c: { d: { e: 1 } } } } });
    expect(deep.facts).toEqual([{ key: 'a.b.c', value: '{"d":{"e":1}}' }]);
  });
});
