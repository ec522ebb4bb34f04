import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnModuleInit,
} from '@nestjs/common';
import { type ActionResult, CLOCK, type Clock, NotFoundError, SwitchyardError } from '@switchyard/common';
import { ContextGraph } from '@switchyard/context-graph';
import { randomBytes } from 'node:crypto';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ActionQueueFullError } from '../actions/action-scheduler';
import { ExecutionEngine, type SubmittedAction } from '../actions/execution-engine.service';
import { SessionCheckpoints } from '../../session/checkpoints/session-checkpoints';
import { SessionEvents } from '../../session/events/session-events';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../../session/sessions/sessions.service';
import { stepFailureContext } from './plan-failure-context';
import { PlanRecorder } from './plan-recorder';
import {
  blockingStep,
  isReady,
  retryBackoffMs,
  skipUnreachable,
  sleep,
  workspaceSteps,
} from './plan-scheduling';
import { cancelSteps, checkpointBefore, mergeReplanSteps, toPlanStep } from './plan-steps';
import { validateReplan, validateSteps } from './plan-validation';
import {
  FINAL_STEP,
  type Plan,
  type PlanSpec,
  type PlanStep,
  type PlanStepSpec,
} from '../../state/plans/plan.model';
import { PlanStore } from '../../state/plans/plan.store';

/** A replan or cancel of a plan in a state that does not allow it. */
export class PlanStateError extends SwitchyardError {
  readonly code = 'PLAN_STATE';
  readonly kind = 'conflict' as const;
}

interface PlanRun {
  plan: Plan;
  /** Aborts every running step's action and backoff. */
  abort: AbortController;
  running: Set<string>;
  /** Set once a cancel or shutdown began: nothing new starts. */
  stopping?: string;
  /** Resolved each time the plan stops moving (ended or needs a replan). */
  settled: Array<() => void>;
}

const QUEUE_FULL_PAUSE_MS = 250;

/**
 * Runs plans: DAGs of actions submitted through the same `ExecutionEngine` path as single actions. Independent
 * steps run up to `maxParallel` at once (and within the session's own `maxConcurrentActions`). A step that fails
 * after its retries stops new scheduling unless it `allowFailure`; the plan then waits in `needs_replan` for a
 * replan (which replaces not-yet-succeeded steps and adds new ones) or a cancel.
 */
