import { chmod } from 'node:fs/promises';
import * as http from 'node:http';
import * as net from 'node:net';
import type { Duplex } from 'node:stream';
import { formatAuthority, parseAuthority, parseProxyTarget, type ProxyTarget } from '../url-policy/authority';
import type { HostVerdict, UrlRefusal } from '../url-policy/url-policy';
import type { EgressAttempt, EgressProxyOptions, EgressRefusal, LocalRoute } from './egress-proxy.types';
import { DEFAULT_PORT, HOP_BY_HOP, hostHeaderOf, printable, reasonPhrase, statusOf } from './proxy-answers';
import { EgressLedger, type Tally } from './egress-ledger';
import { connectThrough } from './upstream-proxy';

export type { EgressAttempt, EgressProxyOptions, EgressRefusal, LocalRoute } from './egress-proxy.types';

/** What becomes of one request: the address to dial, the local route that takes it, or its refusal. */
type Decision = { address: string } | { local: LocalRoute } | { refusal: UrlRefusal };

/**
 * A forward HTTP proxy on 127.0.0.1 that every request of one browser context goes through (Chromium's
 * `--proxy-server`, with loopback not bypassed). It is where the URL policy is *enforced*: each request,
 * each redirect hop (a new request to the proxy), each websocket and each subresource is checked, the name is
 * resolved here, and the connection goes to exactly the address that was checked, so a second DNS answer
 * (rebinding) is never used. Chromium itself never resolves or dials anything but this proxy.
 *
 * Each request's target is parsed once, strictly (`parseAuthority`, `parseProxyTarget`): a target that is not
 * `host:port` (a path, `?`, `#`, userinfo in a CONNECT authority…) is answered 400 and recorded, never reinterpreted.
 * The one canonical host that parse gives is what is checked, resolved, dialled and recorded, and a forward request
 * whose `Host` header names another host is refused (recorded): the upstream hears of no host but the checked one.
 *
 * With an operator's `upstream` proxy, an allowed connection goes through it rather than to the checked address: the
 * decision is the same, made here on the requested host. A host its owner routes locally (`routeLocal`: a browser's
 * `localhost`, which is its session's own sandbox) goes by that route, never to the network.
 */
export class EgressProxy {
  private readonly sockets = new Set<Duplex>();
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  private readonly extra = new Set<net.Server>();
  private readonly ledger: EgressLedger;
  private closed = false;

