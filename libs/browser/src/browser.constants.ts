/** Injection token of the resolved `ResolvedBrowserOptions`. */
export const BROWSER_OPTIONS = Symbol('switchyard:browser:options');

/** Injection token of the `HostResolver` the URL policy uses (default: `dns.lookup`); tests inject one. */
export const BROWSER_HOST_RESOLVER = Symbol('switchyard:browser:host-resolver');

/** Flags that work for Debian's Chromium on these machines (headless, as root, no GPU, no QUIC). */
export const DEFAULT_LAUNCH_ARGS: readonly string[] = Object.freeze([
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]);

/**
 * Injection token of the `SessionPortDialer` that makes `localhost` in a session's pages its own sandbox; optional
 * (without it loopback is refused).
 */
export const BROWSER_SESSION_PORTS = Symbol('switchyard:browser:session-ports');
