/**
 * A rich result of a kernel cell: one Jupyter MIME bundle, as `display()` or the cell's final expression gave it.
 * The one shape from the kernel (docker/sandbox/runner/kernel_display.py) to `output.results`, the graph, tool
 * calls, MCP, the console and the Jupyter protocol.
 */
export interface DisplayResult {
  /**
   * MIME type → value, as Jupyter carries them: text types as strings, `image/png` and `image/jpeg` (and the other
   * bitmap types) as base64, `application/json` and `application/*+json` as a JSON value. `text/plain` is always there.
   */
  data: Record<string, unknown>;
  /** Per MIME type, e.g. `{"image/png": {"width": 640, "height": 480}}`. */
  metadata?: Record<string, unknown>;
  /** The value of the cell's final expression (Jupyter's `execute_result`); the others are `display_data`. */
  isMainResult?: true;
  /** Entries too big to inline (the per-result or per-cell cap), written to the session's workspace instead. */
  files?: DisplayFile[];
}

export interface DisplayFile {
  mimeType: string;
  /** Relative to the workspace root; null when it could not be written (`error` says why). */
  path: string | null;
  /** Of the entry's content (decoded bytes for images). */
  bytes: number;
  error?: string;
}

/** MIME types whose value is base64 of bytes. */
export const BINARY_MIME_TYPES: ReadonlySet<string> = new Set([
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
]);

const MIME = /^[a-z]+\/[A-Za-z0-9.+-]{1,100}$/;
const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** A result as a kernel sent it, checked into a `DisplayResult` (undefined when it is not one). */
export function displayResult(raw: Record<string, unknown>): DisplayResult | undefined {
  if (!isRecord(raw.data)) return undefined;
  const data: Record<string, unknown> = {};
  for (const [mime, value] of Object.entries(raw.data)) {
    if (!MIME.test(mime)) continue;
    const json = mime === 'application/json' || mime.endsWith('+json');
    if (json || typeof value === 'string') data[mime] = value;
  }
  if (typeof data['text/plain'] !== 'string') data['text/plain'] = '';
  const result: DisplayResult = { data };
  if (isRecord(raw.metadata) && Object.keys(raw.metadata).length > 0) result.metadata = raw.metadata;
  if (raw.isMainResult === true) result.isMainResult = true;
  if (Array.isArray(raw.files)) {
    const files = raw.files.filter(isRecord).flatMap((f): DisplayFile[] =>
      typeof f.mimeType === 'string' && typeof f.bytes === 'number'
        ? [
            {
              mimeType: f.mimeType,
              path: typeof f.path === 'string' ? f.path : null,
              bytes: f.bytes,
              ...(typeof f.error === 'string' && { error: f.error }),
            },
          ]
        : [],
    );
    if (files.length > 0) result.files = files;
  }
  return result;
}
