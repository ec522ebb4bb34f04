/**
 * What the console draws for a code cell's rich results (`output.results`: Jupyter-style MIME bundles). The output
 * is read as untrusted JSON: anything of the wrong shape is skipped or shown as text, and every part is bounded so
 * a huge result cannot freeze the page (the engine caps bytes too).
 */
import { frameDocument, frameHeight } from './html-frame';

/** Longest text shown for one result; the rest is counted, not drawn. */
export const MAX_TEXT = 100_000;
/** Longest HTML or SVG drawn as such; a longer one is shown as text. */
export const MAX_MARKUP = 512 * 1024;
/** Results shown for one action; the rest are counted. */
export const MAX_RESULTS = 100;

/** A MIME entry too big to inline, written to the session's workspace instead. */
export interface ResultFile {
  mimeType: string;
  path: string;
  bytes: number;
}

export type ResultBody =
  | { kind: 'image'; mime: string; src: string; width?: number; height?: number }
  | { kind: 'html'; mime: 'text/html'; srcdoc: string; height: number }
  | { kind: 'text'; mime: string; text: string; omitted: number };

/** One result as drawn: its richest MIME entry, the other types it had, and the entries kept as files. */
export interface ShownResult {
  /** The final expression's value (`Out:`); the others came from display(). */
  main: boolean;
  body?: ResultBody;
  others: string[];
  files: ResultFile[];
}

export interface ShownResults {
  results: ShownResult[];
  /** Results past MAX_RESULTS, not drawn. */
  omitted: number;
}

// Richest first, as a notebook picks (HTML before images), then the types shown as text.
const IMAGES = ['image/svg+xml', 'image/png', 'image/jpeg'];
const TEXTS = ['text/markdown', 'text/latex'];

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isJsonType = (mime: string) =>
  mime === 'application/json' || /^application\/[\w.+-]+\+json$/.test(mime);

function text(mime: string, value: string): ResultBody {
  return value.length > MAX_TEXT
    ? { kind: 'text', mime, text: value.slice(0, MAX_TEXT), omitted: value.length - MAX_TEXT }
    : { kind: 'text', mime, text: value, omitted: 0 };
}

function json(mime: string, value: unknown): ResultBody {
  if (typeof value === 'string') return text(mime, value);
  let pretty: string;
  try {
    pretty = JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    pretty = String(value);
  }
  return text(mime, pretty);
}

/** A positive size from the result's metadata: per MIME type as Jupyter keeps it, else at the top. */
function size(metadata: unknown, mime: string, key: 'width' | 'height'): number | undefined {
  const own = isRecord(metadata) && isRecord(metadata[mime]) ? metadata[mime][key] : undefined;
  const value = own ?? (isRecord(metadata) ? metadata[key] : undefined);
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.round(value) : undefined;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function image(mime: string, value: unknown, metadata: unknown): ResultBody | undefined {
  if (typeof value !== 'string') return undefined;
  let src: string;
  if (mime === 'image/svg+xml') {
    // As an <img> source an SVG is a picture: its scripts never run and it loads nothing.
    if (value.length > MAX_MARKUP) return undefined;
    src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(value)}`;
  } else {
    const base64 = value.replace(/\s+/g, '');
    if (base64.length === 0 || !BASE64.test(base64)) return undefined;
    src = `data:${mime};base64,${base64}`;
  }
  const width = size(metadata, mime, 'width');
  const height = size(metadata, mime, 'height');
  return { kind: 'image', mime, src, ...(width && { width }), ...(height && { height }) };
}

/** The richest entry of a bundle the console can draw, or undefined when it has none (its files only). */
function body(data: Record<string, unknown>, metadata: unknown): ResultBody | undefined {
  const html = data['text/html'];
  if (typeof html === 'string' && html.length <= MAX_MARKUP) {
    return { kind: 'html', mime: 'text/html', srcdoc: frameDocument(html), height: frameHeight(html) };
  }
  for (const mime of IMAGES) {
    const drawn = mime in data ? image(mime, data[mime], metadata) : undefined;
    if (drawn) return drawn;
  }
  for (const mime of TEXTS) if (typeof data[mime] === 'string') return text(mime, data[mime]);
  const jsonType = Object.keys(data).find(isJsonType);
  if (jsonType) return json(jsonType, data[jsonType]);
  const plain = data['text/plain'];
  if (typeof plain === 'string') return text('text/plain', plain);
  // An HTML too long to draw as a page is still worth reading as text.
  if (typeof html === 'string') return text('text/html', html);
  const other = Object.keys(data)[0];
  return other === undefined ? undefined : json(other, data[other]);
}

function files(value: unknown): ResultFile[] {
  if (!Array.isArray(value)) return [];
  return value.filter(
    (f): f is ResultFile =>
      isRecord(f) &&
      typeof f.mimeType === 'string' &&
      typeof f.path === 'string' &&
      typeof f.bytes === 'number' &&
      Number.isFinite(f.bytes),
  );
}

function shown(result: unknown): ShownResult | undefined {
  if (!isRecord(result) || !isRecord(result.data)) return undefined;
  const drawn = body(result.data, result.metadata);
  return {
    main: result.isMainResult === true,
    ...(drawn && { body: drawn }),
    others: Object.keys(result.data).filter((mime) => mime !== drawn?.mime),
    files: files(result.files),
  };
}

/**
 * A code action's output as results to draw: `output.results` in the order the cell made them; for an output
 * without them (an engine before rich results) its `output.result` as the cell's value.
 */
export function shownResults(output: unknown): ShownResults {
  if (!isRecord(output)) return { results: [], omitted: 0 };
  if (!Array.isArray(output.results)) {
    return typeof output.result === 'string'
      ? {
          results: [{ main: true, body: text('text/plain', output.result), others: [], files: [] }],
          omitted: 0,
        }
      : { results: [], omitted: 0 };
  }
  const results: ShownResult[] = [];
  for (const result of output.results.slice(0, MAX_RESULTS)) {
    const one = shown(result);
    if (one) results.push(one);
  }
  return { results, omitted: Math.max(0, output.results.length - MAX_RESULTS) };
}
