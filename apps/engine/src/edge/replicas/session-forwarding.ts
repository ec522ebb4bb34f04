import { Inject, Injectable, Logger } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import * as http from 'node:http';
import * as https from 'node:https';
import { errorBody } from '../../platform/validation/error-body';
import type { RawBodyRequest } from '../http/json-body.middleware';
import { ReplicaLeases, type SessionRoute } from '../../engine/replicas/replica-leases';
import { ReplicaTakeover } from '../../engine/replicas/replica-takeover';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { hostTarget } from '../ports/port-target';

/** How long a replica may take to accept a forwarded request's connection. */
const CONNECT_TIMEOUT_MS = 5000;

/** Errors that mean the request never reached the owner: it may be served elsewhere without running twice. */
const NOT_DELIVERED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNECTTIMEOUT']);

function connectTimeout(): NodeJS.ErrnoException {
  return Object.assign(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`), {
    code: 'ECONNECTTIMEOUT',
  });
}

/** Names the replica that forwarded a request: a replica never forwards one again (no loops). */
export const FORWARDED_BY = 'x-switchyard-forwarded-by';

/** Headers of one hop only (RFC 9110 §7.6.1), never passed on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
]);

/**
 * The session a request is about: a preview host's (`<port>-<sessionId>.<SWITCHYARD_PREVIEW_DOMAIN>`, any path);
 * `/v1/sessions/<id>` and everything under it; `/v1/tools?sessionId=<id>` (the catalog a session's policy filters);
 * `/mcp` with an `Mcp-Session-Id` (`<engine session>.<uuid>`).
 */
function sessionOf(req: Request, previewDomain: string | undefined): string | undefined {
  const preview = hostTarget(req.headers.host, req.originalUrl, previewDomain);
  if (preview) return preview.sessionId;
  const m = /^\/v1\/sessions\/([^/]+)(?:\/|$)/.exec(req.path);
  if (m) return safeDecode(m[1]);
  if (req.path === '/v1/tools' && typeof req.query.sessionId === 'string') return req.query.sessionId;
  const mcp = req.headers['mcp-session-id'];
  if (req.path === '/mcp' && typeof mcp === 'string') return /^(ses_[0-9a-f]+)\./.exec(mcp)?.[1];
  return undefined;
}

function safeDecode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/**
 * Any replica serves any session: a request for a session another replica serves is forwarded to it (its kernels,
 * processes, browser pages, queue and event stream live there), streamed both ways (SSE included), with the caller's
 * own credentials (the owner authenticates it). A session whose replica's lease ran out is taken over first and
 * served here. When the owner refuses connections (it just died), the request waits for its lease to run out, then
 * is served here; nothing was sent, so nothing runs twice. A failure after the owner took the request is a 502: the
 * action may have started, and ends `interrupted` with its replica (retry with the same `Idempotency-Key`).
 */
@Injectable()
export class SessionForwarding {
  private readonly logger = new Logger('SessionForwarding');

  constructor(
    private readonly leases: ReplicaLeases,
    private readonly takeover: ReplicaTakeover,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  middleware(): (req: Request, res: Response, next: NextFunction) => void {
    return (req, res, next) => {
      const sessionId = sessionOf(req, this.config.ports.previewDomain);
      if (sessionId === undefined) return next();
      this.route(sessionId, req, res, next).catch((err: unknown) => {
        this.logger.error({ msg: 'cannot route a session request', sessionId, err: String(err) });
        if (!res.headersSent)
          unavailable(res, 'REPLICA_STATE_UNAVAILABLE', 'the replicas’ shared state cannot be read', 2);
      });
    };
  }

  private async route(sessionId: string, req: Request, res: Response, next: NextFunction): Promise<void> {
    const deadline = Date.now() + this.leases.leaseMs + 2000;
    for (;;) {
      let route = await this.leases.route(sessionId);
      if (route && !route.alive && route.owner !== this.leases.replicaId) {
        await this.takeover.takeOver(route.owner);
        route = await this.leases.route(sessionId);
      }
      // No such session anywhere: the controller answers 404 as for any unknown id.
      if (!route || route.owner === this.leases.replicaId) {
        await this.takeover.ready(sessionId);
        return next();
      }
      if (req.headers[FORWARDED_BY] !== undefined || route.url === undefined) {
        // Forwarded here by a replica that thinks this one serves it, while the owner moved: the caller retries.
        return unavailable(res, 'REPLICA_MOVED', `the replica serving session ${sessionId} is changing`, 1);
      }
      if (!route.alive) {
        return unavailable(res, 'REPLICA_UNAVAILABLE', `session ${sessionId} is being taken over`, 1);
      }
      const sent = await this.forward(route, req as RawBodyRequest, res);
      if (sent) return;
      // The owner refused the connection: it is gone or going. Wait for its lease to run out, then serve it here.
      if (Date.now() > deadline) {
        const retry = Math.ceil(this.leases.leaseMs / 1000);
        return unavailable(
          res,
          'REPLICA_UNAVAILABLE',
          `the replica serving session ${sessionId} does not answer`,
          retry,
        );
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /**
   * Streams the request to the owner and its answer back. Resolves `true` once the owner answered (or the caller
   * left), `false` when the owner refused the connection before anything was sent.
   */
  private forward(route: SessionRoute, req: RawBodyRequest, res: Response): Promise<boolean> {
    return new Promise((resolve) => {
      const target = new URL(req.originalUrl, route.url);
      const headers: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (!HOP_BY_HOP.has(name) && value !== undefined) headers[name] = value;
      }
      headers[FORWARDED_BY] = this.leases.replicaId;
      headers['x-forwarded-for'] = [req.headers['x-forwarded-for'], req.socket.remoteAddress]
        .filter((v) => v !== undefined)
        .join(', ');
      const body = req.rawBody;
      if (body) headers['content-length'] = String(body.length);
      // A body no parser buffered (a file transfer's bytes) goes through as it comes, with its length when it has one.
      const streamed = body === undefined && hasUnreadBody(req);
      if (streamed && req.headers['content-length'] !== undefined)
        headers['content-length'] = req.headers['content-length'];
      const client = target.protocol === 'https:' ? https : http;
      const upstream = client.request(target, { method: req.method, headers });
      let answered = false;
      // A replica that does not even accept the connection in time is treated as one that refused it: nothing was
      // sent. Once connected, no timeout: an event stream may stay open for hours.
      upstream.on('socket', (socket) => {
        if (!socket.connecting) return;
        const timer = setTimeout(() => upstream.destroy(connectTimeout()), CONNECT_TIMEOUT_MS);
        socket.once('connect', () => clearTimeout(timer));
        socket.once('close', () => clearTimeout(timer));
      });
      upstream.on('response', (answer) => {
        answered = true;
        const out: http.OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (!HOP_BY_HOP.has(name) && value !== undefined) out[name] = value;
        }
        if (answer.headers['content-length'] !== undefined)
          out['content-length'] = answer.headers['content-length'];
        res.writeHead(answer.statusCode ?? 502, out);
        // Server-Sent Events go out as they come.
        res.flushHeaders();
        answer.pipe(res);
        answer.on('error', () => res.destroy());
        resolve(true);
      });
      // The caller left (an SSE client closing its stream): stop the owner's side too.
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        if (answered) return res.destroy();
        if (NOT_DELIVERED.has(err.code ?? '')) return resolve(false);
        if (res.headersSent || res.destroyed) return resolve(true);
        this.logger.warn({ msg: 'forwarded request failed', url: target.origin, err: String(err) });
        res
          .status(502)
          .json(
            errorBody(
              'REPLICA_FAILED',
              'the replica serving this session failed while handling the request; an action it started ends ' +
                '`interrupted` — retry with the same Idempotency-Key',
              [],
              { retryAfterSeconds: 1 },
            ),
          );
        resolve(true);
      });
      if (!streamed) {
        upstream.end(body);
        return;
      }
      // Not one byte is read before the owner accepted the connection: a refused one leaves the body unread for the
      // next attempt (this replica serving it, once the owner's lease ran out).
      upstream.on('socket', (socket) => {
        const send = () => {
          req.on('error', () => upstream.destroy());
          req.pipe(upstream);
        };
        if (socket.connecting) socket.once('connect', send);
        else send();
      });
    });
  }
}

/** A request body still to come: declared by a non-zero length or sent chunked. */
function hasUnreadBody(req: RawBodyRequest): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/** A 503 the caller retries after `retryAfterSeconds` (the replicas' answers written before Nest's filter runs). */
export function unavailable(res: Response, code: string, message: string, retryAfterSeconds: number): void {
  res
    .status(503)
    .setHeader('Retry-After', String(retryAfterSeconds))
    .json(errorBody(code, `${message}; retry after ${retryAfterSeconds} s`, [], { retryAfterSeconds }));
}
