import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import {
  type ActionError,
  type ActionResult,
  type ActionTier,
  type ActionType,
  type FileTouch,
  type FinalActionStatus,
  InvalidInputError,
  NO_RISK,
  NotFoundError,
  TIERS,
  type TierRequest,
  type RiskAssessment,
  SwitchyardError,
} from '@switchyard/common';
import { BrowserRouter, requestPaths } from '@switchyard/browser';
import { type ActionRecord, ContextGraph, type SandboxRef } from '@switchyard/context-graph';
import { type CodeRequest, SandboxManager } from '@switchyard/sandbox';
import {
  FileOperations,
  FileOpError,
  PathRejectedError,
  resolveInside,
  WorkspaceManager,
} from '@switchyard/workspace';
import { randomBytes } from 'node:crypto';
import { CLOCK, type Clock, ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import type { Session } from '../sessions/session.model';
import { SessionsService } from '../sessions/sessions.service';
import { hashInput, operationOf, plainInput, summarizeInput } from './action-input';
import type { ActionBody } from './dto/action-body';
import { type BrowserActionDto, toBrowserRequest } from './dto/browser-action.dto';
import type { CodeActionDto } from './dto/code-action.dto';
import { type FileActionDto, toFileOp } from './dto/file-action.dto';
import { SessionEvents } from '../events/session-events';
import { MetricsService } from '../metrics/metrics.service';
import { SecretRedactor } from '../redaction/secret-redactor';
import { ActionScheduler } from './action-scheduler';
import { ActionAlreadyEndedError, EngineShuttingDownError, RetryRefusedError } from './engine.errors';
import { parseActionBody } from './dto/action-body';

/** How an action ended, before it is wrapped in the result envelope. */
interface Outcome {
  status: FinalActionStatus;
  tier: ActionTier;
  risk: RiskAssessment;
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  output?: unknown;
  truncated?: ActionResult['truncated'];
  error?: ActionError;
  files: FileTouch[];
  /** The tier replaced secrets in stdout/stderr. */
  redacted?: boolean;
  /** The container the code ran in, for the graph's `RAN_IN` edge. */
  sandbox?: SandboxRef;
  /** Re-thrown after the action is recorded (a refusal the HTTP caller must see as 4xx). */
  rethrow?: SwitchyardError;
}

/** An action checked and routed, ready to record and run. */
interface PreparedAction {
  tier: ActionTier;
  risk: RiskAssessment;
  run(signal: AbortSignal): Promise<Outcome>;
}

interface InFlightAction {
  abort: AbortController;
  done: Promise<unknown>;
}

type OutputListener = (stream: 'stdout' | 'stderr', chunk: string) => void;

export interface SubmitOptions {
  /** The action this one retries (a `RETRY_OF` edge). */
  retryOf?: string;
  /** Why it is retried, kept on the `RETRY_OF` edge. */
  retryReason?: string;
  /** The HTTP request that submitted it, echoed in the result and the log line. */
  requestId?: string;
}

export interface SubmittedAction {
  id: string;
  type: ActionType;
  /** Settles when the action's completion is recorded; rejects only with a refusal the caller must see as 4xx. */
  result: Promise<ActionResult>;
}

/** An action stopped on request keeps what it produced, under status `cancelled`. */
function cancelled(o: Outcome, reason: unknown): Outcome {
  const why = reason instanceof Error ? reason.message : 'cancelled';
  return {
    ...o,
    status: 'cancelled',
    error: { class: 'cancelled', code: 'CANCELLED', message: `cancelled: ${why}` },
    rethrow: undefined,
  };
}

const EXCERPT_CHARS = 2048;
const SHUTDOWN_GRACE_MS = 5000;

/**
 * The single path every action takes: validate → route → record `running` → execute → record the
 * completion durably → answer. Plans, retries and tool calls all come through here.
 */
@Injectable()
export class ExecutionEngine implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('Action');
  private readonly inFlight = new Map<
    string,
    Map<string, { abort: AbortController; done: Promise<unknown> }>
  >();
  private shuttingDown = false;

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly sandbox: SandboxManager,
    private readonly files: FileOperations,
    private readonly workspaces: WorkspaceManager,
    private readonly browser: BrowserRouter,
    private readonly scheduler: ActionScheduler,
    private readonly events: SessionEvents,
    private readonly redactor: SecretRedactor,
    private readonly metrics: MetricsService,
  ) {}

  onModuleInit(): void {
    this.sessions.onSessionEnd(async (sessionId) => {
      await this.cancelSession(sessionId);
      this.events.end(sessionId);
      // After its actions stopped: close the session's browser context (or dedicated browser).
      await this.browser.releaseSession(sessionId);
    });
  }

  /** Stop taking actions, let running ones finish for a grace period, then cancel them. */
  async beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    await this.drain();
    // Open event streams would keep the HTTP server from closing.
    this.events.endAll();
  }

  private async drain(): Promise<void> {
    const all = [...this.inFlight.values()].flatMap((m) => [...m.values()]);
    if (all.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise((resolve) => (timer = setTimeout(resolve, SHUTDOWN_GRACE_MS)));
    await Promise.race([Promise.allSettled(all.map((a) => a.done)), grace]);
    clearTimeout(timer);
    for (const a of all) a.abort.abort(new Error('engine shutting down'));
    await Promise.allSettled(all.map((a) => a.done));
  }

  /** True from the moment graceful shutdown begins. */
  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  get busy(): number {
    let n = 0;
    for (const m of this.inFlight.values()) n += m.size;
    return n;
  }

  /**
   * Runs `revised` (or the original input) as a new action linked to `actionId` by `RETRY_OF`. A code retry never
   * runs in a weaker tier than the original; with `escalate`, one that failed on its tier's limits (timeout, out of
   * memory, output cap) runs one tier up. Chains longer than SWITCHYARD_MAX_RETRY_DEPTH are refused (409).
   */
  async retry(
    tenant: string,
    sessionId: string,
    actionId: string,
    request: { action?: unknown; reason?: string; escalate?: boolean; requestId?: string },
  ): Promise<SubmittedAction> {
    this.sessions.get(tenant, sessionId);
    const original = await this.graph.getAction(sessionId, actionId);
    if (!original)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    const max = this.config.actions.maxRetryDepth;
    if (original.status === 'running') {
      throw new RetryRefusedError(`action ${actionId} is still running; cancel it or wait for it to end`, {
        actionId,
      });
    }
    // Hops from the original back to the first action of its chain; the retry adds one.
    let hops = 0;
    for (let id = original.retryOf; id !== undefined && hops < max; hops++) {
      id = (await this.graph.getAction(sessionId, id))?.retryOf;
    }
    if (hops + 1 > max) {
      throw new RetryRefusedError(
        `action ${actionId} is already retry ${hops} of its chain; SWITCHYARD_MAX_RETRY_DEPTH allows ${max}`,
        { actionId, depth: hops },
      );
    }
    const body = parseActionBody(request.action ?? original.input);
    if (body.type === 'code') body.tier = this.retryTier(original, body, request.escalate ?? false);
    else if (request.escalate) {
      throw new InvalidInputError('escalate', 'only code actions run in tiers that can be escalated');
    }
    return this.submit(tenant, sessionId, body, {
      retryOf: actionId,
      ...(request.requestId !== undefined && { requestId: request.requestId }),
      ...(request.reason !== undefined && { retryReason: request.reason }),
    });
  }

  /** The tier a code retry asks for: at least the original's (one up when escalating), never below the policy's. */
  private retryTier(original: ActionRecord, body: CodeActionDto, escalate: boolean): TierRequest {
    const ranked = (t: string): number => (TIERS as readonly string[]).indexOf(t);
    let floor = ranked(original.tier); // -1 when the original never reached a sandbox tier
    if (escalate) {
      const limited = original.error?.class === 'timeout' || original.error?.class === 'limit';
      if (!limited) {
        throw new InvalidInputError(
          'escalate',
          `escalation is for actions that failed on their tier's limits (timeout, out of memory, output cap); ` +
            `${original.id} ended ${original.status}${original.error ? ` (${original.error.class})` : ''}`,
        );
      }
      if (floor < 0 || floor === TIERS.length - 1) {
        throw new RetryRefusedError(
          `action ${original.id} ran in "${original.tier}", there is no stronger tier`,
          {
            actionId: original.id,
          },
        );
      }
      floor += 1;
    }
    const requested = body.tier ?? 'auto';
    if (floor < 0 || (requested !== 'auto' && ranked(requested) >= floor)) return requested;
    // Ask for the floor unless the policy already routes this code higher.
    const routed = this.sandbox.route(this.codeRequestProbe(body)).tier;
    return routed !== undefined && ranked(routed) > floor ? routed : TIERS[floor];
  }

  private codeRequestProbe(body: CodeActionDto): CodeRequest {
    return {
      actionId: 'act_probe',
      sessionId: 'probe',
      language: body.language,
      code: body.code,
      tier: 'auto',
      workspaceDir: '/',
    };
  }

  /** Checks an action as `submit` would (400 for bad input), without recording or running anything. */
  check(tenant: string, sessionId: string, body: ActionBody): void {
    const session = this.sessions.get(tenant, sessionId);
    this.prepare(session, 'act_check', this.sessions.workspaceOf(session), body);
  }

  /** Runs an action to its end (see `submit`). Rejects with the 4xx error of a refusal found while running. */
  async run(
    tenant: string,
    sessionId: string,
    body: ActionBody,
    options: SubmitOptions = {},
  ): Promise<ActionResult> {
    return (await this.submit(tenant, sessionId, body, options)).result;
  }

  /**
   * Validates, admits and records the action as `running`, then lets it run in the background: resolves once the
   * record is durable, with the action id and a promise of its result. Throws before recording anything for bad
   * input (400), an unknown session (404), a full queue (429) or shutdown (503).
   */
  async submit(
    tenant: string,
    sessionId: string,
    body: ActionBody,
    options: SubmitOptions = {},
  ): Promise<SubmittedAction> {
    if (this.shuttingDown)
      throw new EngineShuttingDownError('the engine is shutting down; retry on another instance');
    const session = this.sessions.get(tenant, sessionId);
    const id = `act_${randomBytes(12).toString('hex')}`;
    const workspaceDir = this.sessions.workspaceOf(session);
    const prepared = this.prepare(session, id, workspaceDir, body, (stream, chunk) =>
      this.events.publish(session.id, 'action.output', { actionId: id, stream, chunk }),
    );
    const ticket = this.scheduler.admit(session.id, session.maxConcurrentActions);
    const input = plainInput(body);
    const summary = this.redactor.text(summarizeInput(body)).text;
    const startedAt = this.clock.now().toISOString();
    const t0 = performance.now();

    this.sessions.enter(session);
    const abort = new AbortController();
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    this.track(session.id, id, { abort, done });
    const end = () => {
      ticket.release();
      this.untrack(session.id, id);
      this.sessions.leave(session);
      finish();
    };
    try {
      await this.graph.recordActionStarted({
        id,
        sessionId: session.id,
        type: body.type,
        operation: operationOf(body),
        input,
        inputSummary: summary,
        inputHash: hashInput(input),
        startedAt,
        tier: prepared.tier,
        risk: prepared.risk,
        ...(options.retryOf !== undefined && { retryOf: options.retryOf }),
        ...(options.retryReason !== undefined && { retryReason: options.retryReason }),
      });
    } catch (err) {
      end();
      throw err;
    }
    this.events.publish(session.id, 'action.started', {
      actionId: id,
      type: body.type,
      operation: operationOf(body),
      tier: prepared.tier,
      ...(options.retryOf !== undefined && { retryOf: options.retryOf }),
    });

    const result = (async (): Promise<ActionResult> => {
      try {
        const outcome = await ticket.turn(abort.signal).then(
          () => this.execute(prepared, abort.signal),
          (): Outcome => ({ status: 'error', tier: prepared.tier, risk: prepared.risk, files: [] }),
        );
        const final = abort.signal.aborted ? cancelled(outcome, abort.signal.reason) : outcome;
        const durationMs = Math.round(performance.now() - t0);
        const envelope = this.envelope(id, session.id, body, final, startedAt, durationMs);
        if (options.requestId !== undefined) envelope.requestId = options.requestId;
        await this.graph.recordActionCompleted(id, {
          status: final.status,
          endedAt: envelope.endedAt!,
          durationMs,
          tier: final.tier,
          risk: final.risk,
          exitCode: final.exitCode,
          error: envelope.error,
          outputExcerpt: this.excerpt({ ...final, output: envelope.output, error: envelope.error }),
          files: final.files,
          result: envelope,
          sandbox: final.sandbox,
        });
        this.logAction(envelope, summary);
        this.metrics.actionCompleted(envelope);
        this.events.publish(session.id, 'action.completed', {
          actionId: id,
          status: envelope.status,
          ...(envelope.exitCode !== undefined && { exitCode: envelope.exitCode }),
          ...(envelope.error && { error: envelope.error }),
          durationMs,
        });
        if (final.rethrow) throw final.rethrow;
        return envelope;
      } finally {
        end();
      }
    })();
    return { id, type: body.type, result };
  }

  /**
   * Stops a running (or queued) action and answers with its recorded result. 404 for an action the session never
   * had, 409 for one that already ended.
   */
  async cancel(tenant: string, sessionId: string, actionId: string): Promise<ActionResult> {
    this.sessions.get(tenant, sessionId);
    const entry = this.inFlight.get(sessionId)?.get(actionId);
    if (entry) {
      entry.abort.abort(new Error('cancel requested'));
      await entry.done;
    }
    const record = await this.graph.getAction(sessionId, actionId);
    if (!record)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    if (!entry) {
      throw new ActionAlreadyEndedError(`action ${actionId} already ended with status ${record.status}`, {
        actionId,
        status: record.status,
      });
    }
    return record.result!;
  }

  /** Validates and routes without side effects; throws a 4xx-kind error for bad input. */
  private prepare(
    session: Session,
    actionId: string,
    workspaceDir: string,
    body: ActionBody,
    onOutput?: OutputListener,
  ): PreparedAction {
    switch (body.type) {
      case 'code':
        return this.prepareCode(session, actionId, workspaceDir, body, onOutput);
      case 'file':
        return this.prepareFile(session, workspaceDir, body);
      case 'browser':
        return this.prepareBrowser(session, workspaceDir, body);
    }
  }

  private prepareCode(
    session: Session,
    actionId: string,
    workspaceDir: string,
    body: CodeActionDto,
    onOutput?: OutputListener,
  ): PreparedAction {
    const req: CodeRequest = {
      actionId,
      sessionId: session.id,
      language: body.language,
      code: body.code,
      stdin: body.stdin,
      timeoutMs: body.timeoutMs,
      env: body.env,
      tier: body.tier ?? 'auto',
      workspaceDir,
    };
    this.sandbox.validate(req);
    const decision = this.sandbox.route(req);
    const tier: ActionTier = decision.tier ?? 'none';
    return {
      tier,
      risk: decision.risk,
      run: async (signal) => {
        if (decision.denial)
          return { status: 'denied', tier, risk: decision.risk, error: decision.denial, files: [] };
        const before = await this.workspaces.snapshot(session.id);
        const out = await this.sandbox.execute(req, signal, { onOutput });
        const after = await this.workspaces.snapshot(session.id);
        return {
          status: out.status,
          tier: out.tier ?? tier,
          risk: out.risk,
          exitCode: out.exitCode,
          redacted: out.redacted,
          stdout: out.stdout,
          stderr: out.stderr,
          truncated: out.truncated,
          error: out.error,
          sandbox:
            out.containerId !== undefined && (out.tier === 'pooled' || out.tier === 'container')
              ? { tier: out.tier, containerId: out.containerId }
              : undefined,
          files: this.workspaces
            .changedPaths(before, after)
            .map((path) => ({ path, access: 'write' as const })),
        };
      },
    };
  }

  private prepareFile(session: Session, workspaceDir: string, body: FileActionDto): PreparedAction {
    const op = toFileOp(body);
    // Lexical checks first, so traversal attempts are refused before anything is recorded.
    const optionalPath = op.op === 'list' || op.op === 'find' || op.op === 'grep';
    if (op.path !== undefined) resolveInside(workspaceDir, op.path, 'path', { allowEmpty: optionalPath });
    if (op.op === 'move') resolveInside(workspaceDir, op.to, 'to');
    return {
      tier: 'engine',
      risk: NO_RISK,
      run: async () => {
        try {
          const { output, touched } = await this.files.execute(workspaceDir, op);
          return { status: 'succeeded', tier: 'engine', risk: NO_RISK, output, files: touched };
        } catch (err) {
          if (err instanceof FileOpError) {
            const error: ActionError = { class: err.errorClass, code: err.code, message: err.message };
            return { status: 'failed', tier: 'engine', risk: NO_RISK, error, files: [] };
          }
          if (err instanceof PathRejectedError) {
            // Found only at execution (a symlink leading out): recorded as a refusal, answered as 400.
            const error: ActionError = { class: 'policy', code: err.code, message: err.message };
            return { status: 'denied', tier: 'engine', risk: NO_RISK, error, files: [], rethrow: err };
          }
          throw err;
        }
      },
    };
  }

  private prepareBrowser(session: Session, workspaceDir: string, body: BrowserActionDto): PreparedAction {
    const request = toBrowserRequest(body);
    // Lexical checks first, like file actions: traversal is a 400 and nothing is recorded.
    for (const p of requestPaths(request)) resolveInside(workspaceDir, p.path, p.field, { rejectRoot: true });
    // Refusals that need no DNS (scheme, address literals, evaluate off or critical) are recorded as denied.
    const { risk, denial } = this.browser.precheck(request);
    return {
      tier: 'browser',
      risk,
      run: async (signal) => {
        if (denial) return { status: 'denied', tier: 'browser', risk, error: denial, files: [] };
        try {
          const out = await this.browser.execute({ sessionId: session.id, workspaceDir, request }, signal);
          return { ...out, tier: 'browser', risk };
        } catch (err) {
          if (err instanceof PathRejectedError) {
            // A symlink out of the workspace found at execution: recorded as a refusal, answered as 400.
            const error: ActionError = { class: 'policy', code: err.code, message: err.message };
            return { status: 'denied', tier: 'browser', risk, error, files: [], rethrow: err };
          }
          throw err;
        }
      },
    };
  }

  /** Runs the action; an unexpected fault becomes an `error` outcome instead of losing the record. */
  private async execute(prepared: PreparedAction, signal: AbortSignal): Promise<Outcome> {
    try {
      return await prepared.run(signal);
    } catch (err) {
      this.logger.error({
        msg: 'action failed inside the engine',
        err: err instanceof Error ? err.stack : String(err),
      });
      const message =
        err instanceof SwitchyardError ? err.message : 'internal error while running the action';
      return {
        status: 'error',
        tier: prepared.tier,
        risk: prepared.risk,
        error: { class: 'internal', message },
        files: [],
      };
    }
  }

  private envelope(
    id: string,
    sessionId: string,
    body: ActionBody,
    o: Outcome,
    startedAt: string,
    durationMs: number,
  ): ActionResult {
    // Code output was redacted by the tier as it streamed (before its caps); everything else is redacted here.
    const output = o.output === undefined ? undefined : this.redactor.value(o.output);
    const error = o.error && this.redactor.value(o.error);
    const redacted = Boolean(o.redacted || output?.redacted || error?.redacted);
    return {
      id,
      sessionId,
      type: body.type,
      status: o.status,
      ...(o.exitCode !== undefined && { exitCode: o.exitCode }),
      ...(o.stdout !== undefined && { stdout: o.stdout }),
      ...(o.stderr !== undefined && { stderr: o.stderr }),
      ...(output !== undefined && { output: output.value }),
      truncated: o.truncated ?? { stdout: false, stderr: false },
      durationMs,
      startedAt,
      endedAt: this.clock.now().toISOString(),
      tier: o.tier,
      risk: o.risk,
      ...(error && { error: error.value }),
      ...(redacted && { redacted: true }),
    };
  }

  private excerpt(o: Outcome): string {
    if (o.stdout !== undefined || o.stderr !== undefined) {
      const out = (o.stdout ?? '').slice(0, EXCERPT_CHARS);
      const err = (o.stderr ?? '').slice(-EXCERPT_CHARS);
      return err ? `${out}\n[stderr]\n${err}` : out;
    }
    if (o.output !== undefined) return JSON.stringify(o.output).slice(0, EXCERPT_CHARS);
    return o.error?.message ?? '';
  }

  private logAction(r: ActionResult, summary: string): void {
    this.logger.log({
      msg: 'action',
      sessionId: r.sessionId,
      actionId: r.id,
      type: r.type,
      tier: r.tier,
      risk: r.risk.level,
      riskScore: r.risk.score,
      command: summary,
      durationMs: r.durationMs,
      exitCode: r.exitCode,
      outputBytes: Buffer.byteLength(r.stdout ?? '') + Buffer.byteLength(r.stderr ?? ''),
      status: r.status,
      errorClass: r.error?.class,
      requestId: r.requestId,
    });
  }

  private track(sessionId: string, actionId: string, entry: InFlightAction): void {
    let m = this.inFlight.get(sessionId);
    if (!m) {
      m = new Map<string, InFlightAction>();
      this.inFlight.set(sessionId, m);
    }
    m.set(actionId, entry);
  }

  private untrack(sessionId: string, actionId: string): void {
    const m = this.inFlight.get(sessionId);
    m?.delete(actionId);
    if (m?.size === 0) this.inFlight.delete(sessionId);
  }

  /** Cancels a session's running actions and waits until each has been recorded. */
  private async cancelSession(sessionId: string): Promise<void> {
    const m = this.inFlight.get(sessionId);
    if (!m) return;
    const entries = [...m.values()];
    for (const e of entries) e.abort.abort(new Error('session ended'));
    await Promise.allSettled(entries.map((e) => e.done));
  }
}
