import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { ConfigError, loadEngineConfig } from '../../apps/engine/src/platform/config/engine-config';
import { EngineHarness } from '../support/engine-harness';
import { venvBin } from '../support/runtime-dir';

/**
 * Images reach models as images (issue 30): a `read` of a PNG, JPEG, GIF or WebP file (told by its bytes) and a
 * session cell's image results answer, through `POST …/tool-calls` in every call shape and over MCP, as the image
 * content each API takes: Anthropic `image` blocks, Responses API `input_image` items, MCP `image` content; a Chat
 * Completions tool message, which takes text only, names the image and where it is. Images over
 * SWITCHYARD_TOOL_IMAGE_MAX_BYTES are named, not attached.
 *
 * Real engine, real sandboxes (bubblewrap; the data-science template for matplotlib), and the answers checked by the
 * model APIs' own types: `anthropic` and `openai` (pydantic `TypeAdapter`, test/support/tool_answer_types.py, in the
 * pinned venv of scripts/client-tools.sh) and the MCP SDK's client. No model is called.
 */
jest.setTimeout(240_000);

const REPO = path.join(__dirname, '..', '..');
const CLIENT_PYTHON = path.join(venvBin('client-venv'), 'python');
const TYPES_CHECK = path.join(REPO, 'test', 'support', 'tool_answer_types.py');

/** The image cap of the first engine (64 KiB) and its results' per-result cap (32 KiB: bigger ones go to files). */
const CAP = 65_536;
const RESULT_CAP = 32_768;

