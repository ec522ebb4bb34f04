import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { NotFoundError } from '@switchyard/common';
import { type IncomingMessage, type Server, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorAnswer } from './domain-error.filter';

/** One kind of WebSocket (or other upgrade) the engine serves, by path. */
export interface UpgradeRoute {
  /** For logs and the 404 that lists the routes: `/v1/sessions/{sessionId}/terminals/{terminalId}/ws`. */
  readonly name: string;
  /** Whether this route serves the request: by its path (the query left out), or by more of it (a preview's Host). */
  match(pathname: string, req: IncomingMessage): boolean;
  /**
   * It matches by the request's Host too (a preview host): such routes are tried before those matched by path alone,
   * so every path of a preview host, `/v1/sessions/…/ws` included, is the session's app and no engine route.
   */
  readonly byHost?: boolean;
  /** The session the upgrade is about, when its path does not say it as `/v1/sessions/<id>/…` (a preview host). */
  sessionOf?(req: IncomingMessage): string | undefined;
  /** Takes the socket: upgrades it, or refuses it (`refuseUpgrade`). */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/**
 * Hands an upgrade about a session another replica serves to that replica (SWITCHYARD_STATE=postgres): resolves true
 * once it took the socket (forwarded, or refused), false when this replica serves the session.
 */
export type UpgradeForwarder = (
  sessionId: string,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
) => Promise<boolean>;

const SESSION_PATH = /^\/v1\/sessions\/([^/]+)\//;

/**
 * The engine's one listener of its HTTP server's `upgrade` event: each kind of WebSocket (Jupyter's kernel channels,
 * the terminals, the ports proxy) registers a route, and an upgrade no route matches is answered 404 with the
 * engine's error body. With replicas, an upgrade about a session is first handed to the replica serving it, as the
 * session's plain requests are (`SessionForwarding`).
 */
@Injectable()
export class UpgradeRoutes implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Upgrade');
  private readonly routes: UpgradeRoute[] = [];
  private forwarder?: UpgradeForwarder;
  private httpServer?: Server;
  private readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void =>
    this.upgrade(req, socket, head);

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  register(route: UpgradeRoute): void {
    if (route.byHost) this.routes.unshift(route);
    else this.routes.push(route);
  }

  /** Set by the replicas' forwarding, when the engine runs as one of several replicas. */
  forwardWith(forwarder: UpgradeForwarder): void {
    this.forwarder = forwarder;
  }

  onApplicationBootstrap(): void {
    this.httpServer = this.adapterHost.httpAdapter?.getHttpServer() as Server | undefined;
    this.httpServer?.on('upgrade', this.onUpgrade);
  }

  onModuleDestroy(): void {
    this.httpServer?.off('upgrade', this.onUpgrade);
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const pathname = (req.url ?? '').split('?', 1)[0];
    const route = this.routes.find((r) => r.match(pathname, req));
    if (!route) {
      const names = this.routes.map((r) => r.name).join(', ');
      refuseUpgrade(socket, new NotFoundError(`no WebSocket here: the WebSocket routes are ${names}`));
      return;
    }
    if (!this.forwarder) return route.handle(req, socket, head);
    const sessionId = route.sessionOf?.(req) ?? sessionInPath(pathname);
    if (sessionId === undefined) return route.handle(req, socket, head);
    this.forwarder(sessionId, req, socket, head).then(
      (taken) => {
        if (!taken) route.handle(req, socket, head);
      },
      (err: unknown) => {
        this.logger.error({ msg: 'cannot route a session upgrade', sessionId, err: String(err) });
        refuseUpgrade(socket, err);
      },
    );
  }
}

/** The session a `/v1/sessions/<id>/…` path names. */
function sessionInPath(pathname: string): string | undefined {
  const session = SESSION_PATH.exec(pathname)?.[1];
  if (session === undefined) return undefined;
  try {
    return decodeURIComponent(session);
  } catch {
    // Not percent-encoded as it should be: the route refuses the unknown session.
    return session;
  }
}

/** Answers a refused upgrade as any refused request is answered: its status and the engine's error body. */
export function refuseUpgrade(socket: Duplex, err: unknown, headers: string[] = []): void {
  const { status, body, challenge } = errorAnswer(err);
  const text = JSON.stringify(body);
  const retryAfter = body.error.details?.retryAfterSeconds;
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(text)}`,
    ...(challenge === undefined ? [] : [`WWW-Authenticate: ${challenge}`]),
    ...(typeof retryAfter === 'number' ? [`Retry-After: ${Math.max(1, Math.ceil(retryAfter))}`] : []),
    ...headers,
    'Connection: close',
  ];
  if (socket.writable) socket.end(`${lines.join('\r\n')}\r\n\r\n${text}`);
  else socket.destroy();
}
