/**
 * The document an HTML result is drawn in: a `srcdoc` for an `<iframe sandbox="">` (no scripts, an opaque origin),
 * with its own Content-Security-Policy so the result loads nothing either (no remote images, fonts or stylesheets
 * that would tell a server someone looked), and a small stylesheet so tables such as a DataFrame's read well.
 */

/** What the frame's document may load: its own inline styles and data: images, nothing else. */
export const FRAME_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

const STYLE = [
  'body{margin:0;padding:4px;font:13px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827}',
  'table{border-collapse:collapse;font-size:12px;margin:0}',
  'th,td{border:1px solid #d1d5db;padding:3px 8px;text-align:right;vertical-align:top}',
  'td{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-variant-numeric:tabular-nums}',
  'th{background:#f3f4f6;font-weight:600}',
  'tbody tr:nth-child(even){background:#f9fafb}',
  'img{max-width:100%}',
].join('');

/**
 * The whole document: the policy comes first in the head, so it is in force before any of the result is parsed
 * (a policy the result itself carries further down can only narrow it).
 */
export function frameDocument(html: string): string {
  return (
    '<!doctype html><html><head><meta charset="utf-8">' +
    `<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">` +
    `<style>${STYLE}</style></head><body>${html}</body></html>`
  );
}

const ROW = 23; // px: one table row in the stylesheet above
const LINE = 19; // px: one line of text or block
// The body's padding, and room for a scroll bar under a table wider than the frame.
const MARGIN = 24;
const MIN_HEIGHT = 48;
const MAX_HEIGHT = 480;
// A count stops here: past it the frame is at its tallest anyway, and the count costs nothing more.
const MAX_COUNT = 64;

function count(html: string, pattern: RegExp): number {
  let n = 0;
  pattern.lastIndex = 0;
  while (n < MAX_COUNT && pattern.exec(html)) n++;
  return n;
}

/**
 * How tall to make the frame, in px. A sandboxed frame of an opaque origin cannot be measured from the page, so
 * the height is guessed from the markup (its table rows, else its blocks and line breaks, else its length) and held
 * between a few lines and a screenful; what does not fit scrolls inside the frame.
 */
export function frameHeight(html: string): number {
  const rows = count(html, /<tr[\s>]/gi);
  if (rows > 0) return Math.max(MIN_HEIGHT, Math.min(MAX_HEIGHT, rows * ROW + MARGIN));
  const blocks = count(html, /<(?:p|div|li|h[1-6]|br|pre|caption)[\s>/]/gi);
  const textLines = Math.ceil(Math.min(html.length, MAX_COUNT * 100) / 100);
  return Math.max(MIN_HEIGHT, Math.min(MAX_HEIGHT, Math.max(blocks, textLines) * LINE + MARGIN));
}
