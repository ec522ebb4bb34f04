import * as path from 'node:path';
import type { ActionError } from '@switchyard/common';
import type { BrowserOutcome } from './browser.types';

/** `s` at most `n` characters long. */
export function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

/** A download's own name, reduced to something safe as one path component. */
export function safeName(name: string | undefined): string {
  const base = (name ?? '').split(/[\\/]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex -- control characters are exactly what must go
  const noControls = base.replace(/[\x00-\x1f\x7f%]/g, '_');
  const cleaned = noControls.replace(/^\.+/, '_').slice(0, 200);
  return cleaned || 'download';
}

const MIME: Record<string, string> = {
  '.txt': 'text/plain',
  '.csv': 'text/csv',
  '.json': 'application/json',
  '.html': 'text/html',
  '.pdf': 'application/pdf',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.zip': 'application/zip',
};

export function mimeTypeOf(name: string): string {
  return MIME[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * Caps strings in an op's data at `maxBytes` (UTF-8), and evaluate's `value` by its JSON, flagging
 * `truncated` and the original size (`<key>Bytes`); other values pass through.
 */
export function capData(
  data: Record<string, unknown> | undefined,
  maxBytes: number,
): Record<string, unknown> | undefined {
  if (!data) return undefined;
  let truncated = false;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) {
    const text = typeof v === 'string' ? v : k === 'value' && v !== undefined ? JSON.stringify(v) : undefined;
    if (text !== undefined && Buffer.byteLength(text) > maxBytes) {
      out[k] = Buffer.from(text)
        .subarray(0, maxBytes)
        .toString('utf8')
        .replace(/\uFFFD$/, '');
      out[`${k}Bytes`] = Buffer.byteLength(text);
      truncated = true;
    } else {
      out[k] = v;
    }
  }
  return truncated ? { ...out, truncated: true } : out;
}

/** An outcome with an error and nothing else (no page to report on). */
export function fault(status: BrowserOutcome['status'], error: ActionError): BrowserOutcome {
  return { status, error, files: [] };
}

/** The outcome of an action whose signal fired (`AbortedError`). */
export function aborted(err: Error): BrowserOutcome {
  return fault('error', {
    class: 'internal',
    code: 'ABORTED',
    message: `the action was stopped: ${err.message}`,
  });
}
