import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** Headers of one hop only (RFC 9110 §7.6.1), never passed on; `Connection` may name more. */
const HOP_BY_HOP = new Set([
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

/** The cookie a preview token is kept in, for the path or host it opens. */
export const PREVIEW_COOKIE = 'switchyard_preview';

/** The headers `Connection` names as hop-by-hop, besides the fixed ones. */
function connectionTokens(headers: IncomingHttpHeaders): Set<string> {
  const value = headers.connection;
  return new Set(
    (Array.isArray(value) ? value.join(',') : (value ?? ''))
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter((t) => t.length > 0),
  );
}

/** `name=value` pairs of a `Cookie` header, without the preview cookie; undefined when none is left. */
export function withoutPreviewCookie(cookie: string | undefined): string | undefined {
  if (cookie === undefined) return undefined;
  const kept = cookie
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c.length > 0 && c.split('=', 1)[0].trim() !== PREVIEW_COOKIE);
  return kept.length > 0 ? kept.join('; ') : undefined;
}

/** The preview cookie's value in a `Cookie` header (the last one sent, when several paths' match). */
export function previewCookie(cookie: string | undefined): string | undefined {
  let found: string | undefined;
  for (const part of (cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === PREVIEW_COOKIE) found = part.slice(eq + 1).trim();
  }
  return found;
}

export interface UpstreamRequestOptions {
  port: number;
  /** The caller's bearer key authenticated the request: it is the engine's, not the server's, and is dropped. */
  dropAuthorization: boolean;
  /** The caller's address, appended to `X-Forwarded-For`. */
  remoteAddress: string | undefined;
  /** `https` when the caller reached the engine over TLS (itself or a proxy in front that says so). */
  proto: 'http' | 'https';
  /** Where the proxy serves the server (`/v1/sessions/{id}/ports/{port}`), or '' at a preview host's root. */
  prefix: string;
  /** A WebSocket (or other) upgrade: `Connection: Upgrade` and `Upgrade` go through. */
  upgrade: boolean;
}

/**
 * The headers the server in the sandbox is sent: the caller's, without the hop-by-hop ones, the engine's credentials
 * (the bearer key, the preview cookie) and any forwarding headers the caller made up, with `Host: localhost:PORT`
 * (what a dev server checks against) and `X-Forwarded-For/-Host/-Proto/-Prefix` saying where the request came
 * from and under which path the caller sees the server.
 */
export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  o: UpstreamRequestOptions,
): OutgoingHttpHeaders {
  const drop = connectionTokens(incoming);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || drop.has(name)) continue;
    if (name === 'host' || name === 'cookie' || name.startsWith('x-forwarded-') || name === 'forwarded')
      continue;
    if (name === 'authorization' && o.dropAuthorization) continue;
    out[name] = value;
  }
  const cookie = withoutPreviewCookie(
    Array.isArray(incoming.cookie) ? incoming.cookie.join('; ') : incoming.cookie,
  );
  if (cookie !== undefined) out.cookie = cookie;
  out.host = `localhost:${o.port}`;
  const forwardedFor = incoming['x-forwarded-for'];
  out['x-forwarded-for'] = [forwardedFor, o.remoteAddress]
    .flat()
    .filter((v) => v !== undefined)
    .join(', ');
  if (incoming.host !== undefined) out['x-forwarded-host'] = incoming.host;
  out['x-forwarded-proto'] = o.proto;
  if (o.prefix !== '') out['x-forwarded-prefix'] = o.prefix;
  if (o.upgrade) {
    out.connection = 'Upgrade';
    if (incoming.upgrade !== undefined) out.upgrade = incoming.upgrade;
  }
  return out;
}

/**
 * The server's answer's headers as the caller gets them: without the hop-by-hop ones; through the path proxy, a
 * redirect to one of the server's own paths (`Location: /login`, or `http://localhost:PORT/login`) stays under the
 * proxy's prefix, and a cookie it sets is scoped to that prefix (never to the engine's whole origin), with no
 * `Domain`.
 */
export function callerResponseHeaders(
  upstream: IncomingHttpHeaders,
  o: { port: number; prefix: string },
): OutgoingHttpHeaders {
  const drop = connectionTokens(upstream);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined || HOP_BY_HOP.has(name) || drop.has(name)) continue;
    out[name] = value;
  }
  if (o.prefix === '') return out;
  const location = upstream.location;
  if (typeof location === 'string') out.location = underPrefix(location, o);
  const cookies = upstream['set-cookie'];
  if (cookies !== undefined) out['set-cookie'] = cookies.map((c) => scopedCookie(c, o.prefix));
  return out;
}

/** A location of the server's own, under the proxy's prefix; any other location as it is. */
function underPrefix(location: string, o: { port: number; prefix: string }): string {
  const own = new RegExp(`^https?://(localhost|127\\.0\\.0\\.1|\\[::1\\]):${o.port}(?=/|$)`, 'i');
  const local = location.replace(own, '');
  if (local === '') return `${o.prefix}/`;
  // `//host/x` is another host; only a path of the server's own moves.
  return local.startsWith('/') && !local.startsWith('//') ? `${o.prefix}${local}` : location;
}

/** A `Set-Cookie` of the server, its `Path` moved under the prefix and its `Domain` dropped. */
function scopedCookie(cookie: string, prefix: string): string {
  const [pair, ...attributes] = cookie.split(';');
  let path = '/';
  const kept = attributes.filter((a) => {
    const name = a.split('=', 1)[0].trim().toLowerCase();
    if (name === 'path') {
      const value = a.slice(a.indexOf('=') + 1).trim();
      if (value.startsWith('/')) path = value;
      return false;
    }
    return name !== 'domain';
  });
  return [pair, ` Path=${prefix}${path === '/' ? '/' : path}`, ...kept].join(';');
}
