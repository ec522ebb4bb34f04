import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import {
  type ActionResult,
  type ActionType,
  CLOCK,
  type Clock,
  NotFoundError,
  SwitchyardError,
  type Tier,
} from '@switchyard/common';
import { type ApprovalRequest, ContextGraph } from '@switchyard/context-graph';
import { SandboxManager } from '@switchyard/sandbox';
import { ActivePlanLayers } from '../../gates/policies/active-plan-layers';
import type { PolicyLayer } from '../../state/policies/policy.types';
import { randomBytes } from 'node:crypto';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { SessionNetwork } from '../../gates/egress/session-network';
import { SessionEvents } from '../../session/events/session-events';
import { MetricsService } from '../../platform/metrics/metrics.service';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../../session/sessions/sessions.service';
import { ActionCheckpoints, type WorkspacePrepared, type WorkspaceSteps } from './action-checkpoints';
import { ActionGates } from './action-gates';
import type { HookedAction } from '../../gates/hooks/hooked-action';
import { ActionEnvelopes } from './action-envelope';
import {
  ACTION_HANDLERS,
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
} from './action-handler.port';
import { type ActionRequest, plainInput } from '../../state/actions/action-request';
import { ActionScheduler, type SchedulerTicket } from './action-scheduler';
import { hashInput } from './input-hash';
import { ActionAlreadyEndedError, EngineShuttingDownError } from './engine.errors';
import { InFlightActions } from './in-flight-actions';
import { RetryPolicy } from './retry-policy';
import { faultOutcome, isEngineFault } from './fault-outcome';

export interface SubmitOptions {
  /** The action this one retries (a `RETRY_OF` edge). */
  retryOf?: string;
  /** Why it is retried, kept on the `RETRY_OF` edge. */
  retryReason?: string;
  /** The weakest tier a code action may run in (a retry's floor). */
  minTier?: Tier;
  /** The HTTP request that submitted it, echoed in the result and the log line. */
  requestId?: string;
  /** Workspace steps at its turn, before it runs: a restore (a retry with `restore: true`), then a checkpoint. */
  workspace?: WorkspaceSteps;
  /** The policy layer of the plan it is a step of (under the engine's, tenant's and session's). */
  policy?: PolicyLayer;
  /**
   * The action that called it (a skill's `ctx.call`) and the depth of this call: a `CALLED_BY` edge. A call runs
   * inside its caller's turn, so it takes no place in the queues; past SWITCHYARD_SKILL_MAX_DEPTH it is refused.
   */
  calledBy?: { actionId: string; depth: number };
}

/** The place a call inside a running action takes: none, its caller already holds the session's slot. */
const INSIDE_CALLER: SchedulerTicket = { turn: () => Promise.resolve(), release: () => undefined };

/** How an action ended: its envelope, and the input refusal behind a `denied` found only while running. */
export interface ActionCompletion {
  result: ActionResult;
  inputRefusal?: SwitchyardError;
}

export interface SubmittedAction {
  id: string;
  type: ActionType;
  /** Set when a policy rule asks for approval: the action waits for a decision before it runs. */
  approval?: ApprovalRequest;
  /** Settles when the action's completion is recorded; rejects only for a fault of the engine (the graph write). */
  completion: Promise<ActionCompletion>;
}

const SHUTDOWN_GRACE_MS = 5000;
const SUMMARY_CHARS = 200;

const clip = (s: string): string => (s.length > SUMMARY_CHARS ? `${s.slice(0, SUMMARY_CHARS - 1)}…` : s);

/** An action stopped on request keeps what it produced, under status `cancelled`. */
function cancelled(o: Outcome, reason: unknown): Outcome {
  const why = reason instanceof Error ? reason.message : 'cancelled';
  return {
    ...o,
    status: 'cancelled',
    error: { class: 'cancelled', code: 'CANCELLED', message: `cancelled: ${why}` },
    inputRefusal: undefined,
  };
}

