import { type ActionResult, type ActionType, NO_RISK } from '@switchyard/common';
import { type DraftOutcome, toContent } from './tool-content';
import { type ToolPart, textOf as textOfParts } from './tool-outcome';

/** The text of a draft without image files (these tests' text answers). */
const textOf = (draft: DraftOutcome): string =>
  textOfParts({ parts: draft.parts as ToolPart[], is_error: draft.is_error });

/** The first bytes of a PNG and of a JPEG, then filler: what the answer tells them by. */
const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(92, 1)]).toString('base64');
const JPEG = Buffer.concat([Buffer.from('ffd8ffe0', 'hex'), Buffer.alloc(46, 2)]).toString('base64');
const BMP = Buffer.concat([Buffer.from('BM'), Buffer.alloc(30, 3)]).toString('base64');

const ctx = { maxImageBytes: 1000 };

function result(type: ActionType, fields: Partial<ActionResult>): ActionResult {
  return {
    id: 'act_1',
    sessionId: 'ses_1',
    type,
    status: 'succeeded',
    truncated: { stdout: false, stderr: false },
    durationMs: 1,
    startedAt: '2026-01-01T00:00:00.000Z',
    tier: 'subprocess',
    risk: NO_RISK,
    ...fields,
  };
}

const where = 'output.results[0] of action act_1 (GET /v1/sessions/ses_1/actions/act_1)';

describe('toContent: text answers, as they always were', () => {
  it('code: [stdout], [stderr], [result], [note], [exit_code], empty sections left out', () => {
    const r = result('code', {
      stdout: 'out\n',
      stderr: '',
      exitCode: 0,
      output: { result: '42', note: 'kernel restarted', kernel: {} },
    });
    expect(toContent('code', r, ctx)).toEqual({
      parts: [
        { type: 'text', text: '[stdout]\nout\n' },
        { type: 'text', text: '[result]\n42' },
        { type: 'text', text: '[note]\nkernel restarted' },
        { type: 'text', text: '[exit_code]\n0' },
      ],
      is_error: false,
    });
  });

  it("a read of text is its content; a binary read that is no image stays base64 text; others' output is JSON", () => {
    const read = result('file', {
      output: { path: 'a.txt', encoding: 'utf8', content: 'abc', truncated: true, lines: 1, totalLines: 9 },
    });
    expect(textOf(toContent('file', read, ctx))).toBe('abc...(truncated)');
    const bin = result('file', {
      output: { path: 'a.bmp', encoding: 'base64', content: BMP, size: 32, truncated: false },
    });
    expect(textOf(toContent('file', bin, ctx))).toBe(BMP);
    const ls = result('file', { output: { entries: [] } });
    expect(textOf(toContent('file', ls, ctx))).toBe('{"entries":[]}');
  });
});

