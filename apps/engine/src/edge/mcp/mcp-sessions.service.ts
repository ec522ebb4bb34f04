import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { CLOCK, type Clock } from '@switchyard/common';
import type { Request, Response } from 'express';
import { randomUUID } from 'node:crypto';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { SessionsService } from '../../session/sessions/sessions.service';
import { McpServerFactory } from './mcp-server.factory';

/** The header carrying the MCP session id (Streamable HTTP). */
export const MCP_SESSION_HEADER = 'mcp-session-id';

/** One MCP session: its transport and server, and the engine session its tools run in. */
interface McpSession {
  id: string;
  tenant: string;
  engineSessionId: string;
  server: Server;
  transport: StreamableHTTPServerTransport;
  /** Monotonic ms of the last request's start or end. */
  lastActive: number;
  /** POSTs being answered (a GET's event stream stays open and is not activity). */
  inflight: number;
  /** Set before the close starts: closing the server closes the transport, which calls back here. */
  closed: boolean;
  closing?: Promise<void>;
}

/**
 * Owns the MCP sessions of `/mcp`: one engine session each, created at `initialize` for the tenant of the key that
 * sent it, and deleted when the MCP session closes (DELETE, transport close), idles past the session TTL, or the
 * engine shuts down. An engine session that ends first (expired, deleted through the REST API) closes its MCP
 * session. Requests of another tenant see an unknown session.
 */
@Injectable()
export class McpSessions implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('Mcp');
  private readonly byId = new Map<string, McpSession>();
  private readonly byEngineSession = new Map<string, McpSession>();
  private readonly idleMs: number;
  private sweepTimer?: NodeJS.Timeout;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly sessions: SessionsService,
    private readonly servers: McpServerFactory,
  ) {
    // The same idle time as an engine session's: the two end together whichever is idle first.
    this.idleMs = config.sessions.defaultTtlSeconds * 1000;
  }

  onModuleInit(): void {
    this.sessions.onSessionEnd((engineSessionId) => {
      const mcp = this.byEngineSession.get(engineSessionId);
      return mcp ? this.close(mcp, 'engine session ended', false) : Promise.resolve();
    });
    this.sweepTimer = setInterval(() => void this.sweep(), this.config.sessions.sweepIntervalMs);
    this.sweepTimer.unref();
  }

  /** Closes every MCP session (their event streams would hold the HTTP server open) and deletes their engine sessions. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.sweepTimer);
    await Promise.allSettled([...this.byId.values()].map((s) => this.close(s, 'engine shutdown', true)));
  }

  /** Number of open MCP sessions. */
  get size(): number {
    return this.byId.size;
  }

  /** Engine session of an open MCP session of `tenant`, if any. */
  engineSessionOf(tenant: string, mcpSessionId: string): string | undefined {
    const s = this.byId.get(mcpSessionId);
    return s && s.tenant === tenant ? s.engineSessionId : undefined;
  }

  /** Answers one request to `/mcp` (POST, GET or DELETE) for `tenant`. */
  async handle(tenant: string, req: Request, res: Response): Promise<void> {
    const header = req.headers[MCP_SESSION_HEADER];
    const id = Array.isArray(header) ? header[0] : header;
    if (id === undefined) {
      if (req.method === 'POST' && isInitialize(req.body)) return this.open(tenant, req, res);
      return refuse(
        res,
        400,
        req.method === 'POST'
          ? 'Bad Request: Mcp-Session-Id header is required (only initialize opens a session)'
          : 'Bad Request: Mcp-Session-Id header is required',
      );
    }
    const session = this.byId.get(id);
    // Another tenant's session is indistinguishable from a missing one, as for the REST API's sessions.
    if (!session || session.tenant !== tenant || session.closed) {
      return refuse(res, 404, 'Session not found: initialize a new MCP session');
    }
    const counts = req.method === 'POST';
    if (counts) session.inflight++;
    session.lastActive = this.clock.monotonic();
    if (this.sessions.isLive(session.engineSessionId)) {
      this.sessions.touch(this.sessions.get(tenant, session.engineSessionId));
    }
    try {
      await session.transport.handleRequest(req, res, req.body);
    } finally {
      if (counts) session.inflight--;
      session.lastActive = this.clock.monotonic();
    }
  }

  /** `initialize`: a new engine session, then the transport that answers with the new MCP session id. */
  private async open(tenant: string, req: Request, res: Response): Promise<void> {
    const engine = await this.sessions.create(tenant, { metadata: { createdBy: 'mcp' } });
    const server = this.servers.create(tenant, engine.id);
    let opened: McpSession | undefined;
    const transport = new StreamableHTTPServerTransport({
      // `<engine session>.<uuid>`: any replica can tell which engine session, so which replica, an MCP session is on.
      sessionIdGenerator: () => `${engine.id}.${randomUUID()}`,
      onsessioninitialized: (id) => {
        opened = {
          id,
          tenant,
          engineSessionId: engine.id,
          server,
          transport,
          lastActive: this.clock.monotonic(),
          inflight: 0,
          closed: false,
        };
        this.byId.set(id, opened);
        this.byEngineSession.set(engine.id, opened);
        this.logger.log({ msg: 'MCP session opened', mcpSessionId: id, sessionId: engine.id, tenant });
      },
    });
    server.onclose = () => {
      if (opened) void this.close(opened, 'transport closed', true);
    };
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    } finally {
      // The transport refused the initialize (bad params, bad Accept header): nothing may stay behind.
      if (!opened) {
        await server.close().catch(() => undefined);
        await this.sessions.end(engine.id, 'deleted');
      }
    }
  }

  /** Ends an MCP session once; `endEngine`: delete its engine session too (not when that is what is ending). */
  private close(session: McpSession, reason: string, endEngine: boolean): Promise<void> {
    if (session.closed) return session.closing ?? Promise.resolve();
    session.closed = true;
    const run = async () => {
      this.byId.delete(session.id);
      this.byEngineSession.delete(session.engineSessionId);
      // Started first, so that the engine session reads as gone (404) as soon as the close is answered.
      const ended =
        endEngine && this.sessions.isLive(session.engineSessionId)
          ? this.sessions.end(session.engineSessionId, 'deleted')
          : Promise.resolve();
      await Promise.all([session.server.close(), ended]);
      this.logger.log({
        msg: 'MCP session closed',
        mcpSessionId: session.id,
        sessionId: session.engineSessionId,
        reason,
      });
    };
    session.closing = run().catch((err: unknown) => {
      this.logger.error({ msg: 'failed to close MCP session', mcpSessionId: session.id, err: String(err) });
    });
    return session.closing;
  }

  /** Closes the MCP sessions idle longer than the session TTL (no request, nothing running). */
  async sweep(): Promise<void> {
    const now = this.clock.monotonic();
    const idle = [...this.byId.values()].filter(
      (s) => s.inflight === 0 && !s.closed && now - s.lastActive >= this.idleMs,
    );
    await Promise.allSettled(idle.map((s) => this.close(s, 'idle', true)));
  }
}

function isInitialize(body: unknown): boolean {
  return Array.isArray(body) ? body.some((m) => isInitializeRequest(m)) : isInitializeRequest(body);
}

/** A JSON-RPC error answer, as the SDK's transport gives its own refusals. */
function refuse(res: Response, status: number, message: string): void {
  res
    .status(status)
    .json({ jsonrpc: '2.0', error: { code: status === 404 ? -32001 : -32000, message }, id: null });
}
