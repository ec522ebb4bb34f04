import { chmod } from 'node:fs/promises';
import * as http from 'node:http';
import type { EgressRecord } from '@switchyard/common';
import * as net from 'node:net';
import type { Duplex } from 'node:stream';
import type { HostVerdict, UrlRefusal } from '../url-policy/url-policy';

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
  via: EgressRefusal['via'];
  /** Wall-clock milliseconds (`Date.now()`) when it was asked for and when it ended. */
  startedAt: number;
  endedAt: number;
}

export interface EgressProxyOptions {
  /** The host decision (and for egress, the port's); the proxy connects only to an address it returns. */
  checkHost(host: string, port: number): Promise<HostVerdict>;
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
}

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

/**
 * A forward HTTP proxy on 127.0.0.1 that every request of one browser context goes through (Chromium's
 * `--proxy-server`, with loopback not bypassed). It is where the URL policy is *enforced*: each request,
 * each redirect hop (a new request to the proxy), each websocket and each subresource is checked, the name is
 * resolved here, and the connection goes to exactly the address that was checked, so a second DNS answer
 * (rebinding) is never used. Chromium itself never resolves or dials anything but this proxy.
 */
export class EgressProxy {
  private readonly sockets = new Set<Duplex>();
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  private readonly extra = new Set<net.Server>();
  private closed = false;

  private constructor(
    private readonly server: http.Server,
    private readonly options: EgressProxyOptions,
  ) {}

