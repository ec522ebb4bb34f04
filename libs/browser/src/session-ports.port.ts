import type { Duplex } from 'node:stream';

/**
 * The session's own sandbox ports, as the engine lends them to the session's browser. In a page, `localhost`
 * (`127.0.0.1`, `[::1]`, `0.0.0.0`, `*.localhost`, in any spelling: see `isLocalhost`) is the session's own sandbox:
 * the context's egress proxy opens such a connection through `connect`, and never dials the engine host's loopback.
 * Provided by the engine under `BROWSER_SESSION_PORTS` (its `SessionPorts`); without it, loopback is refused like
 * any other private address. An address the operator allowlisted keeps its meaning (the engine host's).
 */
export interface SessionPortDialer {
  /**
   * Why `port` may not be opened (outside the engine's allowed ports, or ports turned off), naming the setting, as the
   * end of a sentence (`port 22 is outside SWITCHYARD_PORTS_ALLOWED (1024-65535)`); undefined when it may.
   */
  refusal(port: number): string | undefined;
  /**
   * A stream to `port` inside the session's sandbox, the box that holds its processes (never one opened for this).
   * Rejects when the session has no sandbox or nothing listens there, with a message for the page and the action
   * (and a `code`, e.g. `PORT_CLOSED`, when the error has one).
   */
  connect(sessionId: string, port: number): Promise<Duplex>;
}
