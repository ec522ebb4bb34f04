import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { NotFoundError } from '@switchyard/common';
import {
  SessionTerminals,
  type TerminalAttachment,
  terminalEndWords,
  type TerminalInfo,
} from '@switchyard/sandbox';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { Session } from '../../state/sessions/session.model';
import { AccessTokens } from '../http/access-tokens';
import { ApiKeys } from '../http/api-keys';
import { refuseUpgrade, UpgradeRoutes } from '../http/upgrade-routes';
import { refuseCrossOrigin } from '../jupyter/jupyter-upgrade';

/** Where a terminal's WebSocket is. */
const WS_PATH = /^\/v1\/sessions\/([^/]+)\/terminals\/([^/]+)\/ws\/?$/;

/** The largest frame a client may send: a paste bigger than this comes in several frames. */
export const MAX_INPUT_FRAME_BYTES = 64 * 1024;
/** Output frames are at most this big (the scrollback is sent in pieces of it). */
const MAX_OUTPUT_FRAME_BYTES = 64 * 1024;
/** Output a client leaves unread past this: it is too slow for the terminal, and is dropped (it may reconnect). */
export const MAX_UNSENT_BYTES = 4 * 1024 * 1024;
/** Input sent to the sandbox and not yet acknowledged past which the client's socket is not read. */
const MAX_INPUT_IN_FLIGHT = 256 * 1024;
/** How often connections are pinged; one that has not answered the previous ping by the next is closed. */
const PING_INTERVAL_MS = 30_000;
/** Activity of a terminal keeps its session from expiring, marked at most this often. */
const TOUCH_EVERY_MS = 10_000;
/** A dropped client's close frame waits behind what it did not read; after this it is cut. */
const CLOSE_GRACE_MS = 2000;

/** Close codes (RFC 6455 §7.4.1): the terminal ended; the engine is going; the client was too slow; bad frame. */
const CLOSE_ENDED = 1000;
const CLOSE_GOING_AWAY = 1001;
const CLOSE_POLICY = 1008;
const CLOSE_TOO_SLOW = 1013;

const decode = (part: string): string => {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
};

/** A text frame that is a control message rather than keystrokes: `{"type":"resize","cols":…,"rows":…}`. */
function controlOf(text: string): { cols: number; rows: number } | 'invalid' | undefined {
  if (!text.startsWith('{') || text.length > 256) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || (value as { type?: unknown }).type !== 'resize')
    return undefined;
  const { cols, rows } = value as { cols?: unknown; rows?: unknown };
  const ok = (n: unknown, max: number): n is number =>
    Number.isInteger(n) && (n as number) >= 1 && (n as number) <= max;
  return ok(cols, 1000) && ok(rows, 500) ? { cols, rows } : 'invalid';
}

/**
 * The WebSocket of each terminal (`GET /v1/sessions/{sessionId}/terminals/{terminalId}/ws`), on the engine's own HTTP
 * server. Authenticated by the API key (`Authorization: Bearer …`) or, for a browser, which cannot send that header, a
 * token of this terminal (`?token=`, from opening it or `POST …/token`); a page of another site is refused unless it
 * presents a token. Once attached the client gets the terminal's scrollback, then its output as it comes, in binary
 * frames; its binary and text frames are typed into the terminal, except a text frame
 * `{"type":"resize","cols":…,"rows":…}`. Any number of clients may attach: all see the output, all may type. When
 * the terminal ends, each socket closes with code 1000 and its end as the reason ("exit code 0", "closed, signal
 * SIGHUP"). Bounded: a frame of at most 64 KiB in; a client that leaves 4 MiB of output unread is dropped (code 1013;
 * reconnecting shows the scrollback). Not part of the OpenAPI document: it is not a REST route.
 */
