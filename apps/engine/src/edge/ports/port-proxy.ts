import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { type ErrorKind, SwitchyardError } from '@switchyard/common';
import { SessionPorts, type SessionPortConnection } from '@switchyard/sandbox';
import type { NextFunction } from 'express';
import * as http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { PortConnections, type PortConnectionEnd } from '../../engine/ports/port-connections';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { Session } from '../../state/sessions/session.model';
import { errorAnswer } from '../http/domain-error.filter';
import { refuseUpgrade } from '../http/upgrade-routes';
import { refuseCrossOrigin } from '../jupyter/jupyter-upgrade';
import { type PortAccess, PortAuth } from './port-auth';
import { hostTarget, isPortsApi, parsePort, pathTarget, type PortTarget, upstreamUrl } from './port-target';
import { callerResponseHeaders, upstreamRequestHeaders } from './proxy-headers';

/** The proxy's requests in the HTTP metrics (path and preview host alike), as a route pattern. */
export const PORTS_ROUTE = '/v1/sessions/:sessionId/ports/:port/*path';

/** The server took the connection but closed it without a whole answer. */
export class PortNoAnswerError extends SwitchyardError {
  readonly code = 'PORT_NO_ANSWER';
  readonly kind: ErrorKind = 'bad_gateway';
}

/** A live proxied exchange, ended at shutdown (an event stream or a WebSocket would hold the server open). */
interface Live {
  destroy(): void;
}

/**
 * The reverse proxy to a session's ports: `/v1/sessions/{sessionId}/ports/{port}/{path…}` and, with
 * SWITCHYARD_PREVIEW_DOMAIN, preview hosts `<port>-<sessionId>.<domain>` at `/`. Each request (or WebSocket) is
 * authenticated (`PortAuth`), looked up as the caller's session (404 for another tenant's), and sent over its own
 * connection to 127.0.0.1:PORT inside the session's sandbox (`SessionPorts`: a tunnel through the box's runner) as
 * HTTP/1.1; both bodies stream through without being held (the tunnel's acknowledgements are the backpressure), so
 * uploads, downloads and server-sent events of any size and length pass as they come. A WebSocket upgrade is the
 * same connection left open both ways after the server's `101`. Every exchange is recorded (`PortConnections`).
 */
