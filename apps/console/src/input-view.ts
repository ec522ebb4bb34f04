/**
 * An action's input (and the output of the types without rich results) as a person reads it: short values as
 * facts, code, commands and file contents as blocks of text with their real line breaks and their language, never
 * as JSON-escaped strings. Inputs are untrusted JSON: anything of an unexpected shape is shown as JSON text, and
 * every block is bounded so a huge input cannot freeze the page.
 */

/** Longest text drawn for one block; the rest is counted, not drawn. */
export const MAX_BLOCK = 100_000;
/** A string longer than this (or with a line break) is a block, not a fact. */
const INLINE = 80;
/** Largest image (base64 characters) drawn from a file action's own content. */
export const MAX_IMAGE_BASE64 = 16 * 1024 * 1024;

export interface Fact {
  key: string;
  value: string;
}

export interface Block {
  key: string;
  /** What the text is written in: `python`, `bash`, `json`, `text`… (a `<pre data-language>`). */
  language: string;
  text: string;
  omitted: number;
}

export interface InlineImage {
  key: string;
  mime: string;
  src: string;
}

export interface ValueView {
  facts: Fact[];
  blocks: Block[];
  images: InlineImage[];
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const EXTENSIONS: Record<string, string> = {
  py: 'python',
  js: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  jsx: 'javascript',
  ts: 'typescript',
  tsx: 'typescript',
  sh: 'bash',
  bash: 'bash',
  json: 'json',
  html: 'html',
  htm: 'html',
  css: 'css',
  md: 'markdown',
  yaml: 'yaml',
  yml: 'yaml',
  toml: 'toml',
  sql: 'sql',
  rs: 'rust',
  go: 'go',
  java: 'java',
  c: 'c',
  h: 'c',
  cpp: 'cpp',
  rb: 'ruby',
  xml: 'xml',
  svg: 'xml',
  csv: 'csv',
  txt: 'text',
};

const IMAGE_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
};

function extension(path: unknown): string {
  if (typeof path !== 'string') return '';
  const name = path.split('/').pop() ?? '';
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

/** The language of a file by its name (`text` when unknown). */
export function languageOfPath(path: unknown): string {
  return EXTENSIONS[extension(path)] ?? 'text';
}

/** The image type of a file by its name, when it is one the page draws from bytes. */
export function imageTypeOfPath(path: unknown): string | undefined {
  return IMAGE_TYPES[extension(path)];
}

const CODE_LANGUAGES: Record<string, string> = { python: 'python', node: 'javascript', bash: 'bash' };

/** Which language a field of this object is written in: its code, a command, a script, a file's contents. */
function languageOf(key: string, owner: Record<string, unknown>): string {
  switch (key) {
    case 'code':
      return typeof owner.language === 'string' ? (CODE_LANGUAGES[owner.language] ?? owner.language) : 'text';
    case 'command':
      return 'bash';
    case 'script':
      return 'javascript';
    case 'content':
    case 'find':
    case 'replace':
      return owner.encoding === 'base64' ? 'base64' : languageOfPath(owner.path);
    default:
      return 'text';
  }
}

/** Fields always drawn as blocks, however short: they are code or a file's text. */
const CODE_KEYS = new Set(['code', 'command', 'script', 'content', 'find', 'replace', 'stdin']);

function block(key: string, language: string, text: string): Block {
  return text.length > MAX_BLOCK
    ? { key, language, text: text.slice(0, MAX_BLOCK), omitted: text.length - MAX_BLOCK }
    : { key, language, text, omitted: 0 };
}

function json(value: unknown, indent?: number): string {
  try {
    return JSON.stringify(value, null, indent) ?? String(value);
  } catch {
    return String(value);
  }
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A file action's base64 content of an image file, as a picture. */
function imageOf(key: string, value: string, owner: Record<string, unknown>): InlineImage | undefined {
  const mime = imageTypeOfPath(owner.path);
  if (!mime || owner.encoding !== 'base64' || value.length > MAX_IMAGE_BASE64) return undefined;
  const base64 = value.replace(/\s+/g, '');
  if (base64.length === 0 || !BASE64.test(base64)) return undefined;
  return { key, mime, src: `data:${mime};base64,${base64}` };
}

/** How deep nested objects are opened into their own fields (`env.HOME`); deeper ones are JSON. */
const DEPTH = 3;

function walk(
  view: ValueView,
  owner: Record<string, unknown>,
  prefix: string,
  depth: number,
  skip: readonly string[],
) {
  for (const [own, v] of Object.entries(owner)) {
    const key = prefix + own;
    if (skip.includes(key) || v === undefined) continue;
    if (typeof v === 'string') {
      const image = own === 'content' ? imageOf(key, v, owner) : undefined;
      if (image) view.images.push(image);
      else if (CODE_KEYS.has(own) || v.includes('\n') || v.length > INLINE) {
        view.blocks.push(block(key, languageOf(own, owner), v));
      } else view.facts.push({ key, value: v });
    } else if (v === null || typeof v === 'number' || typeof v === 'boolean') {
      view.facts.push({ key, value: String(v) });
    } else if (typeof v !== 'object') {
      continue;
    } else if (isRecord(v) && depth < DEPTH && Object.keys(v).length > 0) {
      walk(view, v, `${key}.`, depth + 1, skip);
    } else {
      const short = json(v);
      if (short.length <= INLINE && !short.includes('\\n')) view.facts.push({ key, value: short });
      else view.blocks.push(block(key, 'json', json(v, 2)));
    }
  }
}

/**
 * An object's fields as facts and blocks, in its own order, nested objects opened into dotted keys; `skip` leaves
 * out keys shown elsewhere. A value that is not an object is one block.
 */
export function valueView(value: unknown, skip: readonly string[] = []): ValueView {
  const view: ValueView = { facts: [], blocks: [], images: [] };
  if (value === undefined || value === null) return view;
  if (isRecord(value)) walk(view, value, '', 1, skip);
  else if (typeof value === 'string') view.blocks.push(block('value', 'text', value));
  else view.blocks.push(block('value', 'json', json(value, 2)));
  return view;
}

/** An action's input: the type is shown beside it already. */
export function inputView(input: unknown): ValueView {
  return valueView(input, ['type']);
}