/** A real PNG of `w`x`h` pixels of noise (which does not compress: about 3·w·h bytes), the same for the same seed. */
function png(w: number, h: number, seed: number): Buffer {
  const chunk = (kind: string, body: Buffer): Buffer => {
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length);
    const tail = Buffer.alloc(4);
    tail.writeUInt32BE(crc32(Buffer.concat([Buffer.from(kind, 'latin1'), body])));
    return Buffer.concat([head, Buffer.from(kind, 'latin1'), body, tail]);
  };
  let x = seed;
  const rows = Buffer.alloc(h * (1 + 3 * w));
  for (let i = 0; i < rows.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff;
    rows[i] = i % (1 + 3 * w) === 0 ? 0 : (x >> 16) & 0xff;
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(w, 0);
  header.writeUInt32BE(h, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Real images of the other three kinds (a 2x2 JPEG Pillow wrote, a 1x1 GIF and a 1x1 WebP; Pillow decodes each). */
const JPEG = Buffer.from(
  '/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgy' +
    'PC4zNDL/2wBDAQkJCQwLDBgNDRgyIRwhMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjL/wAARCAACAAID' +
    'ASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKB' +
    'kaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZ' +
    'mqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQF' +
    'BgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5' +
    'OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX' +
    '2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDgqKKK8M/VD//Z',
  'base64',
);
const GIF = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');
const WEBP = Buffer.from('UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAwA0JaQAA3AA/vuUAAA=', 'base64');
const SMALL = png(16, 16, 1); // ~0.8 KiB
const MID = png(120, 120, 2); // ~42 KiB: over RESULT_CAP, within CAP
const BIG = png(200, 200, 3); // ~117 KiB: over both
const SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>\n';
const BMP = Buffer.concat([Buffer.from('BM'), Buffer.alloc(60)]);

/** The workspace files of a session, written by a python cell (the file API writes text only). */
const FILES: Record<string, Buffer> = {
  'img/chart.png': SMALL,
  'img/photo.jpg': JPEG,
  'img/anim.gif': GIF,
  'img/pic.webp': WEBP,
  // No extension: the bytes tell.
  'img/figure': MID,
  'img/big.png': BIG,
  'img/drawing.svg': Buffer.from(SVG),
  'img/notes.png': Buffer.from('not a picture\n'),
  'img/old.bmp': BMP,
};
const WRITE_FILES = [
  'import base64, json, os',
  `files = json.loads('${JSON.stringify(Object.fromEntries(Object.entries(FILES).map(([p, b]) => [p, b.toString('base64')])))}')`,
  'for p, b in files.items():',
  '    os.makedirs(os.path.dirname(p), exist_ok=True)',
  "    open(p, 'wb').write(base64.b64decode(b))",
  'print(len(files))',
].join('\n');
/** `Dot(path)` displays as the PNG in `path` (IPython's `_repr_png_`); `show(path)` displays one. */
const DOT = [
  'class Dot:',
  '    def __init__(self, path): self.path = path',
  "    def _repr_png_(self): return open(self.path, 'rb').read()",
  "    def __repr__(self): return '<Dot %s>' % self.path",
  'def show(path): display(Dot(path))',
].join('\n');

type Format = 'plain' | 'anthropic' | 'openai' | 'responses';
const FORMATS: Format[] = ['plain', 'anthropic', 'openai', 'responses'];

/** A call of `name` with `input` in `format`'s wire shape, as a model's API gives it. */
function callIn(
  format: Format,
  id: string,
  name: string,
  input: Record<string, unknown>,
): Record<string, unknown> {
  switch (format) {
    case 'plain':
      return { id, name, input };
    case 'anthropic':
      return { type: 'tool_use', id, name, input };
    case 'openai':
      return { id, type: 'function', function: { name, arguments: JSON.stringify(input) } };
    case 'responses':
      return { type: 'function_call', id: `fc_${id}`, call_id: id, name, arguments: JSON.stringify(input) };
  }
}

interface TypeCase {
  name: string;
  format: Format | 'responses-tool';
  answer: any;
  images: { mimeType: string; base64: string }[];
}

/** Runs the model APIs' types over `cases` (test/support/tool_answer_types.py): what each found wrong. */
function checkTypes(cases: TypeCase[]): Promise<{ checked: number; failures: unknown[] }> {
  if (!existsSync(CLIENT_PYTHON)) {
    throw new Error(
      `The pinned client tools (anthropic, openai) are not installed at ${CLIENT_PYTHON}: run \`bash scripts/client-tools.sh\``,
    );
  }
  return new Promise((resolve, reject) => {
    const child = spawn(CLIENT_PYTHON, [TYPES_CHECK], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${TYPES_CHECK} exited ${code}: ${err}`));
      resolve(JSON.parse(out) as { checked: number; failures: unknown[] });
    });
    child.stdin.end(JSON.stringify(cases));
  });
}

/** The images an answer in `format` carries, as `{mimeType, base64}`. */
function imagesOf(format: Format, answer: any): { mimeType: string; base64: string }[] {
  if (format === 'openai') return [];
  if (format === 'responses') {
    const output = answer.item.output;
    if (typeof output === 'string') return [];
    return output
      .filter((i: any) => i.type === 'input_image')
      .map((i: any) => {
        const [, mimeType, base64] = /^data:([^;]+);base64,(.*)$/s.exec(i.image_url)!;
        return { mimeType, base64 };
      });
  }
  if (typeof answer.content === 'string') return [];
  return answer.content
    .filter((b: any) => b.type === 'image')
    .map((b: any) => ({ mimeType: b.source.media_type, base64: b.source.data }));
}

/** The answer's text as a model reads it (its text blocks or items, joined). */
function textOf(format: Format, answer: any): string {
  const content = format === 'responses' ? answer.item.output : answer.content;
  if (typeof content === 'string') return content;
  return content
    .filter((b: any) => b.type === 'text' || b.type === 'input_text')
    .map((b: any) => b.text)
    .join('\n');
}

describe('images reach models as images: tool calls', () => {
  let engine: EngineHarness;
  let sid: string;
  let answerSchema: object;
  const cases: TypeCase[] = [];
  let n = 0;

  beforeAll(async () => {
    engine = await EngineHarness.start({
      SWITCHYARD_POOL_MIN: '0',
      SWITCHYARD_TOOL_IMAGE_MAX_BYTES: String(CAP),
      SWITCHYARD_RESULT_MAX_BYTES: String(RESULT_CAP),
    });
    sid = await engine.createSession();
    const written = await engine.action(sid, { type: 'code', language: 'python', code: WRITE_FILES });
    expect({ status: written.status, stdout: written.stdout }).toEqual({
      status: 'succeeded',
      stdout: `${Object.keys(FILES).length}\n`,
    });
    const doc = (await engine.request('GET', '/docs-json')).body;
    // The answer's schema refers to the document's components (`ToolCallAnswer`, …): they go along.
    answerSchema = {
      ...doc.paths['/v1/sessions/{sessionId}/tool-calls'].post.responses['200'].content['application/json']
        .schema,
      components: doc.components,
    };
  });
  afterAll(() => engine?.stop());

  /** Runs one call of `name` in every shape (one batch); each answer is also checked against the OpenAPI document. */
  async function inEveryShape(name: string, input: Record<string, unknown>): Promise<Record<Format, any>> {
    const ids = FORMATS.map((f) => `${f}_${++n}`);
    const res = await engine.request(
      'POST',
      `/v1/sessions/${sid}/tool-calls`,
      FORMATS.map((f, i) => callIn(f, ids[i], name, input)),
    );
    expect(res.status).toBe(200);
    const validate = new Ajv({ strict: false, validateFormats: false }).compile(answerSchema);
    expect({ valid: validate(res.body), errors: validate.errors ?? null }).toEqual({
      valid: true,
      errors: null,
    });
    return Object.fromEntries(FORMATS.map((f, i) => [f, res.body[i]])) as Record<Format, any>;
  }

  /** Keeps an answer for the types check, with the images it must carry. */
  const keep = (
    name: string,
    format: Format,
    answer: any,
    images: Buffer[],
    mimeType = 'image/png',
  ): void => {
    cases.push({
      name,
      format,
      answer,
      images: format === 'openai' ? [] : images.map((b) => ({ mimeType, base64: b.toString('base64') })),
    });
  };

  it.each([
    ['img/chart.png', SMALL, 'image/png'],
    ['img/photo.jpg', JPEG, 'image/jpeg'],
    ['img/anim.gif', GIF, 'image/gif'],
    ['img/pic.webp', WEBP, 'image/webp'],
    ['img/figure', MID, 'image/png'],
  ])(
    'a read of %s answers the image in each shape (told by its bytes), a line naming it',
    async (file, bytes, mime) => {
      const answers = await inEveryShape('read', { path: file });
      const line = `[image]\n${file}: ${mime}, `;
      for (const format of FORMATS) {
        const answer = answers[format];
        expect(answer.is_error).toBe(false);
        keep(`read ${file}`, format, answer, [bytes], mime);
        expect(textOf(format, answer)).toMatch(
          new RegExp(`^\\[image\\]\\n${file}: ${mime}, [\\d.]+ (B|KiB)`),
        );
        if (format === 'openai') {
          expect(answer.message.content).toContain(line);
          expect(answer.message.content).toContain(
            `not shown (this tool result takes text only): it is the workspace file ${file}`,
          );
        } else {
          expect(imagesOf(format, answer)).toEqual([{ mimeType: mime, base64: bytes.toString('base64') }]);
        }
      }
      // The text forms name it too; no base64 in any text.
      expect(answers.responses.content).toBe(answers.openai.content);
      for (const format of FORMATS)
        expect(textOf(format, answers[format])).not.toContain(bytes.toString('base64'));
    },
  );

  it('names an image over SWITCHYARD_TOOL_IMAGE_MAX_BYTES with where it is, attaching nothing', async () => {
    const answers = await inEveryShape('read', { path: 'img/big.png' });
    for (const format of FORMATS) {
      const answer = answers[format];
      keep('read img/big.png', format, answer, []);
      expect(textOf(format, answer)).toMatch(
        /^\[image\]\nimg\/big\.png: image\/png, [\d.]+ KiB; not attached: over the 64 KiB image cap \(SWITCHYARD_TOOL_IMAGE_MAX_BYTES\); it is the workspace file img\/big\.png$/,
      );
    }
    expect(answers.anthropic.content).toEqual(expect.any(String));
    expect(answers.responses.item.output).toEqual(expect.any(String));
  });

  it('keeps what is no such image as text: an SVG, a .png holding text, a BMP (base64 as before)', async () => {
    const svg = await inEveryShape('read', { path: 'img/drawing.svg' });
    const notes = await inEveryShape('read', { path: 'img/notes.png' });
    const bmp = await inEveryShape('read', { path: 'img/old.bmp' });
    for (const format of FORMATS) {
      expect(textOf(format, svg[format])).toBe(SVG);
      expect(textOf(format, notes[format])).toBe('not a picture\n');
      expect(textOf(format, bmp[format])).toBe(BMP.toString('base64'));
      keep('read img/drawing.svg', format, svg[format], []);
    }
    expect(svg.anthropic.content).toBe(SVG);
  });

  it("answers a python cell's display() of an object with _repr_png_ as an image; Chat names output.results", async () => {
    const defined = await inEveryShape('python', { code: DOT });
    expect(defined.plain).toMatchObject({ is_error: false });
    const answers = await inEveryShape('python', { code: "show('img/chart.png')" });
    for (const format of FORMATS) {
      const answer = answers[format];
      keep('display chart', format, answer, [SMALL]);
      expect(textOf(format, answer)).toMatch(
        /^\[display\]\n<Dot img\/chart\.png>\n\[display image\/png\]\nimage\/png, 16x16, [\d.]+ (B|KiB)/,
      );
    }
    expect(imagesOf('anthropic', answers.anthropic)).toEqual([
      { mimeType: 'image/png', base64: SMALL.toString('base64') },
    ]);
    expect(answers.anthropic.content[2]).toEqual({ type: 'text', text: '[exit_code]\n0' });
    // Chat Completions takes text only: the line says where the image is, and it is there.
    const where = /it is output\.results\[0\] of action (act_\w+) \(GET (\/v1\/sessions\/[^)]+)\)/.exec(
      answers.openai.message.content,
    );
    expect(where).not.toBeNull();
    const action = await engine.request('GET', where![2]);
    expect(action.body.id).toBe(where![1]);
    expect(action.body.output.results[0].data['image/png']).toBe(SMALL.toString('base64'));
  });

  it("attaches a cell's image the results' cap wrote to a workspace file, and names one over the image cap", async () => {
    const mid = await inEveryShape('python', { code: "show('img/figure')" });
    for (const format of FORMATS) keep('display figure (a results file)', format, mid[format], [MID]);
    expect(textOf('anthropic', mid.anthropic)).toContain('[display image/png]\nimage/png, 120x120, ');
    expect(imagesOf('anthropic', mid.anthropic)).toEqual([
      { mimeType: 'image/png', base64: MID.toString('base64') },
    ]);
    const file = /it is the workspace file (\.switchyard\/results\/\S+\.png)/.exec(mid.openai.content)?.[1];
    expect(file).toBeDefined();

    const big = await inEveryShape('python', { code: "show('img/big.png')" });
    for (const format of FORMATS) {
      keep('display big (over the image cap)', format, big[format], []);
      expect(textOf(format, big[format])).toMatch(
        /\[display image\/png\]\nimage\/png, 200x200, [\d.]+ KiB; not attached: over the 64 KiB image cap \(SWITCHYARD_TOOL_IMAGE_MAX_BYTES\); it is the workspace file \.switchyard\/results\/\S+\.png/,
      );
    }
  });

  it('answers a matplotlib chart of a data-science session as an image', async () => {
    const ds = await engine.createSession({ template: 'data-science' });
    const code = 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("rising")\nNone';
    const res = await engine.request('POST', `/v1/sessions/${ds}/tool-calls`, [
      callIn('anthropic', 'mpl_a', 'python', { code }),
      callIn('responses', 'mpl_r', 'python', { code }),
    ]);
    expect(res.status).toBe(200);
    const [anthropic, responses] = res.body;
    expect(anthropic.is_error).toBe(false);
    expect(anthropic.content[0]).toEqual({
      type: 'text',
      text: expect.stringMatching(
        /\[display\]\n<Figure size \d+x\d+ with 1 Axes>\n\[display image\/png\]\nimage\/png, \d+x\d+, [\d.]+ KiB$/,
      ),
    });
    const [chart] = imagesOf('anthropic', anthropic);
    expect(chart.mimeType).toBe('image/png');
    const raw = Buffer.from(chart.base64, 'base64');
    expect(raw.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    expect(raw.readUInt32BE(16)).toBeGreaterThan(300); // its width
    cases.push({ name: 'matplotlib', format: 'anthropic', answer: anthropic, images: [chart] });
    cases.push({
      name: 'matplotlib',
      format: 'responses',
      answer: responses,
      images: imagesOf('responses', responses),
    });
    expect(imagesOf('responses', responses)).toHaveLength(1);
    await engine.request('DELETE', `/v1/sessions/${ds}`);
  });

  it('lists Responses API tools (format=openai-responses, strict or not) for the types check below', async () => {
    for (const query of ['format=openai-responses', 'format=openai-responses&strict=false']) {
      const { tools } = (await engine.request('GET', `/v1/tools?${query}`)).body;
      expect(tools.length).toBeGreaterThan(10);
      for (const tool of tools) {
        cases.push({ name: `${query} ${tool.name}`, format: 'responses-tool', answer: tool, images: [] });
      }
    }
  });

  // Last: every answer kept above, through the packages' own types.
  it("every answer is what the anthropic and openai packages' types take, images and all", async () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    const verdict = await checkTypes(cases);
    expect(verdict).toEqual({ checked: cases.length, failures: [] });
  });

  it('the types check refuses what those APIs refuse (so its passing means something)', async () => {
    const png64 = SMALL.toString('base64');
    const wrong: TypeCase[] = [
      {
        name: 'an SVG image block',
        format: 'anthropic',
        answer: {
          type: 'tool_result',
          tool_use_id: 't',
          is_error: false,
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/svg+xml', data: 'PHN2Zy8+' } },
          ],
        },
        images: [],
      },
      {
        name: 'an image in a Chat Completions tool message',
        format: 'openai',
        answer: {
          tool_use_id: 't',
          tool_call_id: 't',
          content: 'x',
          is_error: false,
          message: {
            role: 'tool',
            tool_call_id: 't',
            content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${png64}` } }],
          },
        },
        images: [],
      },
      {
        name: 'is_error inside the message',
        format: 'openai',
        answer: {
          tool_use_id: 't',
          tool_call_id: 't',
          content: 'x',
          is_error: false,
          message: { role: 'tool', tool_call_id: 't', content: 'x', is_error: false },
        },
        images: [],
      },
      {
        name: 'an image_url that is no URL item',
        format: 'responses',
        answer: {
          tool_use_id: 't',
          call_id: 't',
          content: 'x',
          is_error: false,
          item: { type: 'function_call_output', call_id: 't', output: [{ type: 'input_image', url: png64 }] },
        },
        images: [],
      },
    ];
    const verdict = await checkTypes(wrong);
    expect((verdict.failures as { name: string }[]).map((f) => f.name)).toEqual(wrong.map((w) => w.name));
  });
});

