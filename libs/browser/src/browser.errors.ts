import { type ErrorKind, SwitchyardError } from '@switchyard/common';

/**
 * Base of the errors the browser tier throws on purpose. The router turns them into action outcomes; one
 * reaching the HTTP edge maps by `kind`.
 */
export abstract class BrowserError extends SwitchyardError {}

/** A browser option that cannot work (bad allowlist entry, relative executable path…). Stops the boot. */
export class BrowserConfigError extends BrowserError {
  readonly code = 'BROWSER_CONFIG';
  readonly kind: ErrorKind = 'invalid_input';

  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`, { setting });
  }
}

/** The browser could not be started (missing executable, crash at launch). Retriable: the next action retries. */
export class BrowserLaunchError extends BrowserError {
  readonly code = 'BROWSER_LAUNCH_FAILED';
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;
}

/** Kinds of failure a driver reports for one page operation. */
export type PageFailureKind =
  /** The operation's own timeout elapsed. */
  | 'timeout'
  /** The page, its context or its browser was closed while the operation ran. */
  | 'closed'
  /** Navigation failed at the network level (`net::ERR_*`), or a download did not come. */
  | 'navigation'
  /** Nothing matched the selector, or it matched something that cannot take the operation. */
  | 'selector'
  /** Page script threw (`evaluate`). */
  | 'script'
  /** A cap was hit (download bigger than allowed). */
  | 'limit'
  /** Anything else the browser rejected (bad key name, unsupported op on this page…). */
  | 'other';

/**
 * One page operation failed in a way the caller can act on. Drivers translate their library's errors into
 * this, so the router never sees Playwright types.
 */
export class PageOperationError extends BrowserError {
  readonly kind: ErrorKind = 'invalid_input';

  constructor(
    readonly failure: PageFailureKind,
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, { failure }, options);
  }
}
