import { isIPv6 } from 'node:net';
import { domainToASCII } from 'node:url';

/**
 * The one host a proxy request names, parsed strictly and normalised once. The proxy checks this value against every
 * policy, resolves it, dials what it resolved to and records it: nothing downstream parses the request again, so no
 * two parsers can disagree on which host it was (`CONNECT 93.184.216.34/.allowed.test:443` was matched against
 * `*.allowed.test` by one and dialled as 93.184.216.34 by the other).
 */
export interface Authority {
  /**
   * Lower case, no trailing dot, IDNA (punycode) applied; IPv4 as a dotted quad (number forms such as `127.1` or
   * `2852039166` become the address they mean, as a resolver would read them); IPv6 compressed, without brackets.
   */
  host: string;
  port: number;
  kind: 'name' | 'ipv4' | 'ipv6';
}

/** A proxy request's target in absolute form (`http://host[:port]/path?query`), with its authority parsed. */
export interface ProxyTarget extends Authority {
  /** `http:` or `ws:`, lower case. */
  scheme: string;
  /** What goes on the request line towards the target: path and query as sent (`/` when absent), no fragment. */
  path: string;
}

/** Why a request's target was not accepted: one sentence naming what is wrong. */
export interface AuthorityError {
  reason: string;
}

const MAX_AUTHORITY_CHARS = 300;
/** RFC 3986 dec-octet: 0–255 without leading zeros. */
const DEC_OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`^${DEC_OCTET}(?:\\.${DEC_OCTET}){3}$`);
/**
 * The reg-names a DNS name can be: labels of letters, digits, `-` and `_`, or non-ASCII letters (an IDN, converted
 * to punycode next), separated by single dots, with at most one trailing dot. RFC 3986 allows more in a reg-name
 * (sub-delims, percent-encoding); none of it names a host that DNS can resolve, so it is refused rather than
 * interpreted.
 */
const REG_NAME = /^(?:[A-Za-z0-9_\-\u0080-\uffff]+\.)*[A-Za-z0-9_\-\u0080-\uffff]+\.?$/u;
/** A name once normalised: ASCII labels of 1 to 63 characters, 253 in all. */
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*$/;
/**
 * Path and query as clients send them: printable ASCII (some leave `[]{}|` unencoded). They play no part in where
 * the request goes: the authority was cut off before them.
 */
const PATH_AND_QUERY = /^[\x21-\x7e]*$/;

const fail = (reason: string): AuthorityError => ({ reason });
const show = (s: string): string => JSON.stringify(s.length > 80 ? `${s.slice(0, 79)}…` : s);

/**
 * Parses an RFC 3986 `host[:port]`, strictly: `reg-name`, an IPv4 address or a bracketed IPv6 address, then a port
 * of 1 to 5 digits (1–65535). `defaultPort` is used when the port is absent; without it a port is required (CONNECT).
 * Anything else (a path, `?`, `#`, userinfo, spaces, an empty port, a zone id…) is an error, never reinterpreted.
 */
export function parseAuthority(raw: string, defaultPort?: number): Authority | AuthorityError {
  if (raw.length === 0) return fail('the request names no host');
  if (raw.length > MAX_AUTHORITY_CHARS)
    return fail(`the authority is over ${MAX_AUTHORITY_CHARS} characters`);
  let hostPart: string;
  let portPart: string | undefined;
  if (raw.startsWith('[')) {
    const close = raw.indexOf(']');
    if (close < 0) return fail(`${show(raw)} opens an IPv6 address with [ but never closes it`);
    hostPart = raw.slice(0, close + 1);
    const rest = raw.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return fail(`${show(raw)} has ${show(rest)} after its host; expected :port`);
      portPart = rest.slice(1);
    }
  } else {
    const colon = raw.lastIndexOf(':');
    hostPart = colon < 0 ? raw : raw.slice(0, colon);
    portPart = colon < 0 ? undefined : raw.slice(colon + 1);
  }
  let port: number;
  if (portPart === undefined) {
    if (defaultPort === undefined) return fail(`${show(raw)} has no port; a tunnel names host:port`);
    port = defaultPort;
  } else {
    if (!/^\d{1,5}$/.test(portPart)) return fail(`${show(raw)} does not end in a port (1–65535)`);
    port = Number(portPart);
    if (port < 1 || port > 65535) return fail(`${show(raw)}: port ${port} is not 1–65535`);
  }
  const host = parseHost(hostPart);
  return 'reason' in host ? fail(`${show(raw)}: ${host.reason}`) : { ...host, port };
}

