import type { Authority } from '../url-policy/authority';
import type { UrlRefusal } from '../url-policy/url-policy';

// What the egress proxy answers and forwards, as plain functions: statuses, reason phrases, the Host header it sends.

/** The port of an `http:` or `ws:` target that names none. */
export const DEFAULT_PORT = 80;

/** Headers of one hop, never forwarded. */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** `text` as an HTTP reason phrase: one line of printable ASCII. */
export function reasonPhrase(text: string): string {
  return printable(text.replace(/[\r\n]+/g, ' ')).slice(0, 300);
}

/** `text` with anything but printable ASCII as `?` (request text quoted in records and messages). */
export function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?');
}

/** 400 for a malformed or inconsistent request, 502 for a name that did not resolve, 403 for a refusal. */
export function statusOf(refusal: UrlRefusal): number {
  if (refusal.code === 'URL_INVALID') return 400;
  return refusal.code === 'DNS_FAILED' ? 502 : 403;
}

/** The `Host` header of a request to `target`: its canonical host, and its port unless it is the default. */
export function hostHeaderOf(target: Authority): string {
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  return target.port === DEFAULT_PORT ? host : `${host}:${target.port}`;
}
