import { embeddedIpv4, formatIp, parseIp } from './ip-address';
import { canonicalHost } from './url-policy';

/**
 * The addresses that mean "this machine" to a program on it, as a dev server prints them: `127.0.0.1`, `::1`, and the
 * unspecified `0.0.0.0` and `::` (Linux connects those to the machine itself; `python -m http.server` prints
 * `http://0.0.0.0:8000/`). The rest of 127.0.0.0/8 is not here: a tunnel to a session's port reaches 127.0.0.1 (then
 * ::1) in its sandbox, so `127.0.0.2` would name an address the connection never goes to.
 */
const THIS_MACHINE = new Set(['127.0.0.1', '::1', '0.0.0.0', '::']);

/**
 * Whether `host` (a URL's host or a proxy target's, in any spelling a browser accepts) names the machine the client
 * runs on: `localhost` and `*.localhost` (RFC 6761, as Chromium reads them), or one of the addresses above however
 * it is spelled (`127.1`, `2130706433`, `0x7f.1`, `LOCALHOST.`, `[::ffff:127.0.0.1]` are all this machine; IPv4-mapped
 * is the one IPv6 wrapper that means the host itself, NAT64 and 6to4 forms go elsewhere and do not count). A name
 * that merely resolves to loopback does not count either: only what is loopback by its spelling.
 *
 * The browser tier reads such a host as the session's own sandbox (see `SessionPortDialer` in libs/browser).
 */
export function isLocalhost(host: string): boolean {
  const canonical = canonicalHost(host);
  if (canonical === undefined) return false;
  if (canonical === 'localhost' || canonical.endsWith('.localhost')) return true;
  const ip = parseIp(canonical);
  if (!ip) return false;
  if (THIS_MACHINE.has(formatIp(ip))) return true;
  const inner = mappedIpv4(ip.bytes) ? embeddedIpv4(ip) : undefined;
  return inner !== undefined && THIS_MACHINE.has(formatIp(inner));
}

/** `::ffff:a.b.c.d`, the IPv4-mapped form a dual-stack socket uses for an IPv4 peer. */
function mappedIpv4(bytes: Uint8Array): boolean {
  return (
    bytes.length === 16 &&
    bytes.slice(0, 10).every((b) => b === 0) &&
    bytes[10] === 0xff &&
    bytes[11] === 0xff
  );
}
