/**
 * What a timeline row shows of an action's product at a glance: the first picture it made (a chart, an image file
 * it read) as a thumbnail, else a chip naming what it holds (an HTML table, a screenshot). Worked out once per
 * action object: rows are drawn again on every scroll.
 */
import { imageTypeOfPath } from './input-view';
import { shownResults } from './results';

export type RowPreview =
  { kind: 'image'; src: string; mime: string } | { kind: 'chip'; label: string } | undefined;

interface Previewed {
  type: string;
  output?: unknown;
  status: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A thumbnail is drawn from at most this many base64 characters; a bigger picture gets a chip. */
const MAX_THUMB_BASE64 = 2 * 1024 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function compute(action: Previewed): RowPreview {
  const output = action.output;
  if (!isRecord(output)) return undefined;
  if (action.type === 'code') {
    const { results } = shownResults(output);
    const image = results.find((r) => r.body?.kind === 'image')?.body;
    if (image?.kind === 'image' && image.src.length <= MAX_THUMB_BASE64) {
      return { kind: 'image', src: image.src, mime: image.mime };
    }
    if (image) return { kind: 'chip', label: 'image' };
    if (results.some((r) => r.body?.kind === 'html')) return { kind: 'chip', label: 'html' };
    return undefined;
  }
  if (action.type === 'file' && output.encoding === 'base64' && typeof output.content === 'string') {
    const mime = imageTypeOfPath(output.path);
    if (!mime) return undefined;
    return output.content.length <= MAX_THUMB_BASE64 && BASE64.test(output.content)
      ? { kind: 'image', src: `data:${mime};base64,${output.content}`, mime }
      : { kind: 'chip', label: 'image' };
  }
  if (action.type === 'browser' && Array.isArray(output.artifacts) && output.artifacts.length > 0) {
    const mime = String((output.artifacts[0] as { mimeType?: unknown }).mimeType);
    return {
      kind: 'chip',
      label: mime.startsWith('image/') ? 'screenshot' : mime === 'application/pdf' ? 'pdf' : 'file',
    };
  }
  return undefined;
}

const cache = new WeakMap<object, RowPreview>();

export function rowPreview(action: Previewed): RowPreview {
  if (action.status === 'running') return undefined;
  if (cache.has(action)) return cache.get(action);
  const preview = compute(action);
  cache.set(action, preview);
  return preview;
}