/** Every handler releases the session, even when one fails; the first failure is reported after all ran. */
async function releaseAll(sessionId: string, handlers: ActionHandler[]): Promise<void> {
  const results = await Promise.allSettled(handlers.map((h) => h.releaseSession(sessionId)));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * The single path every action takes, whatever its type: its handler prepares it (validate + route, once) → record
 * `running` → run (or record the denial) → record the completion durably → publish events → answer. Single actions,
 * plans, retries and tool calls all come through here, with the session already looked up by their edge.
 */
@Injectable()
export class ExecutionEngine implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('Action');
  private readonly handlers = new Map<ActionType, ActionHandler>();
  private drained?: Promise<void>;

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(ACTION_HANDLERS) handlers: ActionHandler[],
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly scheduler: ActionScheduler,
    private readonly inFlight: InFlightActions,
    private readonly retries: RetryPolicy,
    private readonly envelopes: ActionEnvelopes,
    private readonly events: SessionEvents,
    private readonly redactor: SecretRedactor,
    private readonly metrics: MetricsService,
    private readonly network: SessionNetwork,
    private readonly planLayers: ActivePlanLayers,
    private readonly sandbox: SandboxManager,
    private readonly actionCheckpoints: ActionCheckpoints,
    private readonly gates: ActionGates,
  ) {
    for (const h of handlers) this.handlers.set(h.type, h);
  }

  onModuleInit(): void {
    this.sessions.onSessionEnd(async (sessionId) => {
      await this.inFlight.cancelSession(sessionId, new Error('session ended'));
      this.events.end(sessionId);
      this.sandbox.fenceSession(sessionId);
    });
    // Once the session ended (its actions stopped): each kind frees what it holds for it (containers, browser
    // contexts), in the background.
    this.sessions.onSessionTeardown((sessionId) => releaseAll(sessionId, [...this.handlers.values()]));
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.drain();
  }

  /**
   * Stop taking actions, let running ones finish for a grace period, then cancel them. Idempotent: callers that stop
   * work of their own at shutdown (plans) drain the engine first, whichever shutdown hook runs first.
   */
  drain(): Promise<void> {
    this.drained ??= (async () => {
      const { finished, cancelled } = await this.inFlight.drain(
        SHUTDOWN_GRACE_MS,
        new Error('engine shutting down'),
      );
      // Open event streams would keep the HTTP server from closing.
      const streams = this.events.endAll();
      this.logger.log({
        msg: `shutdown: drained ${finished + cancelled} action(s): ${finished} finished, ${cancelled} cancelled after the ${SHUTDOWN_GRACE_MS / 1000} s grace; ${streams} event stream(s) closed`,
        finished,
        cancelled,
        streams,
      });
    })();
    return this.drained;
  }

  /** True from the moment graceful shutdown begins. */
  get isShuttingDown(): boolean {
    return this.drained !== undefined;
  }

  get busy(): number {
    return this.inFlight.size;
  }

  /**
   * Scores the long code of these requests ahead, a rule per turn of the event loop, so that checking or submitting
   * them next holds the loop no longer than short code does (`SandboxManager.assessAhead`).
   */
  async assessAhead(requests: readonly ActionRequest[]): Promise<void> {
    for (const r of requests) {
      if (r.type === 'code' && typeof r.code === 'string') await this.sandbox.assessAhead(r.language, r.code);
    }
  }

  /** Checks an action as `submit` would (400 for bad input), without recording or running anything. */
  check(session: Session, request: ActionRequest): void {
    this.prepare(session, 'act_check', request, {});
  }

  /**
   * Runs `revised` (or the original input) as a new action linked to `actionId` by `RETRY_OF`. A code retry never
   * runs in a weaker tier than the original; with `escalate`, one that failed on its tier's limits (timeout, out of
   * memory, output cap) runs one tier up. Chains longer than SWITCHYARD_MAX_RETRY_DEPTH are refused (409). With
   * `restore`, the workspace is first put back to the checkpoint taken before the original (or the nearest action
   * of its retry chain that has one): the reflection loop's undo.
   */
  async retry(
    session: Session,
    actionId: string,
    retry: {
      revised?: ActionRequest;
      reason?: string;
      escalate?: boolean;
      requestId?: string;
      restore?: boolean;
      checkpoint?: 'before';
    },
  ): Promise<SubmittedAction> {
    const plan = await this.retries.plan(session, actionId, retry);
    const workspace: WorkspaceSteps = {
      ...(plan.restore !== undefined && { restore: plan.restore }),
      ...(retry.checkpoint !== undefined && { checkpoint: retry.checkpoint }),
    };
    return this.submit(session, plan.request, {
      retryOf: plan.retryOf,
      ...(plan.minTier !== undefined && { minTier: plan.minTier }),
      ...(retry.requestId !== undefined && { requestId: retry.requestId }),
      ...(retry.reason !== undefined && { retryReason: retry.reason }),
      ...(Object.keys(workspace).length > 0 && { workspace }),
    });
  }

  /** Runs an action to its end (see `submit`) and answers its envelope. */
  async run(
    session: Session,
    request: ActionRequest,
    options: SubmitOptions = {},
  ): Promise<ActionCompletion> {
    return (await this.submit(session, request, options)).completion;
  }

  /**
   * Prepares, admits and records the action as `running`, then lets it run in the background: resolves once the
   * record is durable, with the action id and a promise of its completion. Throws before recording anything for bad
   * input (400), a full queue (429) or shutdown (503).
   */
  async submit(
    session: Session,
    request: ActionRequest,
    options: SubmitOptions = {},
  ): Promise<SubmittedAction> {
    if (this.isShuttingDown) {
      throw new EngineShuttingDownError('the engine is shutting down; retry on another instance');
    }
    await this.assessAhead([request]);
    const id = `act_${randomBytes(12).toString('hex')}`;
    const handler = this.handlerFor(request);
    const gated = this.gates.check(
      session,
      request,
      this.prepare(session, id, request, options),
      options.policy,
    );
    const { prepared, approval } = gated;
    const ticket = options.calledBy
      ? INSIDE_CALLER
      : this.scheduler.admit(session.id, session.maxConcurrentActions);
    const input = plainInput(request);
    const summary = this.redactor.text(clip(handler.summary(request))).text;
    const operation = handler.operation(request);
    const startedAtDate = this.clock.now();
    const startedAt = startedAtDate.toISOString();
    const t0 = this.clock.monotonic();

    this.sessions.enter(session);
    const abort = new AbortController();
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    this.inFlight.add(session.id, id, { abort, done });
    // A plan step's layer holds for the connections the session's sandboxes open while it is in flight.
    const leavePlan = options.policy && this.planLayers.enter(session.id, options.policy);
    const end = () => {
      leavePlan?.();
      ticket.release();
      this.inFlight.delete(session.id, id);
      this.sessions.leave(session);
      finish();
    };
    try {
      await this.graph.recordActionStarted({
        id,
        sessionId: session.id,
        type: request.type,
        operation,
        input,
        inputSummary: summary,
        inputHash: hashInput(input),
        startedAt,
        tier: prepared.tier,
        risk: prepared.risk,
        ...(options.retryOf !== undefined && { retryOf: options.retryOf }),
        ...(options.retryReason !== undefined && { retryReason: options.retryReason }),
        ...(approval && { approval }),
        ...(options.calledBy && { calledBy: options.calledBy }),
      });
    } catch (err) {
      end();
      throw err;
    }
    this.events.publish(session.id, 'action.started', {
      actionId: id,
      type: request.type,
      operation,
      tier: prepared.tier,
      status: approval ? 'awaiting_approval' : 'running',
      ...(options.retryOf !== undefined && { retryOf: options.retryOf }),
    });
    const hooked: HookedAction = {
      id,
      sessionId: session.id,
      tenant: session.tenant,
      type: request.type,
      tool: gated.facts.tool,
      operation,
      inputSummary: summary,
      input: this.redactor.value(input).value,
      tier: prepared.tier,
      risk: prepared.risk,
      startedAt,
      ...(options.retryOf !== undefined && { retryOf: options.retryOf }),
      ...(options.calledBy && { calledBy: options.calledBy }),
    };
    this.gates.announce(session, hooked, gated);

    const completion = (async (): Promise<ActionCompletion> => {
      try {
        let workspace: WorkspacePrepared = {};
        // An approval and the before-hooks come before the action queues for its turn: it holds no slot meanwhile.
        const { refusal, annotations } = await this.gates.pass(session, hooked, gated, abort.signal);
        const outcome =
          refusal ??
          (await ticket.turn(abort.signal).then(
            async (): Promise<Outcome> => {
              if (options.workspace) {
                workspace = await this.actionCheckpoints.beforeRun(session, id, options.workspace);
                const { refusal } = workspace;
                if (refusal) return { ...refusal, tier: prepared.tier, risk: prepared.risk, files: [] };
              }
              return this.execute(prepared, abort.signal);
            },
            (): Outcome => ({ status: 'error', tier: prepared.tier, risk: prepared.risk, files: [] }),
          ));
        const final = abort.signal.aborted ? cancelled(outcome, abort.signal.reason) : outcome;
        const durationMs = Math.round(this.clock.monotonic() - t0);
        // Whatever of the session reached for the network while the action ran (its code, or its processes), and what
        // the action itself opened of the session's own ports (its browser's `localhost`).
        const network = await this.network.attempts(session, startedAtDate.getTime());
        const egress = final.egress ? [...(network ?? []), ...final.egress] : network;
        const result = this.envelopes.envelope(
          {
            id,
            sessionId: session.id,
            type: request.type,
            startedAt,
            durationMs,
            requestId: options.requestId,
            ...(egress && { egress }),
            ...(workspace.checkpoint && { checkpoint: workspace.checkpoint }),
            ...(workspace.restored && { restored: workspace.restored }),
            ...(annotations && { annotations }),
          },
          final,
        );
        await this.graph.recordActionCompleted(id, {
          status: final.status,
          endedAt: result.endedAt!,
          durationMs,
          tier: final.tier,
          risk: final.risk,
          // The record's columns come from the envelope it keeps: the exit code as callers see it, the redacted error.
          exitCode: result.exitCode,
          error: result.error,
          outputExcerpt: this.envelopes.excerpt(result),
          files: final.files,
          result,
          sandbox: final.sandbox,
          ...(final.kernel && { kernel: final.kernel }),
          ...(final.startedProcess && { startedProcess: final.startedProcess }),
        });
        this.envelopes.log(result, summary);
        this.metrics.actionCompleted(result);
        this.gates.ended(hooked, gated, result);
        this.events.publish(session.id, 'action.completed', {
          actionId: id,
          status: result.status,
          ...(result.exitCode !== undefined && { exitCode: result.exitCode }),
          ...(result.error && { error: result.error }),
          durationMs,
        });
        return { result, ...(final.inputRefusal && { inputRefusal: final.inputRefusal }) };
      } finally {
        end();
      }
    })();
    return { id, type: request.type, ...(approval && { approval }), completion };
  }

  /**
   * Stops a running (or queued) action and answers with its recorded result. 404 for an action the session never
   * had, 409 for one that already ended.
   */
  async cancel(session: Session, actionId: string): Promise<ActionResult> {
    const entry = this.inFlight.get(session.id, actionId);
    if (entry) {
      entry.abort.abort(new Error('cancel requested'));
      await entry.done;
    }
    const record = await this.graph.getAction(session.id, actionId);
    if (!record)
      throw new NotFoundError(`action ${actionId} not found in session ${session.id}`, { actionId });
    if (!entry) {
      throw new ActionAlreadyEndedError(`action ${actionId} already ended with status ${record.status}`, {
        actionId,
        status: record.status,
      });
    }
    return record.result!;
  }

  private handlerFor(request: ActionRequest): ActionHandler {
    const handler = this.handlers.get(request.type);
    // The edge only builds requests of registered types; a missing handler is a wiring fault.
    if (!handler) throw new Error(`no handler for action type "${request.type}"`);
    return handler;
  }

  /** Validates and routes once, without side effects; throws a 4xx-kind error for bad input. */
  private prepare(
    session: Session,
    actionId: string,
    request: ActionRequest,
    options: SubmitOptions,
  ): PreparedAction {
    const depth = options.calledBy?.depth ?? 0;
    const ctx: ActionContext = {
      session,
      actionId,
      workspaceDir: this.sessions.workspaceOf(session),
      onOutput: (stream, chunk) =>
        this.events.publish(session.id, 'action.output', { actionId, stream, chunk }),
      ...(options.minTier !== undefined && { minTier: options.minTier }),
      depth,
      call: (nested) =>
        this.submit(session, nested, { calledBy: { actionId, depth: depth + 1 }, policy: options.policy }),
    };
    const prepared = this.handlerFor(request).prepare(request, ctx);
    if (depth > this.config.skills.maxDepth && !prepared.denial) {
      return {
        tier: prepared.tier,
        risk: prepared.risk,
        denial: {
          class: 'policy',
          code: 'CALL_DEPTH',
          message:
            `a call ${depth} deep is refused: calls nest at most ${this.config.skills.maxDepth} deep ` +
            '(SWITCHYARD_SKILL_MAX_DEPTH); a skill calling itself without end stops here',
        },
      };
    }
    return prepared;
  }

  /** Records a denial, or runs the action; an unexpected fault becomes an `error` outcome instead of losing the record. */
  private async execute(prepared: PreparedAction, signal: AbortSignal): Promise<Outcome> {
    const { tier, risk } = prepared;
    if (prepared.denial) return { status: 'denied', tier, risk, error: prepared.denial, files: [] };
    try {
      return await prepared.run(signal);
    } catch (err) {
      const entry = {
        msg: 'action failed inside the engine',
        err: err instanceof Error ? err.stack : String(err),
      };
      if (isEngineFault(err)) this.logger.error(entry);
      else this.logger.warn(entry);
      return faultOutcome(err, tier, risk);
    }
  }
}
