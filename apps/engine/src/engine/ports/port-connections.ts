import { Inject, Injectable, Logger } from '@nestjs/common';
import { type ActionResult, CLOCK, type Clock, NO_RISK } from '@switchyard/common';
import {
  type ActionCompletion,
  type ActionStart,
  ContextGraph,
  type ReachedRef,
} from '@switchyard/context-graph';
import type { StatefulTier } from '@switchyard/sandbox';
import { randomBytes } from 'node:crypto';
import { MetricsService } from '../../platform/metrics/metrics.service';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import { SessionEvents } from '../../session/events/session-events';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { Session } from '../../state/sessions/session.model';
import { ActionEnvelopes } from '../actions/action-envelope';
import { hashInput } from '../actions/input-hash';

/** One connection the engine proxies to a session's port, as it opens. */
export interface PortConnectionStart {
  port: number;
  /** Through the path proxy (`/v1/sessions/{id}/ports/{port}/…`) or a preview host. */
  via: 'path' | 'host';
  method: string;
  /** The path and query the server is sent. */
  path: string;
  websocket: boolean;
  /** The tier of the box whose port it reached. */
  tier: StatefulTier;
  /** Who listens there, as the runner told. */
  proc: string | null;
  kernel: string | null;
  requestId?: string;
}

/** How it ended. */
export interface PortConnectionEnd {
  /** The server's HTTP status, when it answered. */
  status?: number;
  /** Body bytes caller → server, and server → caller (every byte, for a WebSocket). */
  bytesIn: number;
  bytesOut: number;
  /** Why it ended without a whole answer (the server closed, the caller left). */
  error?: string;
  /** The caller went away before the answer was whole. */
  cancelled?: boolean;
}

const SUMMARY_CHARS = 200;
/** A connection open this long is recorded as running (see `PortConnections.open`). */
export const RUNNING_RECORD_MS = 1000;

/**
 * Records every connection the engine proxies to a session's port as one action of the session: type `process`, op
 * `connect`, its input the port, method and path, its output the HTTP status and the bytes each way, its duration
 * the connection's. It goes through the graph and the event stream like any action (`action.started` when the
 * connection opens, `action.completed` when it ends), but not through the action path's gates and queue: it is an
 * observation of traffic that already flows, not something a caller asked the engine to run, and it must not delay
 * the traffic. Its completion carries `reached`, the process or kernel whose tree listens on the port: a `REACHED`
 * edge to that node in the graph.
 */
