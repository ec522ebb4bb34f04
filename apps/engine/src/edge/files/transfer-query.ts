import { InvalidInputError } from '@switchyard/common';
import type { ByteRange } from '../../session/workspaces/session-workspaces';

/** The `path` query parameter of a transfer: required for one file, the workspace root by default for an archive. */
export function pathParam(query: Record<string, unknown>, required: boolean): string {
  const path = query.path;
  if (path === undefined && !required) return '';
  if (typeof path !== 'string' || (required && path === '')) {
    throw new InvalidInputError(
      'path',
      'path must be given once: ?path=<path relative to the workspace root>',
    );
  }
  return path;
}

/** `overwrite=true|false` (default true). */
export function overwriteParam(query: Record<string, unknown>): boolean {
  const value = query.overwrite;
  if (value === undefined || value === 'true') return true;
  if (value === 'false') return false;
  throw new InvalidInputError('overwrite', 'overwrite must be true or false');
}

/**
 * One `bytes=start-end` or `bytes=start-` range (RFC 9110 §14.2). Anything else (no header, a suffix range, several
 * ranges, another unit, a malformed one) is ignored, as the RFC allows: the whole file is sent with a 200.
 */
export function rangeHeader(header: string | undefined): ByteRange | undefined {
  const m = /^bytes=(\d{1,15})-(\d{0,15})$/.exec(header?.trim() ?? '');
  if (!m) return undefined;
  const start = Number(m[1]);
  if (m[2] === '') return { start };
  const end = Number(m[2]);
  return end < start ? undefined : { start, end };
}