  private constructor(
    private readonly server: http.Server,
    private readonly options: EgressProxyOptions,
  ) {
    this.ledger = new EgressLedger(options);
  }

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
    server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex) =>
      proxy.onClientError(err, socket),
    );
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

  /** The allowed connections still open, with their bytes so far (`endedAt`: now): what `onAttempt` will report. */
  openAttempts(): EgressAttempt[] {
    return this.ledger.open();
  }

  private track(s: Duplex): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => s.destroy());
  }

  /**
   * The owner's local route for the canonical `host`, or else the verdict on it plus the proxy's own veto; reports
   * refusals. Records and refusals name `host` as parsed, whatever the check answers: the host recorded is the host
   * checked.
   */
  private async decide(
    via: EgressRefusal['via'],
    host: string,
    port: number,
    target: string,
    client: Duplex,
  ): Promise<Decision> {
    const startedAt = Date.now();
    const local = this.options.routeLocal?.(host, port);
    if (local && 'refusal' in local) {
      this.ledger.refused(via, host, port, target, local.refusal, startedAt);
      return local;
    }
    if (local) return { local };
    const gone = new AbortController();
    const onClose = () => gone.abort(new Error('the client closed the connection'));
    client.once('close', onClose);
    let verdict: HostVerdict;
    try {
      verdict = await this.options.checkHost(host, port, gone.signal);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      verdict = {
        allowed: false,
        host,
        refusal: { code: 'ADDRESS_REFUSED', reason: `${host}:${port} refused: ${why}` },
      };
    } finally {
      client.off('close', onClose);
    }
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
      this.ledger.refused(via, host, port, target, refusal, startedAt);
      return { refusal };
    }
    return { address: address! };
  }

  /** Reports a refusal (to the owner, unless it is a failed lookup) and records the attempt. */
  /**
   * The `Host` header a forward request must carry: absent, or naming the target's own host and port (compared in
   * canonical form). Answers the refusal when it names another host (fronting: an allowed address asked for another
   * site), recorded under the target.
   */
  private frontingRefusal(
    via: EgressRefusal['via'],
    hostHeader: string | undefined,
    target: ProxyTarget,
  ): UrlRefusal | undefined {
    if (hostHeader === undefined) return undefined;
    // A Host without a port means the scheme's default (RFC 9110 §7.2), as the target does.
    const sent = parseAuthority(hostHeader.trim(), DEFAULT_PORT);
    if (!('reason' in sent) && sent.host === target.host && sent.port === target.port) return undefined;
    const refusal: UrlRefusal = {
      code: 'URL_INVALID',
      reason:
        `the Host header (${printable(hostHeader).slice(0, 120)}) names another host than the request's target ` +
        `${formatAuthority(target.host, target.port)}; the proxy sends a request only to the host it checked`,
    };
    this.ledger.refused(
      via,
      target.host,
      target.port,
      `${target.scheme}//${formatAuthority(target.host, target.port)}${target.path}`,
      refusal,
    );
    return refusal;
  }

  private text(refusal: UrlRefusal, host: string, port: number): string {
    return (
      this.options.refusalText?.(refusal, host, port) ?? `Switchyard refused this request: ${refusal.reason}`
    );
  }

  private refuseHttp(res: http.ServerResponse, refusal: UrlRefusal, host: string, port: number): void {
    const status = statusOf(refusal);
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

  /**
   * A request the HTTP parser itself could not read (`#` or `\` in a CONNECT target, bytes outside ASCII…): answered
   * 400 and recorded like any malformed target, under its request line. A connection that merely broke is closed.
   */
  private onClientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
    const line = err.rawPacket?.toString('latin1').split('\r\n', 1)[0] ?? '';
    if (!socket.writable || line === '' || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const via = line.startsWith('CONNECT ') ? 'CONNECT' : 'HTTP';
    const target = line.replace(/^\S+ /, '').replace(/ HTTP\/\d\.\d$/, '');
    this.refuseRaw(
      socket,
      this.ledger.malformed(via, target, 'the request line cannot be parsed'),
      target,
      0,
    );
  }

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = req.url ?? '';
    const target = parseProxyTarget(raw, ['http:']);
    if ('reason' in target) {
      req.resume();
      this.refuseHttp(res, this.ledger.malformed('HTTP', raw, target.reason), raw, 0);
      return;
    }
    const { host, port } = target;
    const href = `http://${formatAuthority(host, port)}${target.path}`;
    // The target first (a refused target is refused as such, whatever its Host header), then its Host header.
    let decision = await this.decide('HTTP', host, port, href, req.socket);
    const fronting = !('refusal' in decision) && this.frontingRefusal('HTTP', req.headers.host, target);
    if (fronting) decision = { refusal: fronting };
    if ('refusal' in decision) {
      req.resume();
      this.refuseHttp(res, decision.refusal, host, port);
      return;
    }
    const tally = this.ledger.account('HTTP', host, port, 'local' in decision ? decision.local : undefined);
    req.on('data', (c: Buffer) => (tally.bytesOut += c.length));
    res.on('close', () => tally.end?.());
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k)) headers[k] = v;
    // The upstream hears the host that was checked, in its canonical spelling.
    headers.host = hostHeaderOf(target);
    const upstream =
      'local' in decision
        ? this.localRequest(decision.local, req.method, target.path, headers, tally)
        : this.networkRequest(decision.address, target, req.method, headers);
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
      if (res.headersSent) {
        res.destroy();
      } else if (tally.failure !== undefined) {
        // The local route could not be opened: said on the page, and marked for the browser's owner to tell.
        const body = `switchyard: ${printable(tally.failure).slice(0, 500)}\n`;
        res.writeHead(502, reasonPhrase(body.trim()), {
          'content-type': 'text/plain; charset=utf-8',
          'content-length': Buffer.byteLength(body),
          'cache-control': 'no-store',
          [this.options.denialHeader]: 'unreachable',
        });
        res.end(body);
      } else {
        res.writeHead(502, { 'content-type': 'text/plain' }).end(`upstream error: ${err.message}\n`);
      }
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }

  /** A forward request to the checked address (or through the upstream proxy), on the shared keep-alive agent. */
  private networkRequest(
    address: string,
    target: ProxyTarget,
    method: string | undefined,
    headers: http.OutgoingHttpHeaders,
  ): http.ClientRequest {
    const via = this.options.upstream;
    if (via?.authorization) headers['proxy-authorization'] = via.authorization;
    const upstream = http.request({
      // Through an upstream proxy: the absolute URI of the checked host, for the upstream to forward.
      host: via ? via.host : address,
      port: via ? via.port : target.port,
      method,
      path: via ? `http://${hostHeaderOf(target)}${target.path}` : target.path,
      headers,
      setHost: false,
      agent: this.agent,
      timeout: this.options.connectTimeoutMs ?? 10_000,
    });
    upstream.on('socket', (s) => s.setTimeout(0));
    upstream.on('timeout', () => upstream.destroy(new Error('connect timed out')));
    return upstream;
  }

  /**
   * A forward request over a stream of its own from the local route (no agent: a route's stream is one connection,
   * closed with its response). A route that cannot be opened leaves its reason in `tally.failure`.
   */
  private localRequest(
    local: LocalRoute,
    method: string | undefined,
    path: string,
    headers: http.OutgoingHttpHeaders,
    tally: Tally,
  ): http.ClientRequest {
    const upstream = http.request({
      method,
      path,
      headers,
      setHost: false,
      createConnection: (_options, done) => {
        local.open().then(
          (stream) => {
            // The client left while the route was opened.
            if (upstream.destroyed) stream.destroy();
            else done(null, stream);
          },
          (err: unknown) => {
            tally.failure = messageOf(err);
            done(new Error(tally.failure), undefined as unknown as Duplex);
          },
        );
        return undefined;
      },
    });
    return upstream;
  }

  private async onConnect(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.track(client);
    const raw = req.url ?? '';
    const hp = parseAuthority(raw);
    if ('reason' in hp) {
      this.refuseRaw(client, this.ledger.malformed('CONNECT', raw, hp.reason), raw, 0);
      return;
    }
    const decision = await this.decide(
      'CONNECT',
      hp.host,
      hp.port,
      formatAuthority(hp.host, hp.port),
      client,
    );
    if ('refusal' in decision) {
      this.refuseRaw(client, decision.refusal, hp.host, hp.port);
      return;
    }
    const tally = this.ledger.account(
      'CONNECT',
      hp.host,
      hp.port,
      'local' in decision ? decision.local : undefined,
    );
    this.dial(decision, hp.host, hp.port, client, tally, (upstream) => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
    });
  }

  /** Absolute-form upgrade requests (websockets from clients that do not tunnel them with CONNECT). */
  private async onUpgrade(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.track(client);
    const raw = req.url ?? '';
    const target = parseProxyTarget(raw, ['http:', 'ws:']);
    if ('reason' in target) {
      this.refuseRaw(client, this.ledger.malformed('UPGRADE', raw, target.reason), raw, 0);
      return;
    }
    const { host, port } = target;
    const href = `${target.scheme}//${formatAuthority(host, port)}${target.path}`;
    let decision = await this.decide('UPGRADE', host, port, href, client);
    const fronting = !('refusal' in decision) && this.frontingRefusal('UPGRADE', req.headers.host, target);
    if (fronting) decision = { refusal: fronting };
    if ('refusal' in decision) {
      this.refuseRaw(client, decision.refusal, host, port);
      return;
    }
    const lines = [`${req.method} ${target.path} HTTP/1.1`, `Host: ${hostHeaderOf(target)}`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      if (!name.startsWith('proxy-') && name !== 'host') {
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      }
    }
    const tally = this.ledger.account(
      'UPGRADE',
      host,
      port,
      'local' in decision ? decision.local : undefined,
    );
    this.dial(decision, host, port, client, tally, (upstream) => {
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
    });
  }

  /** A refusal answered on a raw socket (a tunnel or an upgrade): status, reason phrase, the text as body. */
  private refuseRaw(client: Duplex, refusal: UrlRefusal, host: string, port: number): void {
    const text = this.text(refusal, host, port);
    // The reason phrase is what a client shows of a refused tunnel ("Tunnel connection failed: 403 …").
    const body = `${text}\n`;
    client.end(
      `HTTP/1.1 ${statusOf(refusal)} ${reasonPhrase(text)}\r\n${this.options.denialHeader}: denied\r\n` +
        `content-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }

  /**
   * Connects to the vetted address (or, through the upstream proxy, to the checked host; or opens the local route)
   * and splices the two streams once connected.
   */
  private dial(
    decision: { address: string } | { local: LocalRoute },
    host: string,
    port: number,
    client: Duplex,
    tally: Tally,
    onOpen: (upstream: Duplex) => void,
  ): void {
    // The client left while its host was decided (a wait for approval): nothing to splice.
    if (client.destroyed) {
      tally.end?.();
      return;
    }
    const timeoutMs = this.options.connectTimeoutMs ?? 10_000;
    const opening: Promise<Duplex> =
      'local' in decision
        ? decision.local.open()
        : this.options.upstream
          ? connectThrough(this.options.upstream, host, port, timeoutMs)
          : connectDirect(decision.address, port, timeoutMs);
    opening.then(
      (upstream) => {
        this.track(upstream);
        upstream.on('close', () => {
          client.destroy();
          tally.end?.();
        });
        // The client left, or the proxy closed, while the connection was being made.
        if (client.destroyed || this.closed) {
          upstream.destroy();
          return;
        }
        upstream.on('data', (c: Buffer) => (tally.bytesIn += c.length));
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        onOpen(upstream);
        upstream.pipe(client);
        // Counted from here: before the tunnel is open the client sends nothing (it waits for the 200).
        client.on('data', (c: Buffer) => (tally.bytesOut += c.length));
        client.pipe(upstream);
      },
      (err: unknown) => {
        const message = messageOf(err);
        if (tally.local) tally.failure = message;
        if (client.writable) {
          const body = `switchyard: ${printable(message).slice(0, 300)}\n`;
          // A local route that could not be opened is marked, as the plain-http answer is.
          const mark = tally.local ? `${this.options.denialHeader}: unreachable\r\n` : '';
          client.end(
            `HTTP/1.1 502 Bad Gateway\r\n${mark}content-type: text/plain; charset=utf-8\r\n` +
              `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          );
        } else {
          client.destroy();
        }
        tally.end?.();
      },
    );
  }
}

/** A TCP connection to `address:port`, resolved once connected; rejected on error or after `timeoutMs`. */
function connectDirect(address: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address, port });
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    socket.setTimeout(timeoutMs, () => fail(new Error('connect timed out')));
    socket.once('error', fail);
    socket.once('connect', () => {
      socket.setTimeout(0);
      socket.removeAllListeners('timeout');
      socket.off('error', fail);
      resolve(socket);
    });
  });
}

/** An error's message, whatever realm or shape it comes from (a dialer's rejection is not always an `Error`). */
function messageOf(err: unknown): string {
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(err);
}
