import * as http from 'node:http';
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

export interface EgressProxyOptions {
  /** The URL policy's host decision; the proxy connects only to an address it returns. */
  checkHost(host: string): Promise<HostVerdict>;
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
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** `http://127.0.0.1:<port>`, for the browser's proxy setting. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Stops listening and cuts every tunnel and request in flight. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
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
    const verdict = await this.options.checkHost(host);
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
      return { refusal };
    }
    return { address: address! };
  }

  private refuseHttp(res: http.ServerResponse, refusal: UrlRefusal): void {
    const status = refusal.code === 'DNS_FAILED' ? 502 : 403;
    const body = `Switchyard refused this request: ${refusal.reason}\n`;
    res.writeHead(status, {
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
      this.refuseHttp(res, decision.refusal);
      return;
    }
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
      const status = decision.refusal.code === 'DNS_FAILED' ? '502 Bad Gateway' : '403 Forbidden';
      client.end(`HTTP/1.1 ${status}\r\n${this.options.denialHeader}: denied\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    this.dial(decision.address, hp.port, client, (upstream) => {
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
    this.dial(decision.address, port, client, (upstream) => {
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
    });
  }

  /** Connects to the vetted address and splices the two sockets once connected. */
  private dial(address: string, port: number, client: Duplex, onOpen: (upstream: net.Socket) => void): void {
    const upstream = net.connect({ host: address, port });
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
      client.pipe(upstream);
    });
    upstream.on('error', () => {
      if (!open && client.writable) client.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n');
      else client.destroy();
    });
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  }
}

/** `host:port` of a CONNECT line; IPv6 in brackets. */
export function splitHostPort(authority: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1], port };
}
