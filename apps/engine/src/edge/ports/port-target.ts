import { InvalidInputError } from '@switchyard/common';

/** The query parameter a preview URL carries its token in, once: the proxy moves it to a cookie. */
export const TOKEN_PARAM = 'switchyard_token';

/**
 * What a request to a session's port names: the session, the port (as sent, checked by `parsePort`), the path and
 * query the server is sent, and where the proxy's own URL space for it begins (`prefix`: the path proxy's
 * `/v1/sessions/{id}/ports/{port}`, empty for a preview host, whose server sits at `/`).
 */
export interface PortTarget {
  via: 'path' | 'host';
  sessionId: string;
  port: string;
  /** The path the server is sent, from `/`, still percent-encoded as the caller sent it. */
  path: string;
  /** The query the server is sent (without `?`, without the preview token), or ''. */
  query: string;
  /** The preview token the URL carried, when it carried one. */
  token?: string;
  prefix: string;
  /** The path proxy's `…/ports/{port}` without a slash after it: a browser is sent to the slash first. */
  bare: boolean;
}

const PORTS_PATH = /^\/v1\/sessions\/([^/?#]+)\/ports\/([^/?#]+)(\/[^?#]*)?$/;

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** Splits `url` (a request's target: path and query) into its path and query. */
function splitUrl(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  return q < 0 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) };
}

/**
 * The query without the preview token, and the token (the last one, when sent more than once). Other parameters
 * keep their order and their encoding as sent.
 */
export function takeToken(query: string): { query: string; token?: string } {
  if (query === '') return { query };
  let token: string | undefined;
  const kept = query.split('&').filter((part) => {
    const eq = part.indexOf('=');
    const name = decode((eq < 0 ? part : part.slice(0, eq)).replace(/\+/g, ' '));
    if (name !== TOKEN_PARAM) return true;
    token = eq < 0 ? '' : decode(part.slice(eq + 1).replace(/\+/g, ' '));
    return false;
  });
  return { query: kept.join('&'), ...(token !== undefined && { token }) };
}

/**
 * The target of a request through the path proxy, `/v1/sessions/{sessionId}/ports/{port}[/{path…}]`, or undefined
 * for any other URL. `…/ports/{port}/preview` and `GET …/ports` are the ports API, not the proxy: the caller tells
 * them apart (`isPortsApi`).
 */
export function pathTarget(url: string): PortTarget | undefined {
  const { path, query } = splitUrl(url);
  const m = PORTS_PATH.exec(path);
  if (!m) return undefined;
  const taken = takeToken(query);
  const sessionId = decode(m[1]);
  return {
    via: 'path',
    sessionId,
    port: decode(m[2]),
    path: m[3] ?? '/',
    query: taken.query,
    ...(taken.token !== undefined && { token: taken.token }),
    prefix: `/v1/sessions/${m[1]}/ports/${m[2]}`,
    bare: m[3] === undefined,
  };
}

/**
 * The ports API's own route under the proxy's path, `…/ports/{port}/preview`: reserved for every method (a method
 * other than POST is the API's 405, never the app's `/preview`, which a preview host reaches).
 */
export function isPortsApi(url: string): boolean {
  return /^\/v1\/sessions\/[^/?#]+\/ports\/[^/?#]+\/preview\/?(\?|$)/.test(url);
}

/** The host name of a `Host` header: lower-case, without the port and a trailing dot. */
function hostName(host: string | undefined): string | undefined {
  if (host === undefined) return undefined;
  const name = host.startsWith('[') ? host : host.replace(/:\d*$/, '');
  return name.replace(/\.$/, '').toLowerCase();
}

const PREVIEW_LABEL = /^(\d{1,5})-([a-z0-9_]+)$/;

/**
 * The target of a request to a preview host, `<port>-<sessionId>.<domain>` (the whole path and query go to the
 * server), or undefined when `host` is not one (or no preview domain is configured).
 */
export function hostTarget(
  host: string | undefined,
  url: string,
  domain: string | undefined,
): PortTarget | undefined {
  if (domain === undefined) return undefined;
  const name = hostName(host);
  if (name === undefined || !name.endsWith(`.${domain}`)) return undefined;
  const m = PREVIEW_LABEL.exec(name.slice(0, -domain.length - 1));
  if (!m) return undefined;
  const { path, query } = splitUrl(url);
  const taken = takeToken(query);
  return {
    via: 'host',
    sessionId: m[2],
    port: m[1],
    path: path.startsWith('/') ? path : `/${path}`,
    query: taken.query,
    ...(taken.token !== undefined && { token: taken.token }),
    prefix: '',
    bare: false,
  };
}

/** The preview host of a session's port: `<port>-<sessionId>.<domain>`. */
export const previewHost = (sessionId: string, port: number, domain: string): string =>
  `${port}-${sessionId}.${domain}`;

/** A port as the URL names it: digits only, 1–65535; a 400 naming `port` otherwise. */
export function parsePort(text: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    throw new InvalidInputError(
      'port',
      `must be a TCP port, an integer from 1 to 65535 (got ${JSON.stringify(text.slice(0, 20))})`,
      'INVALID_PORT',
    );
  }
  return port;
}

/** The path and query as the server is sent them. */
export const upstreamUrl = (t: PortTarget): string => (t.query === '' ? t.path : `${t.path}?${t.query}`);