@Injectable()
export class TerminalSockets implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Terminal');
  private readonly sockets = new Set<WebSocket>();
  private readonly unanswered = new WeakSet<WebSocket>();
  private wss?: WebSocketServer;
  private pinger?: NodeJS.Timeout;
  private closing = false;

  constructor(
    private readonly routes: UpgradeRoutes,
    private readonly keys: ApiKeys,
    private readonly tokens: AccessTokens,
    private readonly sessions: SessionsService,
    private readonly terminals: SessionTerminals,
  ) {}

  onApplicationBootstrap(): void {
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: MAX_INPUT_FRAME_BYTES,
      perMessageDeflate: false,
      clientTracking: false,
    });
    this.routes.register({
      name: '/v1/sessions/{sessionId}/terminals/{terminalId}/ws',
      match: (pathname) => WS_PATH.test(pathname),
      handle: (req, socket, head) => this.upgrade(req, socket, head),
    });
    this.pinger = setInterval(() => this.ping(), PING_INTERVAL_MS);
    this.pinger.unref();
  }

  onModuleDestroy(): void {
    this.closing = true;
    clearInterval(this.pinger);
    // Open connections would keep the HTTP server from closing.
    for (const ws of this.sockets) ws.terminate();
    this.sockets.clear();
    this.wss?.close();
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    let session: Session;
    let terminalId: string;
    try {
      const url = new URL(req.url ?? '/', 'http://engine');
      const m = WS_PATH.exec(url.pathname);
      if (!m) throw new NotFoundError('no such terminal WebSocket');
      const sessionId = decode(m[1]);
      terminalId = decode(m[2]);
      const token = url.searchParams.get('token');
      let tenant: string;
      if (token !== null && req.headers.authorization === undefined) {
        tenant = this.tokens.verify(token, sessionId, `terminal:${terminalId}`).tenant;
      } else {
        // Only a token proves a page was given access: a browser sends its cookies and origin, never a key.
        refuseCrossOrigin(req.headers);
        tenant = this.keys.principalOf(
          /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1],
        ).tenant;
      }
      session = this.sessions.get(tenant, sessionId);
      // 404 unknown, 409 ended: answered before the upgrade, as a plain HTTP error.
      this.terminals.getOpen(session.id, terminalId);
    } catch (err) {
      refuseUpgrade(socket, err);
      return;
    }
    this.wss!.handleUpgrade(req, socket, head, (ws) => this.connect(session, terminalId, ws));
  }

  private connect(session: Session, terminalId: string, ws: WebSocket): void {
    if (this.closing) {
      ws.close(CLOSE_GOING_AWAY, 'the engine is shutting down');
      return;
    }
    let attachment: TerminalAttachment;
    let dropped = false;
    const drop = (code: number, reason: string) => {
      if (dropped) return;
      dropped = true;
      ws.close(code, reason);
      setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
    };
    const send = (data: Buffer) => {
      if (ws.readyState !== WebSocket.OPEN || dropped) return;
      if (ws.bufferedAmount > MAX_UNSENT_BYTES) {
        this.logger.warn({ msg: 'a terminal client reads too slowly: dropped', terminalId });
        drop(CLOSE_TOO_SLOW, 'too slow to read the output: reconnect for the scrollback');
        return;
      }
      for (let at = 0; at < data.length; at += MAX_OUTPUT_FRAME_BYTES) {
        ws.send(data.subarray(at, at + MAX_OUTPUT_FRAME_BYTES), { binary: true });
      }
    };
    try {
      attachment = this.terminals.attach(session.id, terminalId, {
        output: send,
        ended: (info) => this.ended(ws, info),
      });
    } catch {
      // Ended between the upgrade's check and now.
      ws.close(CLOSE_ENDED, 'the terminal has ended');
      return;
    }
    this.sockets.add(ws);
    this.sessions.touch(session);
    if (attachment.scrollback.length > 0) send(attachment.scrollback);

    let inFlight = 0;
    let paused = false;
    let touchedAt = Date.now();
    const type = (data: Buffer) => {
      if (Date.now() - touchedAt > TOUCH_EVERY_MS) {
        touchedAt = Date.now();
        this.sessions.touch(session);
      }
      inFlight += data.length;
      if (inFlight > MAX_INPUT_IN_FLIGHT && !paused) {
        paused = true;
        ws.pause();
      }
      this.terminals
        .write(session.id, terminalId, data)
        .catch(() => undefined) // ended meanwhile: its end closes the socket
        .finally(() => {
          inFlight -= data.length;
          if (paused && inFlight <= MAX_INPUT_IN_FLIGHT / 4) {
            paused = false;
            ws.resume();
          }
        });
    };

    ws.on('pong', () => this.unanswered.delete(ws));
    ws.on('error', (err) => this.logger.debug({ msg: 'terminal WebSocket error', err: err.message }));
    ws.on('close', () => {
      this.sockets.delete(ws);
      attachment.detach();
    });
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) return type(data);
      const control = controlOf(data.toString('utf8'));
      if (control === undefined) return type(data);
      if (control === 'invalid') {
        drop(CLOSE_POLICY, 'a resize message needs integer cols (1–1000) and rows (1–500)');
        return;
      }
      this.terminals.resize(session.id, terminalId, control.cols, control.rows).catch(() => undefined);
    });
  }

  /** The terminal ended: its sockets close once their output is sent, saying how it ended. */
  private ended(ws: WebSocket, info: TerminalInfo): void {
    const going = info.endReason === 'shutdown' || info.endReason === 'session_ended';
    // A close reason is at most 123 bytes; the end's words are far shorter.
    ws.close(going ? CLOSE_GOING_AWAY : CLOSE_ENDED, terminalEndWords(info).slice(0, 120));
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
