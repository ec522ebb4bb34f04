import type { ActionResult, ActionType } from '@switchyard/common';
import { richResultParts } from './rich-results-parts';
import { type DraftPart, imageParts } from './tool-image-parts';
import { imageTypeOfBase64 } from './tool-images';

/**
 * An action's result as a tool's answer, before it takes the shape of the call's API: `[stdout]…[stderr]…
 * [result]…[exit_code]…` for code (with a stateful cell's rich results), the op's output for files and the rest;
 * engine failures lead with `[error]`. Images are parts of their own: a read of a PNG, JPEG, GIF or WebP file, a
 * cell's image results, a browser action's image artifacts (workspace files, read when the answer is built).
 */

const TRUNCATED = '...(truncated)';
/** Keys of a file op's output that is its content (a read), answered as that content. */
const CONTENT_KEYS = ['content', 'truncated', 'path', 'lines', 'totalLines', 'offset', 'encoding', 'size'];

export interface ContentContext {
  /** Images larger than this are named, not attached (SWITCHYARD_TOOL_IMAGE_MAX_BYTES). */
  maxImageBytes: number;
}

export interface DraftOutcome {
  parts: DraftPart[];
  is_error: boolean;
}

const text = (t: string): DraftPart => ({ type: 'text', text: t });

function section(name: string, body: string | undefined, truncated = false): DraftPart[] {
  if (!body && !truncated) return [];
  return [text(`[${name}]\n${body ?? ''}${truncated ? TRUNCATED : ''}`)];
}

function codeParts(r: ActionResult, ctx: ContentContext): DraftPart[] {
  const { result, note, results } = (r.output ?? {}) as {
    result?: unknown;
    note?: unknown;
    results?: unknown;
  };
  const rich = richResultParts(results, { ...ctx, actionId: r.id, sessionId: r.sessionId });
  return [
    ...section('stdout', r.stdout, r.truncated.stdout),
    ...section('stderr', r.stderr, r.truncated.stderr),
    ...rich.displays,
    ...(typeof result === 'string' ? [text(`[result]\n${result}`)] : []),
    ...rich.main,
    ...(typeof note === 'string' ? [text(`[note]\n${note}`)] : []),
    ...(r.exitCode !== undefined ? [text(`[exit_code]\n${r.exitCode}`)] : []),
  ];
}

/** A read's content; a read of an image (base64, told by its bytes) is the image and a line naming it. */
function readParts(out: Record<string, unknown>, ctx: ContentContext): DraftPart[] {
  const content = out.content as string;
  if (out.encoding === 'base64' && typeof out.path === 'string' && imageTypeOfBase64(content)) {
    const where = `the workspace file ${out.path}`;
    return imageParts(content, { header: '[image]', lead: `${out.path}: `, where }, ctx.maxImageBytes);
  }
  return [text(`${content}${out.truncated === true ? TRUNCATED : ''}`)];
}

/** The image files a browser action saved (`output.artifacts`), to attach after its text. */
function artifactParts(output: unknown): DraftPart[] {
  const artifacts = (output as { artifacts?: unknown } | null)?.artifacts;
  if (!Array.isArray(artifacts)) return [];
  const parts: DraftPart[] = [];
  for (const a of artifacts as unknown[]) {
    const { path, mimeType, bytes } = (a ?? {}) as { path?: unknown; mimeType?: unknown; bytes?: unknown };
    if (typeof path !== 'string' || typeof mimeType !== 'string' || !mimeType.startsWith('image/')) continue;
    parts.push({
      type: 'image-file',
      path,
      header: '[image]',
      lead: `${path}: `,
      dims: '',
      declared: mimeType,
      ...(typeof bytes === 'number' && { bytes }),
    });
  }
  return parts;
}

export function toContent(kind: ActionType, r: ActionResult, ctx: ContentContext): DraftOutcome {
  const failed = r.status !== 'succeeded';
  const parts: DraftPart[] = [];
  if (r.error && r.status !== 'failed') parts.push(text(`[error]\n${r.status}: ${r.error.message}`));
  if (kind === 'code') {
    parts.push(...codeParts(r, ctx));
  } else if (r.error && r.status === 'failed') {
    parts.push(text(`[error]\n${r.error.message}`));
    if (r.output !== undefined) parts.push(text(JSON.stringify(r.output)));
  } else if (r.output !== undefined) {
    const out = r.output as Record<string, unknown>;
    if (typeof out.content === 'string' && Object.keys(out).every((k) => CONTENT_KEYS.includes(k))) {
      parts.push(...readParts(out, ctx));
    } else {
      parts.push(text(JSON.stringify(r.output)));
    }
  }
  for (const hint of r.hints ?? []) parts.push(text(`[hint]\n${hint}`));
  if (kind === 'browser' && !failed) parts.push(...artifactParts(r.output));
  return { parts, is_error: failed };
}