/** The host of an authority, normalised; see `Authority.host`. */
function parseHost(raw: string): Omit<Authority, 'port'> | AuthorityError {
  if (raw.startsWith('[')) {
    const inner = raw.slice(1, -1);
    if (!raw.endsWith(']') || !isIPv6(inner) || inner.includes('%')) {
      return fail('the bracketed part is not an IPv6 address');
    }
    // WHATWG's serialisation compresses and lowercases it: one spelling per address.
    const host = domainToASCII(`[${inner}]`);
    return host === ''
      ? fail('the bracketed part is not an IPv6 address')
      : { host: host.slice(1, -1), kind: 'ipv6' };
  }
  if (IPV4.test(raw)) return { host: raw, kind: 'ipv4' };
  if (!REG_NAME.test(raw)) {
    return fail('the host is not a host name, an IPv4 address or a bracketed IPv6 address');
  }
  // IDNA (UTS 46), lower case, and IPv4 number forms (`127.1`, `0x7f.1`, `2852039166`) to the address they mean.
  const ascii = domainToASCII(raw.endsWith('.') ? raw.slice(0, -1) : raw);
  if (ascii === '') return fail('the host is not a valid internationalised domain name');
  if (IPV4.test(ascii)) return { host: ascii, kind: 'ipv4' };
  if (!DNS_NAME.test(ascii)) return fail('the host is not a valid DNS name');
  return { host: ascii, kind: 'name' };
}

/**
 * Parses a proxy request's absolute-form target (`http://host[:port]/path?query`; `schemes` lists those accepted).
 * The authority is what lies between `//` and the first `/`, `?` or `#`, and must be a strict `host[:port]` (no
 * userinfo, no backslash); the path and query must be printable ASCII. A fragment is dropped: it is never sent.
 */
export function parseProxyTarget(raw: string, schemes: readonly string[]): ProxyTarget | AuthorityError {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*:)\/\/([^/?#]*)(.*)$/s.exec(raw);
  if (!m) return fail(`${show(raw)} is not an absolute URL (a proxy request names http://host/path)`);
  const scheme = m[1].toLowerCase();
  if (!schemes.includes(scheme)) {
    return fail(
      `only ${schemes.map((s) => `${s}//`).join(' and ')} requests go through this proxy, not ${scheme}//`,
    );
  }
  const authority = m[2];
  if (authority.includes('@')) return fail(`${show(raw)} carries userinfo (user@host), which is refused`);
  const parsed = parseAuthority(authority, scheme === 'https:' || scheme === 'wss:' ? 443 : 80);
  if ('reason' in parsed) return parsed;
  const rest = m[3];
  const hash = rest.indexOf('#');
  const pathAndQuery = hash < 0 ? rest : rest.slice(0, hash);
  if (!PATH_AND_QUERY.test(pathAndQuery)) {
    return fail(`${show(raw)}: the path has characters a URL must percent-encode`);
  }
  const path = pathAndQuery === '' ? '/' : pathAndQuery.startsWith('?') ? `/${pathAndQuery}` : pathAndQuery;
  return { scheme, ...parsed, path };
}

/** `host:port` as a record or a message shows it (IPv6 in brackets). */
export function formatAuthority(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
