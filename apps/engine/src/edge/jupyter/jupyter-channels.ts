import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { Session } from '../../state/sessions/session.model';
import { ApiKeys } from '../http/api-keys';
import { refuseUpgrade, UpgradeRoutes } from '../http/upgrade-routes';
import { parseJsonBody } from '../http/json-body.middleware';
import type { JupyterKernel, JupyterPeer } from './jupyter-kernel';
import { JupyterKernels } from './jupyter-kernels';
import { parseJupyterRequest } from './jupyter-messages';
import { JupyterShell } from './jupyter-shell';
import { channelsTarget, channelsTenant, refuseCrossOrigin } from './jupyter-upgrade';

/** Output a client leaves unread past this is taken for a client that is gone: its connection is closed. */
const MAX_UNREAD_BYTES = 64 * 1024 * 1024;
/** How often connections are pinged; one that has not answered the previous ping by the next is closed. */
const PING_INTERVAL_MS = 30_000;
/** WebSocket close code of a message too big or not a Jupyter message the kernel can take. */
const CLOSE_POLICY = 1008;

/**
 * The `channels` WebSocket of each Jupyter kernel (`…/jupyter/api/kernels/{id}/channels`), on the engine's own HTTP
 * server: authenticated like the REST routes (see `channelsTenant`), then Jupyter messages in JSON text frames, the
 * legacy framing jupyter_server's gateway client speaks (no subprotocol is chosen). Frames are bounded by
 * SWITCHYARD_MAX_BODY_BYTES and parsed with the request bodies' limits; a frame that is not a Jupyter message is
 * dropped, as Jupyter does. Not part of the OpenAPI document: it is not a REST route.
 */
@Injectable()
export class JupyterChannels implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Jupyter');
  private readonly sockets = new Set<WebSocket>();
  private readonly unanswered = new WeakSet<WebSocket>();
  private wss?: WebSocketServer;
  private pinger?: NodeJS.Timeout;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly routes: UpgradeRoutes,
    private readonly keys: ApiKeys,
    private readonly sessions: SessionsService,
    private readonly kernels: JupyterKernels,
    private readonly shell: JupyterShell,
  ) {}

  onApplicationBootstrap(): void {
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: this.config.http.maxBodyBytes,
      perMessageDeflate: false,
      clientTracking: false,
      // Jupyter's JSON framing: a client offering `v1.kernel.websocket.jupyter.org` falls back to it.
      handleProtocols: () => false,
    });
    this.routes.register({
      name: '/v1/sessions/{sessionId}/jupyter/api/kernels/{kernelId}/channels',
      match: (pathname) => isChannelsPath(pathname),
      handle: (req, socket, head) => this.upgrade(req, socket, head),
    });
    this.pinger = setInterval(() => this.ping(), PING_INTERVAL_MS);
    this.pinger.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.pinger);
    // Open connections would keep the HTTP server from closing.
    for (const ws of this.sockets) ws.terminate();
    this.sockets.clear();
    this.wss?.close();
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    let session: Session;
    let kernel: JupyterKernel;
    try {
      const { sessionId, kernelId } = channelsTarget(req.url);
      refuseCrossOrigin(req.headers);
      const tenant = channelsTenant(
        this.keys,
        req.headers,
        this.config.jupyter.kernelIdAuth,
        () => this.kernels.find(sessionId, kernelId)?.tenant,
      );
      session = this.sessions.get(tenant, sessionId);
      kernel = this.kernels.get(sessionId, kernelId);
    } catch (err) {
      refuseUpgrade(socket, err);
      return;
    }
    this.wss!.handleUpgrade(req, socket, head, (ws) => this.connect(session, kernel, ws));
  }

  private connect(session: Session, kernel: JupyterKernel, ws: WebSocket): void {
    if (kernel.ended) {
      ws.close(1001, 'the kernel was deleted');
      return;
    }
    const peer: JupyterPeer = {
      send: (message) => {
        if (ws.readyState !== WebSocket.OPEN) return;
        if (ws.bufferedAmount > MAX_UNREAD_BYTES) {
          this.logger.warn({ msg: 'a Jupyter client reads nothing: closed', kernelId: kernel.id });
          ws.terminate();
          return;
        }
        ws.send(JSON.stringify(message));
      },
      close: (code, reason) => ws.close(code, reason),
    };
    this.sockets.add(ws);
    kernel.attach(peer);
    ws.on('pong', () => this.unanswered.delete(ws));
    ws.on('error', (err) => this.logger.debug({ msg: 'Jupyter WebSocket error', err: err.message }));
    ws.on('close', () => {
      this.sockets.delete(ws);
      kernel.detach(peer);
    });
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        // Jupyter's binary framing carries buffers (widgets' comm messages), which these kernels have no use for.
        this.logger.debug({ msg: 'binary Jupyter frame dropped', kernelId: kernel.id });
        return;
      }
      let value: unknown;
      try {
        value = parseJsonBody(data);
      } catch (err) {
        this.logger.debug({
          msg: 'a Jupyter frame is not JSON',
          kernelId: kernel.id,
          why: (err as Error).message,
        });
        ws.close(CLOSE_POLICY, 'not a JSON message within the engine’s limits');
        return;
      }
      const request = parseJupyterRequest(value);
      if (typeof request === 'string') {
        this.logger.debug({ msg: 'not a Jupyter message: dropped', kernelId: kernel.id, why: request });
        return;
      }
      this.shell.receive(session, kernel, peer, request);
    });
  }

  /** Pings every connection; closes those that did not answer the last ping. */
  private ping(): void {
    for (const ws of this.sockets) {
      if (this.unanswered.has(ws)) {
        ws.terminate();
        continue;
      }
      this.unanswered.add(ws);
      ws.ping();
    }
  }
}

/** Whether a path is a kernel's channels (the upgrade's own checks then name what is wrong with it). */
function isChannelsPath(pathname: string): boolean {
  try {
    channelsTarget(pathname);
    return true;
  } catch {
    return false;
  }
}