  static async start(options: EgressProxyOptions): Promise<EgressProxy> {
    const server = http.createServer();
    const proxy = new EgressProxy(server, options);
    server.on('connection', (s: net.Socket) => proxy.track(s));
    server.on('request', (req, res) => void proxy.onRequest(req, res));
    server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      void proxy.onConnect(req, socket, head);
    });
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      void proxy.onUpgrade(req, socket, head);
    });
    server.on('clientError', (_err, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      const listening = () => {
        server.off('error', reject);
        resolve();
      };
      if (options.listenPath) server.listen(options.listenPath, listening);
      else server.listen(0, '127.0.0.1', listening);
    });
    if (options.listenPath) await chmod(options.listenPath, options.listenMode ?? 0o666);
    return proxy;
  }

  /** The loopback port (TCP proxies only). */
  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** `http://127.0.0.1:<port>`, for the browser's proxy setting. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Also answers on a Unix socket at `path` (made `mode`, default 0o666): a sandbox that sees the socket reaches the
   * proxy, and nothing else. Answers the stop of that listener (its socket file removed); idempotent.
   */
  async listenOn(path: string, mode = 0o666): Promise<() => Promise<void>> {
    const extra = net.createServer((socket) => this.server.emit('connection', socket));
    await new Promise<void>((resolve, reject) => {
      extra.once('error', reject);
      extra.listen(path, () => {
        extra.off('error', reject);
        resolve();
      });
    });
    await chmod(path, mode);
    this.extra.add(extra);
    let stopped: Promise<void> | undefined;
    return () => {
      stopped ??= new Promise<void>((resolve) => {
        this.extra.delete(extra);
        extra.close(() => resolve());
      });
      return stopped;
    };
  }

  /** Stops listening and cuts every tunnel and request in flight. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const extra of this.extra) extra.close();
    this.extra.clear();
    const done = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    this.agent.destroy();
    await done;
  }

  private track(s: Duplex): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => s.destroy());
  }

  /** The verdict plus the proxy's own veto; reports refusals. */
  private async decide(
    via: EgressRefusal['via'],
    host: string,
    port: number,
    target: string,
  ): Promise<{ address: string } | { refusal: UrlRefusal }> {
    const startedAt = Date.now();
    const verdict = await this.options.checkHost(host, port);
    let refusal: UrlRefusal | undefined;
    let address: string | undefined;
    if (!verdict.allowed) {
      refusal = verdict.refusal;
    } else {
      address = verdict.addresses[0];
      const veto = address === undefined ? 'no address' : this.options.vetoAddress?.(address, port);
      if (veto) refusal = { code: 'ADDRESS_REFUSED', reason: `${host}:${port} refused: ${veto}` };
    }
    if (refusal) {
      if (refusal.code !== 'DNS_FAILED') {
        this.options.onRefusal?.({ via, host: verdict.host, port, target, refusal });
      }
      const endedAt = Date.now();
      this.options.onAttempt?.({
        via,
        host: verdict.host,
        port,
        allowed: false,
        reason: refusal.reason,
        bytesIn: 0,
        bytesOut: 0,
        startedAt,
        endedAt,
      });
      return { refusal };
    }
    return { address: address! };
  }

  /** Reports an allowed connection once it has ended, with what went through it. */
  private account(via: EgressRefusal['via'], host: string, port: number): Tally {
    const tally: Tally = { bytesIn: 0, bytesOut: 0, startedAt: Date.now(), done: false };
    tally.end = () => {
      if (tally.done) return;
      tally.done = true;
      this.options.onAttempt?.({
        via,
        host,
        port,
        allowed: true,
        bytesIn: tally.bytesIn,
        bytesOut: tally.bytesOut,
        startedAt: tally.startedAt,
        endedAt: Date.now(),
      });
    };
    return tally;
  }

  private text(refusal: UrlRefusal, host: string, port: number): string {
    return (
      this.options.refusalText?.(refusal, host, port) ?? `Switchyard refused this request: ${refusal.reason}`
    );
  }

  private refuseHttp(res: http.ServerResponse, refusal: UrlRefusal, host: string, port: number): void {
    const status = refusal.code === 'DNS_FAILED' ? 502 : 403;
    const text = this.text(refusal, host, port);
    const body = `${text}\n`;
    res.writeHead(status, reasonPhrase(text), {
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      ...(status === 403 && { [this.options.denialHeader]: 'denied' }),
    });
    res.end(body);
  }

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('absolute-form requests only\n');
      return;
    }
    if (target.protocol !== 'http:') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('only http:// through this proxy\n');
      return;
    }
    const port = Number(target.port || 80);
    const decision = await this.decide('HTTP', target.hostname, port, target.href);
    if ('refusal' in decision) {
      req.resume();
      this.refuseHttp(res, decision.refusal, target.hostname, port);
      return;
    }
    const tally = this.account('HTTP', target.hostname, port);
    req.on('data', (c: Buffer) => (tally.bytesOut += c.length));
    res.on('close', () => tally.end?.());
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k)) headers[k] = v;
    const upstream = http.request({
      host: decision.address,
      port,
      method: req.method,
      path: `${target.pathname}${target.search}`,
      headers,
      setHost: false,
      agent: this.agent,
      timeout: this.options.connectTimeoutMs ?? 10_000,
    });
    upstream.on('socket', (s) => s.setTimeout(0));
    upstream.on('timeout', () => upstream.destroy(new Error('connect timed out')));
    upstream.on('response', (up) => {
      up.on('data', (c: Buffer) => (tally.bytesIn += c.length));
      const out: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(up.headers)) {
        if (!HOP_BY_HOP.has(k) && k !== this.options.denialHeader) out[k] = v;
      }
      res.writeHead(up.statusCode ?? 502, up.statusMessage, out);
      up.pipe(res);
    });
    upstream.on('error', (err) => {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain' }).end(`upstream error: ${err.message}\n`);
      } else {
        res.destroy();
      }
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  private async onConnect(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.track(client);
    const hp = splitHostPort(req.url ?? '');
    if (!hp) {
      client.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const decision = await this.decide('CONNECT', hp.host, hp.port, `${hp.host}:${hp.port}`);
    if ('refusal' in decision) {
      const text = this.text(decision.refusal, hp.host, hp.port);
      const code = decision.refusal.code === 'DNS_FAILED' ? 502 : 403;
      // The reason phrase is what a client shows of a refused tunnel ("Tunnel connection failed: 403 …").
      const phrase = reasonPhrase(text);
      const body = `${text}\n`;
      client.end(
        `HTTP/1.1 ${code} ${phrase}\r\n${this.options.denialHeader}: denied\r\ncontent-type: text/plain; charset=utf-8\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      return;
    }
    const tally = this.account('CONNECT', hp.host, hp.port);
    this.dial(decision.address, hp.port, client, tally, (upstream) => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
    });
  }

  /** Absolute-form upgrade requests (websockets from clients that do not tunnel them with CONNECT). */
  private async onUpgrade(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.track(client);
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      client.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    if (target.protocol !== 'http:' && target.protocol !== 'ws:') {
      client.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const port = Number(target.port || 80);
    const decision = await this.decide('UPGRADE', target.hostname, port, target.href);
    if ('refusal' in decision) {
      client.end(
        `HTTP/1.1 403 Forbidden\r\n${this.options.denialHeader}: denied\r\ncontent-length: 0\r\n\r\n`,
      );
      return;
    }
    const lines = [`${req.method} ${target.pathname}${target.search} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i];
      if (!name.toLowerCase().startsWith('proxy-')) lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
    }
    const tally = this.account('UPGRADE', target.hostname, port);
    this.dial(decision.address, port, client, tally, (upstream) => {
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
    });
  }

  /** Connects to the vetted address and splices the two sockets once connected. */
  private dial(
    address: string,
    port: number,
    client: Duplex,
    tally: Tally,
    onOpen: (upstream: net.Socket) => void,
  ): void {
    const upstream = net.connect({ host: address, port });
    upstream.on('data', (c: Buffer) => (tally.bytesIn += c.length));
    this.track(upstream);
    upstream.setTimeout(this.options.connectTimeoutMs ?? 10_000, () =>
      upstream.destroy(new Error('connect timed out')),
    );
    let open = false;
    upstream.once('connect', () => {
      open = true;
      upstream.setTimeout(0);
      onOpen(upstream);
      upstream.pipe(client);
      // Counted from here: before the tunnel is open the client sends nothing (it waits for the 200).
      client.on('data', (c: Buffer) => (tally.bytesOut += c.length));
      client.pipe(upstream);
    });
    upstream.on('error', () => {
      if (!open && client.writable) client.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n');
      else client.destroy();
    });
    upstream.on('close', () => {
      client.destroy();
      tally.end?.();
    });
    client.on('close', () => upstream.destroy());
  }
}

/** `text` as an HTTP reason phrase: one line of printable ASCII. */
function reasonPhrase(text: string): string {
  return text
    .replace(/[\r\n]+/g, ' ')
    .replace(/[^\x20-\x7e]/g, '?')
    .slice(0, 300);
}

/** Bytes of one allowed connection so far; `end` reports it once. */
interface Tally {
  bytesIn: number;
  bytesOut: number;
  startedAt: number;
  done: boolean;
  end?: () => void;
}

/** `host:port` of a CONNECT line; IPv6 in brackets. */
export function splitHostPort(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1], port };
}
