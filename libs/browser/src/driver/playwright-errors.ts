import { errors } from 'playwright-core';
import { type PageFailureKind, PageOperationError } from '../browser.errors';
import { clip } from '../browser-output';

// eslint-disable-next-line no-control-regex -- Playwright colours its call logs
const ANSI = /\x1b\[[0-9;]*m/g;

/** Playwright's message without its call log (either layout) and colours, at most 1000 characters. */
export function cleanMessage(err: unknown): string {
  const raw = err instanceof Error ? err.message : String(err);
  const text = raw
    .replace(ANSI, '')
    .split(/\n\s*(?:Call log:|=+ logs =+)/)[0]
    .trim();
  return clip(text, 1000);
}

const CLOSED =
  /Target page, context or browser has been closed|Browser has been closed|browser has disconnected|Target closed|Page closed|Context closed|has been closed/i;

/** Translates a Playwright rejection into a `PageOperationError` the router understands. */
export function toPageError(err: unknown, op: string): unknown {
  if (err instanceof PageOperationError) return err;
  const message = cleanMessage(err);
  const fail = (kind: PageFailureKind, code: string) =>
    new PageOperationError(kind, code, message, { cause: err });
  if (err instanceof errors.TimeoutError) return fail('timeout', 'TIMEOUT');
  if (CLOSED.test(message)) return fail('closed', 'PAGE_CLOSED');
  const net = /net::(ERR_[A-Z_]+)/.exec(message);
  if (net) return fail('navigation', net[1]);
  if (/interrupted by another navigation/.test(message)) return fail('navigation', 'NAVIGATION_INTERRUPTED');
  // A selector Playwright cannot parse is the caller's input, not a fault of the engine.
  if (/while parsing (?:css )?selector|Unknown engine|Unexpected token .* selector/i.test(message)) {
    return fail('selector', 'INVALID_SELECTOR');
  }
  if (
    /strict mode violation|not an? <?(?:select|input|checkbox|radio)|Element is not|is not a|does not|no element/i.test(
      message,
    )
  ) {
    return fail('selector', 'SELECTOR');
  }
  if (op === 'evaluate') return fail('script', 'SCRIPT_ERROR');
  if (/Unknown key|Invalid|Cannot|Unsupported|not supported/i.test(message))
    return fail('other', 'INVALID_OPERATION');
  return err;
}
