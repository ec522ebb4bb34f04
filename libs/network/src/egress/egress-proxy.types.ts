import type { Duplex } from 'node:stream';
import type { EgressRecord } from '@switchyard/common';
import type { HostVerdict, UrlRefusal } from '../url-policy/url-policy';
import type { UpstreamProxy } from './upstream-proxy';

/** A connection the proxy refused, reported to whoever owns the browser context behind it. */
export interface EgressRefusal {
  /** `CONNECT` (https, websockets), `HTTP` (plain http) or `UPGRADE`. */
  via: 'CONNECT' | 'HTTP' | 'UPGRADE';
  host: string;
  port: number;
  /** Full URL for plain http; `host:port` for tunnels, whose path the proxy never sees. */
  target: string;
  refusal: UrlRefusal;
}

/**
 * One connection through the proxy, allowed or refused (with why), and its bytes in each direction, reported when it
 * ends (a refusal: at once): what an action's result shows (`EgressRecord`), plus how and when.
 */
export interface EgressAttempt extends EgressRecord {
  /**
   * Its number in this proxy, in the order connections were asked for (refusals included): a reader that has seen
   * every attempt up to a number, ended (`onAttempt`) or open (`openAttempts`), knows that none before it is missing.
   */
  seq: number;
  via: EgressRefusal['via'];
  /** It went by a `LocalRoute`, not to the network (its `reason` says where). */
  local?: boolean;
  /** Wall-clock milliseconds (`Date.now()`) when it was asked for and when it ended. */
  startedAt: number;
  endedAt: number;
}

/**
 * A way for a connection that is not the network: a browser's `localhost` opened as its session's own sandbox port.
 * The proxy dials nothing itself for it: `open` gives the stream.
 */
export interface LocalRoute {
  /** Where it goes, recorded as the allowed attempt's reason (`the session's own sandbox port`). */
  reason: string;
  /**
   * The stream to the target. A rejection's message is what the client is answered (502, marked `unreachable` with
   * the denial header) and what the attempt records.
   */
  open(): Promise<Duplex>;
}

export interface EgressProxyOptions {
  /**
   * Asked first about every request's canonical host and port. A `LocalRoute` takes the connection instead of the
   * network (neither `checkHost`, `vetoAddress` nor the upstream proxy is asked; the `Host` header must still name the
   * target); a refusal refuses it like any other; undefined leaves it to `checkHost`.
   */
  routeLocal?(host: string, port: number): LocalRoute | { refusal: UrlRefusal } | undefined;
  /**
   * The host decision (and for egress, the port's); the proxy connects only to an address it returns. `host` is the
   * request's one canonical host (see `Authority.host`): what was asked is what is checked, dialled and recorded.
   * `signal` aborts when the client goes away first (a check that waits, for a person's approval, stops waiting).
   */
  checkHost(host: string, port: number, signal: AbortSignal): Promise<HostVerdict>;
  /**
   * Extra veto on the address about to be dialled (e.g. the engine's own listeners on an allowlisted
   * loopback). Returns a reason to refuse, or undefined.
   */
  vetoAddress?(address: string, port: number): string | undefined;
  /**
   * Header name put on every refusal the proxy answers over plain http, with value `denied`. Keep it
   * unguessable: pages cannot make their own responses look like refusals.
   */
  denialHeader: string;
  onRefusal?(refusal: EgressRefusal): void;
  /** Every connection asked for, with its bytes, when it ends (accounting; refusals included). */
  onAttempt?(attempt: EgressAttempt): void;
  /**
   * The text a refusal is answered with: the body of a plain-http answer and, cleaned to one line, the reason phrase of
   * a refused tunnel (which is all a client such as curl or pip shows). Default: `Switchyard refused this request: …`.
   */
  refusalText?(refusal: UrlRefusal, host: string, port: number): string;
  /** Listen on this Unix socket path (made `mode`, default 0o666) instead of a loopback TCP port. */
  listenPath?: string;
  listenMode?: number;
  /** Dial timeout towards the target. Default 10 s. */
  connectTimeoutMs?: number;
  /**
   * Where allowed connections go instead of being dialled directly: tunnels (and upgrades) as a `CONNECT` of the
   * checked host through it, plain http as an absolute-URI request to it. The host is still checked (and resolved)
   * here first; the upstream hears only the canonical host that was checked.
   */
  upstream?: UpstreamProxy;
}
