import { type DraftPart, imageParts } from './tool-image-parts';
import { formatSize, MODEL_IMAGE_TYPES } from './tool-images';

/**
 * A stateful cell's rich results (`output.results`: Jupyter-style MIME bundles, in the order the cell produced them)
 * as parts of a tool's answer. Each entry of a bundle is a section: `[display]` its `text/plain`, then
 * `[display <mime>]` for each other entry (HTML, Markdown, LaTeX, SVG and JSON as text; PNG, JPEG, GIF and WebP
 * images as images, a line naming each); the final expression's bundle is `[result]` (its `text/plain` is the
 * answer's `[result]` section already). An entry the cell wrote to a workspace file (over the results' caps) is
 * named by its path, and an image file is attached when it is within the image cap.
 */

/** What this reads of a bundle (a `DisplayResult` of @switchyard/common, read defensively); the rest is ignored. */
interface Bundle {
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  isMainResult?: boolean;
  files?: unknown[];
}

export interface ResultsContext {
  actionId: string;
  sessionId: string;
  maxImageBytes: number;
}

export interface RichResultParts {
  /** The cell's displays, in order: before its `[result]` section. */
  displays: DraftPart[];
  /** The final expression's other representations: after its `[result]` section. */
  main: DraftPart[];
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isBundle = (v: unknown): v is Bundle => isObject(v) && isObject(v.data);

/** `640x480, ` when the bundle's metadata gives the image's size. */
function dimensions(metadata: unknown, mime: string): string {
  const m = isObject(metadata) ? metadata[mime] : undefined;
  if (!isObject(m) || typeof m.width !== 'number' || typeof m.height !== 'number') return '';
  return `${m.width}x${m.height}, `;
}

function bundleParts(bundle: Bundle, index: number, ctx: ResultsContext): DraftPart[] {
  const label = bundle.isMainResult === true ? 'result' : 'display';
  const parts: DraftPart[] = [];
  const plain = bundle.data['text/plain'];
  if (label === 'display' && typeof plain === 'string')
    parts.push({ type: 'text', text: `[display]\n${plain}` });
  const where =
    `output.results[${index}] of action ${ctx.actionId} ` +
    `(GET /v1/sessions/${ctx.sessionId}/actions/${ctx.actionId})`;
  for (const [mime, value] of Object.entries(bundle.data)) {
    if (mime === 'text/plain') continue;
    const header = `[${label} ${mime}]`;
    if (mime.startsWith('image/') && mime !== 'image/svg+xml' && typeof value === 'string') {
      const dims = dimensions(bundle.metadata, mime);
      parts.push(...imageParts(value, { header, lead: '', dims, declared: mime, where }, ctx.maxImageBytes));
    } else {
      parts.push({
        type: 'text',
        text: `${header}\n${typeof value === 'string' ? value : JSON.stringify(value)}`,
      });
    }
  }
  for (const file of bundle.files ?? []) {
    if (!isObject(file) || typeof file.mimeType !== 'string') continue;
    const bytes = typeof file.bytes === 'number' ? file.bytes : undefined;
    const header = `[${label} ${file.mimeType}]`;
    const size = bytes === undefined ? '' : `${formatSize(bytes)}, `;
    if (typeof file.path !== 'string') {
      const why = typeof file.error === 'string' ? `: ${file.error}` : '';
      parts.push({
        type: 'text',
        text: `${header}\n${size}over the results' caps and not written to the workspace${why}`,
      });
    } else if ((MODEL_IMAGE_TYPES as readonly string[]).includes(file.mimeType)) {
      parts.push({
        type: 'image-file',
        path: file.path,
        header,
        lead: '',
        dims: dimensions(bundle.metadata, file.mimeType),
        declared: file.mimeType,
        ...(bytes !== undefined && { bytes }),
      });
    } else {
      parts.push({
        type: 'text',
        text: `${header}\n${size}over the results' caps: it is the workspace file ${file.path}`,
      });
    }
  }
  return parts;
}

/** The parts of `output.results`; none when it is not a list of bundles. */
export function richResultParts(results: unknown, ctx: ResultsContext): RichResultParts {
  const out: RichResultParts = { displays: [], main: [] };
  if (!Array.isArray(results)) return out;
  results.forEach((bundle, index) => {
    if (!isBundle(bundle)) return;
    out[bundle.isMainResult === true ? 'main' : 'displays'].push(...bundleParts(bundle, index, ctx));
  });
  return out;
}
