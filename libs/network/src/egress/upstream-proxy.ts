import * as net from 'node:net';
import { formatAuthority } from '../url-policy/authority';

/**
 * An operator's HTTP proxy that the egress proxy sends the connections it allowed through, instead of dialling them
 * itself (a network whose only way out is a corporate proxy). The policy is decided before, on the host the sandbox
 * asked for: the upstream only carries what was allowed.
 */
export interface UpstreamProxy {
  host: string;
  port: number;
  /** `Basic …` from the URL's credentials, sent as `Proxy-Authorization` on every request to the upstream. */
  authorization?: string;
}

/**
 * Parses `http://[user:password@]host[:port][/]` (port 80 when absent). Answers why it is not one: another scheme
 * (the egress proxy speaks plain HTTP to its upstream), a path, a query or a fragment.
 */
export function parseUpstreamProxy(raw: string): UpstreamProxy | { reason: string } {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return { reason: 'is not a URL (http://host:port, optionally http://user:password@host:port)' };
  }
  if (url.protocol !== 'http:') return { reason: `must be an http:// URL, not ${url.protocol}//` };
  if (url.hostname === '') return { reason: 'names no host' };
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    return { reason: 'must be http://host:port with no path, query or fragment' };
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port === '' ? 80 : Number(url.port);
  if (url.username === '' && url.password === '') return { host, port };
  const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return { host, port, authorization: `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}` };
}

/** The upstream without its credentials, for logs and messages. */
export function describeUpstream(upstream: UpstreamProxy): string {
  return `http://${formatAuthority(upstream.host, upstream.port)}`;
}

/** The largest response head accepted from the upstream for a CONNECT. */
const MAX_HEAD_BYTES = 16 * 1024;

/**
 * A tunnel to `host:port` through the upstream (`CONNECT`), resolved once the upstream answered 2xx: the socket then
 * carries the target's bytes (any the upstream sent after its answer are put back in front). Rejects with the
 * upstream's status line when it refuses, or when it does not answer within `timeoutMs`.
 */
export function connectThrough(
  upstream: UpstreamProxy,
  host: string,
  port: number,
  timeoutMs: number,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const authority = formatAuthority(host, port);
    const socket = net.connect({ host: upstream.host, port: upstream.port });
    let head = Buffer.alloc(0);
    const fail = (why: string) => {
      socket.destroy();
      reject(new Error(`upstream proxy ${describeUpstream(upstream)}: ${why}`));
    };
    socket.setTimeout(timeoutMs, () => fail(`no answer within ${timeoutMs} ms`));
    socket.once('error', (err) => fail(err.message));
    socket.once('close', () => fail('closed the connection before answering'));
    socket.once('connect', () => {
      const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
      if (upstream.authorization) lines.push(`Proxy-Authorization: ${upstream.authorization}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEAD_BYTES) fail('answered a head larger than 16 KiB');
        return;
      }
      const status = head.subarray(0, head.indexOf('\r\n')).toString('latin1');
      // Paused before the listener goes: a flowing socket would drop what arrives until the caller pipes it.
      socket.pause();
      socket.off('data', onData);
      if (!/^HTTP\/1\.[01] 2\d\d\b/.test(status)) {
        fail(`refused CONNECT ${authority}: ${status.replace(/[^\x20-\x7e]/g, '?').slice(0, 200)}`);
        return;
      }
      socket.removeAllListeners('close');
      socket.removeAllListeners('error');
      socket.removeAllListeners('timeout');
      socket.setTimeout(0);
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    socket.on('data', onData);
  });
}