@Injectable()
export class PortProxy implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Ports');
  private readonly live = new Set<Live>();
  private readonly domain: string | undefined;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    private readonly auth: PortAuth,
    private readonly sessions: SessionsService,
    private readonly ports: SessionPorts,
    private readonly connections: PortConnections,
  ) {
    this.domain = config.ports.previewDomain;
  }

  /** What `req` asks the proxy for, or undefined when it is not the proxy's (the ports API included). */
  target(req: http.IncomingMessage): PortTarget | undefined {
    const url = req.url ?? '/';
    const host = hostTarget(req.headers.host, url, this.domain);
    if (host) return host;
    if (isPortsApi(url)) return undefined;
    return pathTarget(url);
  }

  /** Whether `req` is the proxy's: its body is the server's, streamed, never parsed by the engine. */
  claims(req: http.IncomingMessage): boolean {
    return this.target(req) !== undefined;
  }

  /** The session a proxied request is about, for the replicas' forwarding (a preview host names it in `Host`). */
  sessionOf(req: http.IncomingMessage): string | undefined {
    return this.target(req)?.sessionId;
  }

  /**
   * Serves `req` when it is the proxy's, and answers whether it was. Needs nothing of Express: the bootstrap hands
   * the proxy its requests before the Express app sees them (the app's routing would cost every proxied request
   * about as much as the rest of the engine's part); replicas use `middleware`, after their forwarding.
   */
  handle(req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const target = this.target(req);
    if (!target) return false;
    this.serve(target, req, res).catch((err: unknown) => this.fail(res, err));
    return true;
  }

  /** Express middleware: serves the proxy's requests, passes every other one on. */
  middleware(): (req: http.IncomingMessage, res: http.ServerResponse, next: NextFunction) => void {
    return (req, res, next) => {
      if (!this.handle(req, res)) next();
    };
  }

  beforeApplicationShutdown(): void {
    for (const l of this.live) l.destroy();
    this.live.clear();
  }

  private async serve(
    target: PortTarget,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): Promise<void> {
    const port = parsePort(target.port);
    this.ports.check(port);
    // `…/ports/3000` to `…/ports/3000/`, before anything else: a page's relative links resolve under the slash.
    if (target.bare && (req.method === 'GET' || req.method === 'HEAD')) {
      const query = (req.url ?? '').split('?').slice(1).join('?');
      redirect(res, 308, `${target.prefix}/${query === '' ? '' : `?${query}`}`);
      return;
    }
    const access = this.auth.authorize(req, target, port, secure(req));
    if (access.redirect) {
      res.setHeader('Set-Cookie', access.redirect.cookie);
      res.setHeader('Cache-Control', 'no-store');
      redirect(res, 307, access.redirect.location);
      return;
    }
    const session = this.sessions.get(access.tenant, target.sessionId);
    const connection = await this.ports.connect(session.id, port);
    this.forward(session, target, port, access, connection, req, res);
  }

  /** One request to the server over `connection`, its answer back to the caller. */
  private forward(
    session: Session,
    target: PortTarget,
    port: number,
    access: PortAccess,
    connection: SessionPortConnection,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): void {
    const { stream } = connection;
    const headers = upstreamRequestHeaders(req.headers, {
      port,
      dropAuthorization: access.by === 'key',
      remoteAddress: req.socket.remoteAddress,
      proto: secure(req) ? 'https' : 'http',
      prefix: target.prefix,
      upgrade: false,
    });
    // The engine answered any `Expect: 100-continue` itself; the body follows regardless.
    delete headers.expect;
    const end = this.record(session, target, port, connection, req, false);
    const counts: PortConnectionEnd = { bytesIn: 0, bytesOut: 0 };
    const upstream = http.request({
      method: req.method,
      path: upstreamUrl(target),
      headers,
      setHost: false,
      createConnection: () => stream,
    });
    const live: Live = {
      destroy: () => {
        upstream.destroy();
        res.destroy();
      },
    };
    this.live.add(live);
    let answered = false;
    upstream.on('response', (answer) => {
      answered = true;
      counts.status = answer.statusCode;
      res.writeHead(
        answer.statusCode ?? 502,
        answer.statusMessage,
        callerResponseHeaders(answer.headers, { port, prefix: target.prefix }),
      );
      // Server-sent events and long polls go out as they come, starting with the head.
      res.flushHeaders();
      answer.on('data', (chunk: Buffer) => (counts.bytesOut += chunk.length));
      answer.on('error', () => res.destroy());
      answer.on('aborted', () => {
        counts.error ??= 'the server closed the connection before its answer was whole';
        res.destroy();
      });
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      counts.error ??= `the server on port ${port} closed the connection: ${err.message}`;
      if (answered || res.headersSent) {
        res.destroy();
        return;
      }
      this.fail(
        res,
        new PortNoAnswerError(
          `the server on port ${port} of session ${session.id} closed the connection without answering (${err.message})`,
          { port },
        ),
      );
    });
    req.on('data', (chunk: Buffer) => (counts.bytesIn += chunk.length));
    req.on('error', () => upstream.destroy());
    req.pipe(upstream);
    res.on('close', () => {
      this.live.delete(live);
      if (!res.writableFinished) {
        // The caller left (an event stream closed): the server's side goes too.
        counts.cancelled = !counts.error;
        upstream.destroy();
      }
      stream.destroy();
      end(counts);
    });
  }

  /**
   * A WebSocket (any upgrade) to a session's port: authenticated as a request (a preview token may ride in the URL:
   * a browser's WebSocket cannot send headers), then the upgrade request goes to the server and the connection stays
   * open both ways: the server's `101` and every frame after it pass through untouched.
   */
  upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const target = this.target(req);
    if (!target) return refuseUpgrade(socket, new Error('not a port'));
    void this.openUpgrade(target, req, socket, head).catch((err: unknown) => refuseUpgrade(socket, err));
  }

  private async openUpgrade(
    target: PortTarget,
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): Promise<void> {
    const port = parsePort(target.port);
    this.ports.check(port);
    // A WebSocket is not held to CORS: only a page of the same host may open one (a preview host's, the engine's).
    refuseCrossOrigin(req.headers);
    const access = this.auth.authorize(req, target, port, secure(req));
    const session = this.sessions.get(access.tenant, target.sessionId);
    const connection = await this.ports.connect(session.id, port);
    if (socket.destroyed) {
      connection.stream.destroy();
      return;
    }
    const { stream } = connection;
    const headers = upstreamRequestHeaders(req.headers, {
      port,
      dropAuthorization: access.by === 'key',
      remoteAddress: req.socket.remoteAddress,
      proto: secure(req) ? 'https' : 'http',
      prefix: target.prefix,
      upgrade: true,
    });
    const lines = [`${req.method ?? 'GET'} ${upstreamUrl(target)} HTTP/1.1`];
    for (const [name, value] of Object.entries(headers)) {
      for (const v of [value].flat()) if (v !== undefined) lines.push(`${name}: ${String(v)}`);
    }
    const end = this.record(session, target, port, connection, req, true);
    const counts: PortConnectionEnd = { bytesIn: head.length, bytesOut: 0 };
    (socket as Socket).setNoDelay?.(true);
    stream.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) stream.write(head);
    stream.once('data', (first: Buffer) => {
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(first.subarray(0, 16).toString('latin1'))?.[1];
      if (status !== undefined) counts.status = Number(status);
    });
    stream.on('data', (chunk: Buffer) => (counts.bytesOut += chunk.length));
    socket.on('data', (chunk: Buffer) => (counts.bytesIn += chunk.length));
    const live: Live = {
      destroy: () => {
        socket.destroy();
        stream.destroy();
      },
    };
    this.live.add(live);
    let closed = false;
    const close = (why?: string) => {
      if (closed) return;
      closed = true;
      this.live.delete(live);
      if (why !== undefined) counts.error = why;
      socket.destroy();
      stream.destroy();
      end(counts);
    };
    stream.on('error', (err) => close(`the server's side failed: ${err.message}`));
    socket.on('error', (err) => close(`the caller's side failed: ${err.message}`));
    stream.on('close', () => close());
    socket.on('close', () => close());
    stream.pipe(socket);
    socket.pipe(stream);
  }

  /** Starts the record of the exchange; answers the function that ends it. */
  private record(
    session: Session,
    target: PortTarget,
    port: number,
    connection: SessionPortConnection,
    req: http.IncomingMessage,
    websocket: boolean,
  ): (end: PortConnectionEnd) => void {
    const requestId = req.headers['x-request-id'];
    return this.connections.open(session, {
      port,
      via: target.via,
      method: req.method ?? 'GET',
      path: upstreamUrl(target),
      websocket,
      tier: connection.tier,
      proc: connection.proc,
      kernel: connection.kernel,
      ...(typeof requestId === 'string' && { requestId }),
    });
  }

  /** Answers a refusal as every route does (the engine's error body); a stream already answering is cut. */
  private fail(res: http.ServerResponse, err: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const { status, body, challenge } = errorAnswer(err);
    if (status >= 500 && status !== 502) this.logger.error({ msg: 'port proxy failed', err: String(err) });
    if (challenge !== undefined) res.setHeader('WWW-Authenticate', challenge);
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(text),
    });
    res.end(text);
  }
}

function redirect(res: http.ServerResponse, status: 307 | 308, location: string): void {
  const text = `Redirecting to ${location}`;
  res.writeHead(status, {
    Location: location,
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Whether the caller reached the engine over TLS: itself, or a proxy in front saying so. */
function secure(req: http.IncomingMessage): boolean {
  return (
    (req.socket as { encrypted?: boolean }).encrypted === true || req.headers['x-forwarded-proto'] === 'https'
  );
}