describe('toContent: images', () => {
  it('a read of a PNG is a line naming it and the image, told by its bytes whatever its name', () => {
    const read = result('file', {
      output: { path: 'chart.dat', encoding: 'base64', content: PNG, size: 100, truncated: false },
    });
    expect(toContent('file', read, ctx).parts).toEqual([
      {
        type: 'image',
        text: '[image]\nchart.dat: image/png, 100 B',
        mimeType: 'image/png',
        data: PNG,
        where: 'the workspace file chart.dat',
      },
    ]);
  });

  it('an image over the cap is named with where it is, not attached', () => {
    const read = result('file', {
      output: { path: 'big.jpg', encoding: 'base64', content: JPEG, size: 50, truncated: false },
    });
    expect(toContent('file', read, { maxImageBytes: 49 }).parts).toEqual([
      {
        type: 'text',
        text:
          '[image]\nbig.jpg: image/jpeg, 50 B; not attached: over the 49 B image cap ' +
          '(SWITCHYARD_TOOL_IMAGE_MAX_BYTES); it is the workspace file big.jpg',
      },
    ]);
    expect(toContent('file', read, { maxImageBytes: 0 }).parts[0].type).toBe('text');
  });

  it("a cell's displays come before [result], the main result's other entries after it", () => {
    const r = result('code', {
      stdout: 'drawing\n',
      exitCode: 0,
      output: {
        result: 'Shape()',
        results: [
          {
            data: { 'text/plain': '<Figure size 640x480 with 1 Axes>', 'image/png': PNG },
            metadata: { 'image/png': { width: 640, height: 480 } },
          },
          { data: { 'text/plain': '   a\n0  1', 'text/html': '<table></table>' } },
          {
            data: {
              'text/plain': 'Shape()',
              'image/svg+xml': '<svg/>',
              'application/json': { sides: 3 },
              'image/jpeg': JPEG,
            },
            isMainResult: true,
          },
        ],
      },
    });
    const { parts } = toContent('code', r, ctx);
    expect(parts).toEqual([
      { type: 'text', text: '[stdout]\ndrawing\n' },
      { type: 'text', text: '[display]\n<Figure size 640x480 with 1 Axes>' },
      {
        type: 'image',
        text: '[display image/png]\nimage/png, 640x480, 100 B',
        mimeType: 'image/png',
        data: PNG,
        where,
      },
      { type: 'text', text: '[display]\n   a\n0  1' },
      { type: 'text', text: '[display text/html]\n<table></table>' },
      { type: 'text', text: '[result]\nShape()' },
      { type: 'text', text: '[result image/svg+xml]\n<svg/>' },
      { type: 'text', text: '[result application/json]\n{"sides":3}' },
      {
        type: 'image',
        text: '[result image/jpeg]\nimage/jpeg, 50 B',
        mimeType: 'image/jpeg',
        data: JPEG,
        where: where.replace(/\[0\]/, '[2]'),
      },
      { type: 'text', text: '[exit_code]\n0' },
    ]);
  });

  it('image data that is no image a model API takes is named, not attached; base64 line breaks are dropped', () => {
    const wrapped = `${PNG.slice(0, 60)}\n${PNG.slice(60)}\n`;
    const r = result('code', {
      exitCode: 0,
      output: {
        results: [
          { data: { 'text/plain': '<BMP>', 'image/bmp': BMP } },
          { data: { 'text/plain': '<PNG>', 'image/png': wrapped } },
        ],
      },
    });
    const [, bmp, , png] = toContent('code', r, ctx).parts;
    expect(bmp).toEqual({
      type: 'text',
      text:
        '[display image/bmp]\nimage/bmp, 32 B; not attached: not a PNG, JPEG, GIF or WebP image (what model APIs ' +
        `take); it is ${where}`,
    });
    expect(png).toMatchObject({ type: 'image', data: PNG, text: '[display image/png]\nimage/png, 100 B' });
  });

  it('entries written to workspace files are named, image files to be read and attached', () => {
    const r = result('code', {
      exitCode: 0,
      output: {
        results: [
          {
            data: { 'text/plain': '<Figure>' },
            metadata: { 'image/png': { width: 4000, height: 3000 } },
            files: [
              { mimeType: 'image/png', path: '.results/a.png', bytes: 9_000_000 },
              { mimeType: 'text/html', path: '.results/a.html', bytes: 2048 },
              { mimeType: 'image/png', path: null, bytes: 10, error: 'disk full' },
            ],
          },
        ],
      },
    });
    expect(toContent('code', r, ctx).parts.slice(1, 4)).toEqual([
      {
        type: 'image-file',
        path: '.results/a.png',
        header: '[display image/png]',
        lead: '',
        dims: '4000x3000, ',
        declared: 'image/png',
        bytes: 9_000_000,
      },
      {
        type: 'text',
        text: "[display text/html]\n2 KiB, over the results' caps: it is the workspace file .results/a.html",
      },
      {
        type: 'text',
        text: "[display image/png]\n10 B, over the results' caps and not written to the workspace: disk full",
      },
    ]);
  });

  it('ignores results that are not bundles; a cell without results answers as before', () => {
    const r = result('code', { exitCode: 0, output: { result: '1', results: [null, 'x', { data: 5 }] } });
    expect(textOf(toContent('code', r, ctx))).toBe('[result]\n1\n[exit_code]\n0');
    expect(textOf(toContent('code', result('code', { exitCode: 0, output: { results: 'no' } }), ctx))).toBe(
      '[exit_code]\n0',
    );
  });

  it("a browser action's image artifacts are files to attach after its text, and only when it succeeded", () => {
    const output = {
      url: 'http://127.0.0.2/',
      artifacts: [
        { path: 'shots/a.png', bytes: 10, mimeType: 'image/png' },
        { path: 'page.pdf', bytes: 20, mimeType: 'application/pdf' },
      ],
    };
    const ok = toContent('browser', result('browser', { output, hints: ['a hint'] }), ctx);
    expect(ok.parts).toEqual([
      { type: 'text', text: JSON.stringify(output) },
      { type: 'text', text: '[hint]\na hint' },
      {
        type: 'image-file',
        path: 'shots/a.png',
        header: '[image]',
        lead: 'shots/a.png: ',
        dims: '',
        declared: 'image/png',
        bytes: 10,
      },
    ]);
    const failed = result('browser', {
      status: 'failed',
      output,
      error: { class: 'internal', message: 'x' },
    });
    expect(toContent('browser', failed, ctx).parts.some((p) => p.type === 'image-file')).toBe(false);
  });
});
