import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { type ErrorKind, SwitchyardError } from '@switchyard/common';
import * as http from 'node:http';
import * as https from 'node:https';
import type { Duplex } from 'node:stream';
import { ReplicaLeases, type SessionRoute } from '../../engine/replicas/replica-leases';
import { ReplicaTakeover } from '../../engine/replicas/replica-takeover';
import { refuseUpgrade, UpgradeRoutes } from '../http/upgrade-routes';
import { FORWARDED_BY } from './session-forwarding';

/** How long a replica may take to accept a forwarded upgrade's connection. */
const CONNECT_TIMEOUT_MS = 5000;
/** Errors that mean the request never reached the owner: it may be served elsewhere. */
const NOT_DELIVERED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNECTTIMEOUT']);
/** Headers of one hop that an upgrade still needs to carry to the owner (`Connection: Upgrade`, `Upgrade`). */
const HOP_BY_HOP = new Set(['keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer']);

/** The replica serving the session cannot take the upgrade now: the caller retries after `retryAfterSeconds`. */
class ReplicaUnavailableError extends SwitchyardError {
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;
  constructor(
    readonly code: string,
    message: string,
    retryAfterSeconds: number,
  ) {
    super(`${message}; retry after ${retryAfterSeconds} s`, { retryAfterSeconds });
  }
}

/** The replica serving the session failed while taking the upgrade. */
class ReplicaFailedError extends SwitchyardError {
  readonly code = 'REPLICA_FAILED';
  readonly kind: ErrorKind = 'bad_gateway';
}

/**
 * WebSockets about a session another replica serves (a terminal's, a port's, a Jupyter kernel's channels) go to that
 * replica, as the session's plain requests do (`SessionForwarding`): the upgrade request is sent on with the caller's
 * credentials, and once the owner switches protocols the two sockets are piped together, bytes as they are. An owner
 * that refuses the upgrade (401, 404, 409) has its answer passed back. A refused connection waits for the owner's
 * lease to run out, then the session is taken over and served here.
 */
@Injectable()
export class UpgradeForwarding implements OnModuleInit {
  private readonly logger = new Logger('SessionForwarding');

  constructor(
    private readonly leases: ReplicaLeases,
    private readonly takeover: ReplicaTakeover,
    private readonly routes: UpgradeRoutes,
  ) {}

  onModuleInit(): void {
    this.routes.forwardWith((sessionId, req, socket, head) => this.forward(sessionId, req, socket, head));
  }

  /** Resolves true once the upgrade went to (or was refused for) another replica; false when this one serves it. */
  async forward(
    sessionId: string,
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): Promise<boolean> {
    const deadline = Date.now() + this.leases.leaseMs + 2000;
    for (;;) {
      let route = await this.leases.route(sessionId);
      if (route && !route.alive && route.owner !== this.leases.replicaId) {
        await this.takeover.takeOver(route.owner);
        route = await this.leases.route(sessionId);
      }
      if (!route || route.owner === this.leases.replicaId) {
        await this.takeover.ready(sessionId);
        return false;
      }
      const refuse = (code: string, message: string, retry: number): true => {
        refuseUpgrade(socket, new ReplicaUnavailableError(code, message, retry));
        return true;
      };
      if (req.headers[FORWARDED_BY] !== undefined || route.url === undefined)
        return refuse('REPLICA_MOVED', `the replica serving session ${sessionId} is changing`, 1);
      if (!route.alive) return refuse('REPLICA_UNAVAILABLE', `session ${sessionId} is being taken over`, 1);
      if (await this.pipe(route, req, socket, head)) return true;
      if (Date.now() > deadline) {
        const retry = Math.ceil(this.leases.leaseMs / 1000);
        return refuse(
          'REPLICA_UNAVAILABLE',
          `the replica serving session ${sessionId} does not answer`,
          retry,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** Sends the upgrade to the owner; true once it answered (or the caller left), false when it refused to connect. */
  private pipe(
    route: SessionRoute,
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
  ): Promise<boolean> {
    return new Promise((resolve) => {
      const target = new URL(req.url ?? '/', route.url);
      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
      }
      headers[FORWARDED_BY] = this.leases.replicaId;
      headers['x-forwarded-for'] = [req.headers['x-forwarded-for'], req.socket.remoteAddress]
        .filter((v) => v !== undefined)
        .join(', ');
      const client = target.protocol === 'https:' ? https : http;
      const upstream = client.request(target, { method: req.method, headers });
      let answered = false;
      upstream.on('socket', (s) => {
        if (!s.connecting) return;
        const timer = setTimeout(
          () => upstream.destroy(Object.assign(new Error('connect timeout'), { code: 'ECONNECTTIMEOUT' })),
          CONNECT_TIMEOUT_MS,
        );
        s.once('connect', () => clearTimeout(timer));
        s.once('close', () => clearTimeout(timer));
      });
      upstream.on('upgrade', (answer, ownerSocket, ownerHead) => {
        answered = true;
        socket.write(head101(answer));
        if (ownerHead.length > 0) socket.write(ownerHead);
        if (head.length > 0) ownerSocket.write(head);
        ownerSocket.pipe(socket);
        socket.pipe(ownerSocket);
        const cut = () => {
          ownerSocket.destroy();
          socket.destroy();
        };
        ownerSocket.on('error', cut).on('close', cut);
        socket.on('error', cut).on('close', cut);
        resolve(true);
      });
      // The owner refused the upgrade (unknown terminal, bad token…): its answer goes back as it is.
      upstream.on('response', (answer) => {
        answered = true;
        // The body goes on decoded and the connection ends after it: no chunked framing, no keep-alive.
        const status = `HTTP/1.1 ${answer.statusCode ?? 502} ${answer.statusMessage ?? ''}`;
        socket.write(headOf(answer, status, ['transfer-encoding', 'connection'], ['Connection: close']));
        answer.pipe(socket);
        answer.on('error', () => socket.destroy());
        resolve(true);
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        if (answered) return socket.destroy();
        if (NOT_DELIVERED.has(err.code ?? '')) return resolve(false);
        this.logger.warn({ msg: 'forwarded upgrade failed', url: target.origin, err: String(err) });
        refuseUpgrade(
          socket,
          new ReplicaFailedError('the replica serving this session failed while taking the connection'),
        );
        resolve(true);
      });
      socket.once('close', () => {
        if (!answered) upstream.destroy();
      });
      upstream.end();
    });
  }
}

/** The status line and headers of an answer, as raw HTTP/1.1, for a socket that is not (yet) a response. */
function headOf(
  answer: http.IncomingMessage,
  statusLine: string,
  drop: string[] = [],
  add: string[] = [],
): string {
  const lines = [statusLine];
  for (let i = 0; i + 1 < answer.rawHeaders.length; i += 2) {
    const name = answer.rawHeaders[i];
    if (!drop.includes(name.toLowerCase())) lines.push(`${name}: ${answer.rawHeaders[i + 1]}`);
  }
  return `${[...lines, ...add].join('\r\n')}\r\n\r\n`;
}

const head101 = (answer: http.IncomingMessage): string => headOf(answer, 'HTTP/1.1 101 Switching Protocols');