describe('images reach models as images: MCP', () => {
  let engine: EngineHarness;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  let engineSession: string;

  beforeAll(async () => {
    // The default results' caps (1 MiB a result): a cell's images stay in output.results, here over a 32 KiB cap.
    engine = await EngineHarness.start({
      SWITCHYARD_POOL_MIN: '0',
      SWITCHYARD_TOOL_IMAGE_MAX_BYTES: '32768',
    });
    transport = new StreamableHTTPClientTransport(new URL(`${engine.baseUrl}/mcp`));
    client = new Client({ name: 'switchyard-e2e-images', version: '1.0.0' });
    await client.connect(transport);
    engineSession = /engine session (ses_[0-9a-f]+)/.exec(client.getInstructions() ?? '')![1];
    const written = await call('python', { code: `${WRITE_FILES}\n${DOT}` });
    expect(written.isError).toBe(false);
  });
  afterAll(async () => {
    await client?.close();
    await engine?.stop();
  });

  const call = async (name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  const images = (r: CallToolResult) =>
    r.content.filter((c) => c.type === 'image') as { type: 'image'; data: string; mimeType: string }[];
  const text = (r: CallToolResult): string =>
    r.content
      .filter((c) => c.type === 'text')
      .map((c) => (c as { text: string }).text)
      .join('\n');

  it('a read of a PNG is image content whose bytes are the PNG, after the text naming it', async () => {
    const r = await call('read', { path: 'img/chart.png' });
    expect(r.isError).toBe(false);
    expect(r.content.map((c) => c.type)).toEqual(['text', 'image']);
    expect(text(r)).toMatch(/^\[image\]\nimg\/chart\.png: image\/png, [\d.]+ (B|KiB)$/);
    const [image] = images(r);
    expect(image.mimeType).toBe('image/png');
    expect(Buffer.from(image.data, 'base64').equals(SMALL)).toBe(true);
    // And a JPEG named as nothing at all is told by its bytes.
    const jpeg = images(await call('read', { path: 'img/photo.jpg' }));
    expect(jpeg.map((i) => [i.mimeType, Buffer.from(i.data, 'base64').equals(JPEG)])).toEqual([
      ['image/jpeg', true],
    ]);
  });

  it("a cell's displayed PNG is image content; one over the cap is named with the action that holds it", async () => {
    const shown = await call('python', { code: "show('img/chart.png')" });
    expect(shown.isError).toBe(false);
    expect(images(shown).map((i) => Buffer.from(i.data, 'base64').equals(SMALL))).toEqual([true]);

    const over = await call('python', { code: "show('img/figure')" });
    expect(images(over)).toEqual([]);
    const where =
      /not attached: over the 32 KiB image cap \(SWITCHYARD_TOOL_IMAGE_MAX_BYTES\); it is output\.results\[0\] of action (act_\w+) \(GET (\/v1\/sessions\/ses_\w+\/actions\/act_\w+)\)/.exec(
        text(over),
      );
    expect(where).not.toBeNull();
    expect(where![2]).toBe(`/v1/sessions/${engineSession}/actions/${where![1]}`);
    const action = await engine.request('GET', where![2]);
    expect(action.body.output.results[0].data['image/png']).toBe(MID.toString('base64'));
  });
});

describe('SWITCHYARD_TOOL_IMAGE_MAX_BYTES', () => {
  it('defaults to 3.75 MiB (its base64 is 5 MiB) and is checked at boot, naming the variable', () => {
    expect(loadEngineConfig({}).tools.imageMaxBytes).toBe(3_932_160);
    expect(loadEngineConfig({ SWITCHYARD_TOOL_IMAGE_MAX_BYTES: '0' }).tools.imageMaxBytes).toBe(0);
    for (const bad of ['-1', 'lots', '1.5', String(64 * 2 ** 20 + 1)]) {
      let problems: string[] = [];
      try {
        loadEngineConfig({ SWITCHYARD_TOOL_IMAGE_MAX_BYTES: bad });
      } catch (err) {
        problems = err instanceof ConfigError ? err.problems.map((p) => p.variable) : [String(err)];
      }
      expect({ bad, problems }).toEqual({ bad, problems: ['SWITCHYARD_TOOL_IMAGE_MAX_BYTES'] });
    }
  });
});