@Injectable()
export class PortConnections {
  private readonly logger = new Logger('Ports');

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly graph: ContextGraph,
    private readonly events: SessionEvents,
    private readonly sessions: SessionsService,
    private readonly envelopes: ActionEnvelopes,
    private readonly redactor: SecretRedactor,
    private readonly metrics: MetricsService,
  ) {}

  /**
   * Starts the record of a connection (in the background: the traffic never waits for the graph) and answers the
   * function that records its end, once; calling it again does nothing. A connection still open after
   * `RUNNING_RECORD_MS` (an event stream, a WebSocket) is recorded as running then, and completed at its end; a
   * shorter one (most requests) is written once, whole, when it ends: one commit instead of two.
   */
  open(session: Session, c: PortConnectionStart): (end: PortConnectionEnd) => void {
    const id = `act_${randomBytes(12).toString('hex')}`;
    const startedAt = this.clock.now().toISOString();
    const t0 = this.clock.monotonic();
    const path = this.redactor.text(c.path).text;
    const input = {
      op: 'connect',
      port: c.port,
      via: c.via,
      method: c.method,
      path,
      ...(c.websocket && { websocket: true }),
    };
    const start: ActionStart = {
      id,
      sessionId: session.id,
      type: 'process',
      operation: 'connect',
      input,
      inputSummary: clip(`${c.websocket ? 'WebSocket' : c.method} ${path} on port ${c.port}`),
      inputHash: hashInput(input),
      startedAt,
      tier: c.tier,
      risk: NO_RISK,
    };
    this.sessions.touch(session);
    let started: Promise<boolean> | undefined;
    const recordRunning = (): Promise<boolean> =>
      (started ??= this.graph.recordActionStarted(start).then(
        () => {
          this.publishStarted(session, start);
          return true;
        },
        (err: unknown) => {
          this.unrecorded(session, err);
          return false;
        },
      ));
    const timer = setTimeout(() => void recordRunning(), RUNNING_RECORD_MS);
    timer.unref();
    let ended = false;
    return (end) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      this.sessions.touch(session);
      const result = this.result(session, c, start, end, Math.round(this.clock.monotonic() - t0));
      const reached: ReachedRef | undefined =
        c.proc !== null
          ? { kind: 'process', id: c.proc, port: c.port }
          : c.kernel !== null
            ? { kind: 'kernel', id: c.kernel, port: c.port }
            : undefined;
      const completion = this.completion(result, reached);
      if (started) {
        void started.then((recorded) => (recorded ? this.complete(session, result, completion) : undefined));
        return;
      }
      void this.graph.recordActionWhole(start, completion).then(
        () => {
          this.publishStarted(session, start);
          this.published(session, result);
        },
        (err: unknown) => this.unrecorded(session, err),
      );
    };
  }

  private result(
    session: Session,
    c: PortConnectionStart,
    start: ActionStart,
    end: PortConnectionEnd,
    durationMs: number,
  ): ActionResult {
    const status = end.cancelled ? 'cancelled' : end.error !== undefined ? 'failed' : 'succeeded';
    return this.envelopes.envelope(
      {
        id: start.id,
        sessionId: session.id,
        type: 'process',
        startedAt: start.startedAt,
        durationMs,
        ...(c.requestId !== undefined && { requestId: c.requestId }),
      },
      {
        status,
        tier: c.tier,
        risk: NO_RISK,
        files: [],
        output: {
          port: c.port,
          via: c.via,
          method: c.method,
          path: (start.input as { path: string }).path,
          ...(c.websocket && { websocket: true }),
          ...(end.status !== undefined && { status: end.status }),
          bytesIn: end.bytesIn,
          bytesOut: end.bytesOut,
          ...(c.proc !== null && { processId: c.proc }),
          ...(c.kernel !== null && { kernelId: c.kernel }),
          ...(end.error !== undefined && { error: end.error }),
        },
        ...(end.cancelled && {
          error: {
            class: 'cancelled',
            code: 'CANCELLED',
            message: `cancelled: ${end.error ?? 'the caller left'}`,
          },
        }),
      },
    );
  }

  private completion(result: ActionResult, reached: ReachedRef | undefined): ActionCompletion {
    return {
      status: result.status as Exclude<ActionResult['status'], 'running' | 'awaiting_approval'>,
      endedAt: result.endedAt!,
      durationMs: result.durationMs,
      tier: result.tier,
      risk: result.risk,
      ...(result.error && { error: result.error }),
      outputExcerpt: this.envelopes.excerpt(result),
      files: [],
      result,
      ...(reached && { reached }),
    };
  }

  private async complete(
    session: Session,
    result: ActionResult,
    completion: ActionCompletion,
  ): Promise<void> {
    try {
      await this.graph.recordActionCompleted(result.id, completion);
    } catch (err) {
      this.logger.warn({
        msg: 'a proxied connection’s end could not be recorded',
        actionId: result.id,
        err: String(err),
      });
      return;
    }
    this.published(session, result);
  }

  private publishStarted(session: Session, start: ActionStart): void {
    this.events.publish(session.id, 'action.started', {
      actionId: start.id,
      type: 'process',
      operation: start.operation,
      tier: start.tier,
      status: 'running',
    });
  }

  private published(session: Session, result: ActionResult): void {
    this.metrics.actionCompleted(result);
    this.events.publish(session.id, 'action.completed', {
      actionId: result.id,
      status: result.status,
      ...(result.error && { error: result.error }),
      durationMs: result.durationMs,
    });
  }

  private unrecorded(session: Session, err: unknown): void {
    this.logger.warn({
      msg: 'a proxied connection could not be recorded',
      sessionId: session.id,
      err: String(err),
    });
  }
}

const clip = (s: string): string => (s.length > SUMMARY_CHARS ? `${s.slice(0, SUMMARY_CHARS - 1)}…` : s);