@Injectable()
export class PlanExecutor implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('Plan');
  private readonly runs = new Map<string, PlanRun>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly engine: ExecutionEngine,
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly events: SessionEvents,
    private readonly store: PlanStore,
    private readonly recorder: PlanRecorder,
    private readonly redactor: SecretRedactor,
    private readonly checkpoints: SessionCheckpoints,
  ) {}

  async onModuleInit(): Promise<void> {
    // With replicas, the plans left running are those of a replica that died, ended when its sessions are taken over.
    if (this.config.state.store === 'sqlite') await this.interruptLeftRunning();
    this.sessions.onSessionEnd(async (sessionId) => {
      const runs = [...this.runs.values()].filter((r) => r.plan.sessionId === sessionId);
      await Promise.all(runs.map((r) => this.stop(r, 'session ended')));
    });
  }

  /**
   * Ends as `interrupted` the plans stored as running that no one runs here: all of them (after a stop), or those of
   * `sessionIds` (the sessions of a replica that died). Their running steps are cancelled. Returns how many.
   */
  async interruptLeftRunning(sessionIds?: readonly string[]): Promise<number> {
    const left = (await this.store.running(sessionIds)).filter((p) => !this.runs.has(p.id));
    for (const plan of left) {
      cancelSteps(plan, 'running', 'engine stopped');
      this.finish(plan, 'interrupted');
    }
    await Promise.all(left.map((p) => this.recorder.flushed(p.id)));
    return left.length;
  }

  async beforeApplicationShutdown(): Promise<void> {
    // Running steps get the engine's grace period like any action, before the plans stop.
    await this.engine.drain();
    await Promise.all([...this.runs.values()].map((r) => this.stop(r, 'engine shutting down')));
    // The graph closes after this hook: let the last snapshots land first.
    await this.recorder.flushAll();
  }

  /**
   * Validates the whole plan (400 naming the steps at fault, nothing runs), stores it (a plan that cannot be stored
   * never starts) and starts it.
   */
  async create(session: Session, spec: PlanSpec): Promise<Plan> {
    await this.engine.assessAhead(spec.steps.map((s) => s.action));
    validateSteps(this.engine, session, spec.steps, new Set());
    const now = this.now();
    const plan: Plan = {
      id: `plan_${randomBytes(12).toString('hex')}`,
      sessionId: session.id,
      tenant: session.tenant,
      ...(spec.goal !== undefined && { goal: spec.goal }),
      status: 'running',
      maxParallel: spec.maxParallel ?? 1,
      checkpoints: spec.checkpoints ?? 'none',
      ...(spec.policy && { policy: spec.policy }),
      createdAt: now,
      updatedAt: now,
      steps: spec.steps.map((s) => toPlanStep(s, 1, spec.checkpoints)),
    };
    await this.recorder.save(plan);
    const run: PlanRun = { plan, abort: new AbortController(), running: new Set(), settled: [] };
    this.runs.set(plan.id, run);
    this.events.publish(session.id, 'plan.started', { planId: plan.id, steps: plan.steps.map((s) => s.id) });
    this.pump(run);
    return plan;
  }

  async get(session: Session, planId: string): Promise<Plan> {
    const plan = this.runs.get(planId)?.plan ?? (await this.store.get(planId));
    if (!plan || plan.sessionId !== session.id) {
      throw new NotFoundError(`plan ${planId} not found in session ${session.id}`, { planId });
    }
    return plan;
  }

  async list(session: Session): Promise<Plan[]> {
    return (await this.store.listBySession(session.id)).map((p) => this.runs.get(p.id)?.plan ?? p);
  }

  /**
   * Adds steps, or replaces steps that have not succeeded (same id; the new version starts afresh), then resumes.
   * Allowed while the plan runs or needs a replan.
   */
  async replan(
    session: Session,
    planId: string,
    steps: PlanStepSpec[],
    options: { restoreTo?: string } = {},
  ): Promise<Plan> {
    // Before the plan is looked at: nothing awaits between its state being checked and the steps going in.
    await this.engine.assessAhead(steps.map((s) => s.action));
    const plan = await this.get(session, planId);
    const run = this.runs.get(planId);
    if (!run || (plan.status !== 'running' && plan.status !== 'needs_replan')) {
      throw new PlanStateError(
        `plan ${planId} is ${plan.status}; only a running plan or one that needs a replan can be replanned`,
        { planId, status: plan.status },
      );
    }
    validateReplan(this.engine, session, plan, steps);
    // Before anything changes: a restore that cannot be made leaves the plan as it was.
    if (options.restoreTo !== undefined) {
      const checkpointId = checkpointBefore(plan, options.restoreTo);
      await this.checkpoints.restore(session, checkpointId, { planId });
    }
    mergeReplanSteps(plan, steps);
    delete plan.failedStep;
    delete plan.failureContext;
    plan.status = 'running';
    this.touch(plan);
    this.pump(run);
    return plan;
  }

  /** Stops the plan: running steps' actions are cancelled, pending steps never start. */
  async cancel(session: Session, planId: string): Promise<Plan> {
    const plan = await this.get(session, planId);
    const run = this.runs.get(planId);
    if (!run || plan.status === 'succeeded' || plan.status === 'cancelled' || plan.status === 'interrupted') {
      throw new PlanStateError(`plan ${planId} already ended (${plan.status})`, {
        planId,
        status: plan.status,
      });
    }
    await this.stop(run, 'cancel requested');
    return plan;
  }

  /** Resolves when the plan ends or needs a replan, or after `timeoutMs`. */
  async settle(plan: Plan, timeoutMs: number): Promise<void> {
    const run = this.runs.get(plan.id);
    if (run && plan.status === 'running') {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => run.settled.push(resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
    }
    // The caller reads the graph next: the snapshot it was answered with is recorded there first.
    await this.recorder.flushed(plan.id);
  }

  private async stop(run: PlanRun, reason: string): Promise<void> {
    if (run.stopping) {
      while (this.runs.has(run.plan.id)) await new Promise<void>((resolve) => run.settled.push(resolve));
      return;
    }
    run.stopping = reason;
    run.abort.abort(new Error(reason));
    const { plan } = run;
    cancelSteps(plan, 'pending', reason);
    // Running steps end through their own path once their actions are cancelled.
    while (run.running.size > 0) await new Promise<void>((resolve) => run.settled.push(resolve));
    this.finish(plan, 'cancelled');
    this.runs.delete(plan.id);
    this.wake(run);
  }

  /** Moves the plan forward: skips what can never run, starts what is ready, settles when nothing can move. */
  private pump(run: PlanRun): void {
    const { plan } = run;
    if (plan.status !== 'running' || run.stopping) return;
    const byId = new Map(plan.steps.map((s) => [s.id, s]));
    // A failure that the step does not allow blocks new work until a replan.
    const blocking = blockingStep(plan);

    skipUnreachable(
      plan,
      byId,
      () => this.now(),
      (step) =>
        this.events.publish(plan.sessionId, 'plan.step.completed', {
          planId: plan.id,
          stepId: step.id,
          status: 'skipped',
          reason: step.reason,
        }),
    );

    if (!blocking) {
      for (const step of plan.steps) {
        if (run.running.size >= plan.maxParallel) break;
        if (isReady(step, byId)) this.start(run, step);
      }
    }

    if (run.running.size > 0) return this.touch(plan);
    if (blocking) {
      plan.status = 'needs_replan';
      plan.failedStep = blocking.id;
      this.touch(plan);
      void this.attachFailureContext(run, blocking);
      return;
    }
    if (plan.steps.every((s) => FINAL_STEP.has(s.status))) {
      this.finish(plan, 'succeeded');
      this.wake(run);
      this.runs.delete(plan.id);
      return;
    }
    this.touch(plan);
  }

  private start(run: PlanRun, step: PlanStep): void {
    run.running.add(step.id);
    step.status = 'running';
    step.startedAt = this.now();
    void this.runStep(run, step)
      .catch((err: unknown) => {
        // Never leave a step running because of an engine fault.
        this.logger.error({
          msg: 'plan step failed inside the engine',
          planId: run.plan.id,
          stepId: step.id,
          err: String(err),
        });
        step.status = 'failed';
      })
      .finally(() => {
        run.running.delete(step.id);
        step.endedAt = this.now();
        this.events.publish(run.plan.sessionId, 'plan.step.completed', {
          planId: run.plan.id,
          stepId: step.id,
          status: step.status,
          actionIds: step.attempts.flatMap((a) => (a.actionId ? [a.actionId] : [])),
        });
        this.pump(run);
        if (run.plan.status !== 'running' || run.running.size === 0 || run.stopping) this.wake(run);
      });
  }

  private async runStep(run: PlanRun, step: PlanStep): Promise<void> {
    const signal = run.abort.signal;
    const version = step.version;
    let previous: string | undefined;
    for (let attempt = 0; attempt <= step.retry.attempts; attempt++) {
      if (signal.aborted) break;
      const backoffMs = retryBackoffMs(step, attempt);
      if (backoffMs > 0) await sleep(backoffMs, signal);
      if (signal.aborted) break;
      const result = await this.attempt(run, step, attempt, previous);
      if (step.version !== version) return; // replaced meanwhile (cannot happen while running, kept as a guard)
      if (result?.status === 'succeeded') {
        step.status = 'succeeded';
        return;
      }
      if (result?.status === 'cancelled') break;
      previous = result?.id ?? previous;
    }
    if (signal.aborted || step.attempts.at(-1)?.status === 'cancelled') {
      step.status = 'cancelled';
      step.reason = signal.aborted && signal.reason instanceof Error ? signal.reason.message : 'cancelled';
    } else {
      step.status = 'failed';
    }
  }

  /** One attempt: submits the step's action (a retry is linked to the previous attempt by `RETRY_OF`). */
  private async attempt(
    run: PlanRun,
    step: PlanStep,
    attempt: number,
    retryOf: string | undefined,
  ): Promise<ActionResult | undefined> {
    const { plan } = run;
    const startedAt = this.now();
    let session: Session;
    let submitted: SubmittedAction;
    for (;;) {
      try {
        session = this.sessions.get(plan.tenant, plan.sessionId);
        const workspace = workspaceSteps(step, attempt, run.running.size === 1);
        submitted = await this.engine.submit(session, step.action, {
          ...(retryOf && { retryOf }),
          ...(workspace && { workspace }),
          ...(plan.policy && {
            policy: { layer: 'plan', source: `plan ${plan.id}`, rules: plan.policy.rules },
          }),
        });
        break;
      } catch (err) {
        if (err instanceof ActionQueueFullError && !run.abort.signal.aborted) {
          await sleep(QUEUE_FULL_PAUSE_MS, run.abort.signal);
          continue;
        }
        const error =
          err instanceof SwitchyardError
            ? { class: 'validation' as const, code: err.code, message: err.message }
            : { class: 'internal' as const, message: 'internal error while submitting the step' };
        step.attempts.push({ status: 'denied', startedAt, endedAt: this.now(), error });
        return undefined;
      }
    }
    const record = { actionId: submitted.id, status: 'running' as const, startedAt };
    step.attempts.push(record);
    this.events.publish(plan.sessionId, 'plan.step.started', {
      planId: plan.id,
      stepId: step.id,
      attempt: attempt + 1,
      actionId: submitted.id,
    });
    this.touch(plan);
    // Cancelling the plan cancels the step's action through the engine's own path.
    const onAbort = () => void this.engine.cancel(session, submitted.id).catch(() => undefined);
    run.abort.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const { result } = await submitted.completion;
      Object.assign(record, {
        status: result.status,
        endedAt: this.now(),
        ...(result.error && { error: result.error }),
        ...(result.checkpoint && { checkpointId: result.checkpoint.id }),
        ...(result.restored && { restoredCheckpointId: result.restored.checkpointId }),
      });
      return result;
    } catch (err) {
      // Only an engine fault (the completion could not be recorded) gets here.
      Object.assign(record, { status: 'error', endedAt: this.now() });
      this.logger.error({
        msg: 'plan step action ended inside the engine',
        actionId: submitted.id,
        err: String(err),
      });
      return undefined;
    } finally {
      run.abort.signal.removeEventListener('abort', onAbort);
    }
  }

  /** Attaches what a replanner needs about the failed step, then announces that the plan needs a replan. */
  private async attachFailureContext(run: PlanRun, step: PlanStep): Promise<void> {
    const { plan } = run;
    plan.failureContext = await stepFailureContext(this.graph, this.redactor, plan, step);
    this.touch(plan);
    this.events.publish(plan.sessionId, 'plan.needs_replan', { planId: plan.id, stepId: step.id });
    this.wake(run);
  }

  private finish(plan: Plan, status: 'succeeded' | 'cancelled' | 'interrupted'): void {
    if (plan.status === status) return;
    plan.status = status;
    plan.endedAt = this.now();
    this.touch(plan);
    this.events.publish(plan.sessionId, 'plan.completed', {
      planId: plan.id,
      status,
      steps: Object.fromEntries(plan.steps.map((s) => [s.id, s.status])),
    });
  }

  /** Saves the plan as it is now, without waiting: saves land in order, and a failure is logged by the recorder. */
  private touch(plan: Plan): void {
    plan.updatedAt = this.now();
    void this.recorder.save(plan);
  }

  private wake(run: PlanRun): void {
    const waiters = run.settled;
    run.settled = [];
    for (const w of waiters) w();
  }

  private now(): string {
    return this.clock.now().toISOString();
  }
}
