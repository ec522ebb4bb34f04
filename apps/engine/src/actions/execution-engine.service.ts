import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import {
  type ActionError,
  type ActionResult,
  type ActionTier,
  type FileTouch,
  type FinalActionStatus,
  NO_RISK,
  type RiskAssessment,
  SwitchyardError,
} from '@switchyard/common';
import { BrowserRouter } from '@switchyard/browser';
import { ContextGraph } from '@switchyard/context-graph';
import { type CodeRequest, SandboxManager } from '@switchyard/sandbox';
import {
  FileOperations,
  FileOpError,
  PathRejectedError,
  resolveInside,
  WorkspaceManager,
} from '@switchyard/workspace';
import { randomBytes } from 'node:crypto';
import { CLOCK, type Clock } from '../config/config.tokens';
import type { Session } from '../sessions/session.model';
import { SessionsService } from '../sessions/sessions.service';
import { hashInput, operationOf, plainInput, summarizeInput } from './action-input';
import type { ActionBody } from './dto/action-body';
import type { BrowserActionDto } from './dto/browser-action.dto';
import type { CodeActionDto } from './dto/code-action.dto';
import { type FileActionDto, toFileOp } from './dto/file-action.dto';
import { EngineShuttingDownError } from './engine.errors';

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
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly sandbox: SandboxManager,
    private readonly files: FileOperations,
    private readonly workspaces: WorkspaceManager,
    private readonly browser: BrowserRouter,
  ) {}

  onModuleInit(): void {
    this.sessions.onSessionEnd((sessionId) => this.cancelSession(sessionId));
  }

  /** Stop taking actions, let running ones finish for a grace period, then cancel them. */
  async beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    const all = [...this.inFlight.values()].flatMap((m) => [...m.values()]);
    if (all.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise((resolve) => (timer = setTimeout(resolve, SHUTDOWN_GRACE_MS)));
    await Promise.race([Promise.allSettled(all.map((a) => a.done)), grace]);
    clearTimeout(timer);
    for (const a of all) a.abort.abort(new Error('engine shutting down'));
    await Promise.allSettled(all.map((a) => a.done));
  }

  get busy(): number {
    let n = 0;
    for (const m of this.inFlight.values()) n += m.size;
    return n;
  }

  async run(tenant: string, sessionId: string, body: ActionBody): Promise<ActionResult> {
    if (this.shuttingDown)
      throw new EngineShuttingDownError('the engine is shutting down; retry on another instance');
    const session = this.sessions.get(tenant, sessionId);
    const id = `act_${randomBytes(12).toString('hex')}`;
    const workspaceDir = this.sessions.workspaceOf(session);
    const prepared = this.prepare(session, id, workspaceDir, body);
    const input = plainInput(body);
    const started = this.clock.now();
    const startedAt = started.toISOString();
    const t0 = performance.now();

    this.sessions.enter(session);
    const abort = new AbortController();
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    this.track(session.id, id, { abort, done });
    try {
      await this.graph.recordActionStarted({
        id,
        sessionId: session.id,
        type: body.type,
        operation: operationOf(body),
        input,
        inputSummary: summarizeInput(body),
        inputHash: hashInput(input),
        startedAt,
        tier: prepared.tier,
        risk: prepared.risk,
      });
      const outcome = await this.execute(prepared, abort.signal);
      const durationMs = Math.round(performance.now() - t0);
      const result = this.envelope(id, session.id, body, outcome, startedAt, durationMs);
      await this.graph.recordActionCompleted(id, {
        status: outcome.status,
        endedAt: result.endedAt!,
        durationMs,
        tier: outcome.tier,
        risk: outcome.risk,
        exitCode: outcome.exitCode,
        error: outcome.error,
        outputExcerpt: this.excerpt(outcome),
        files: outcome.files,
        result,
      });
      this.logAction(result, summarizeInput(body));
      if (outcome.rethrow) throw outcome.rethrow;
      return result;
    } finally {
      this.untrack(session.id, id);
      this.sessions.leave(session);
      finish();
    }
  }

  /** Validates and routes without side effects; throws a 4xx-kind error for bad input. */
  private prepare(
    session: Session,
    actionId: string,
    workspaceDir: string,
    body: ActionBody,
  ): PreparedAction {
    switch (body.type) {
      case 'code':
        return this.prepareCode(session, actionId, workspaceDir, body);
      case 'file':
        return this.prepareFile(session, workspaceDir, body);
      case 'browser':
        return this.prepareBrowser(body);
    }
  }

  private prepareCode(
    session: Session,
    actionId: string,
    workspaceDir: string,
    body: CodeActionDto,
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
        const out = await this.sandbox.execute(req, signal);
        const after = await this.workspaces.snapshot(session.id);
        return {
          status: out.status,
          tier: out.tier ?? tier,
          risk: out.risk,
          exitCode: out.exitCode,
          stdout: out.stdout,
          stderr: out.stderr,
          truncated: out.truncated,
          error: out.error,
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

  private prepareBrowser(_body: BrowserActionDto): PreparedAction {
    return {
      tier: 'browser',
      risk: NO_RISK,
      run: async () => {
        const availability = await this.browser.availability();
        const error: ActionError = {
          class: 'policy',
          code: 'TIER_UNAVAILABLE',
          message: `browser tier not enabled: ${availability.reason ?? 'unavailable'}`,
        };
        return { status: 'denied', tier: 'browser', risk: NO_RISK, error, files: [] };
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
    return {
      id,
      sessionId,
      type: body.type,
      status: o.status,
      ...(o.exitCode !== undefined && { exitCode: o.exitCode }),
      ...(o.stdout !== undefined && { stdout: o.stdout }),
      ...(o.stderr !== undefined && { stderr: o.stderr }),
      ...(o.output !== undefined && { output: o.output }),
      truncated: o.truncated ?? { stdout: false, stderr: false },
      durationMs,
      startedAt,
      endedAt: this.clock.now().toISOString(),
      tier: o.tier,
      risk: o.risk,
      ...(o.error && { error: o.error }),
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
