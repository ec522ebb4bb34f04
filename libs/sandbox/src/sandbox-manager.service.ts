import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import {
  criticalRiskDenial,
  NO_OUTPUT,
  TIERS,
  type ActionError,
  type Language,
  type RiskAssessment,
  type Tier,
} from '@switchyard/common';
import { validateCodeRequest } from './code-request.validation';
import { buildChildEnv, egressEnv, trustedCaEnv } from './core/env-policy';
import { RiskPolicy } from './risk/risk-policy';
import { SANDBOX_OPTIONS, SANDBOX_TIERS } from './core/sandbox.constants';
import {
  SandboxCapacityError,
  SandboxConfigError,
  SandboxError,
  SandboxInternalError,
} from './core/sandbox.errors';
import type { ResolvedSandboxOptions } from './core/sandbox.options';
import { SandboxTier } from './core/sandbox-tier.port';
import { SessionKernels } from './core/stateful/session-kernels';
import { SessionProcesses } from './core/stateful/session-processes';
import { SessionTerminals } from './core/stateful/session-terminals';
import { type RoutingFloor, stateFloor } from './core/stateful/state-floor';
import { TierAvailabilities } from './core/tier-availabilities';
import { type CellRunResult, isStatefulTier } from './core/stateful/stateful.types';
import type {
  CodeOutcome,
  CodeRequest,
  RoutedCode,
  RoutingDecision,
  RunnableCode,
  TierAvailability,
  TierJob,
  TierRunResult,
} from './core/sandbox.types';

const rank = (tier: Tier) => TIERS.indexOf(tier);

export interface PrepareOptions {
  /**
   * The weakest tier the request may run in (a retry's floor: the tier its original ran in, or one above when
   * escalating). A request for `auto` or for a weaker tier is raised to this floor or to the policy's tier,
   * whichever is stronger.
   */
  minTier?: Tier;
  /** Why `minTier` is the floor, for the answer when a weaker tier was asked for. Default: a retry's floor. */
  floorReason?: string;
}

/**
 * Validates code requests, scores and routes them to a tier once (`prepare`), and runs what was routed
 * (`execute`).
 *
 * Routing never weakens isolation: an unregistered or unavailable tier means `denied`, never a fallback to a
 * weaker tier; a caller may ask for a stronger tier than the policy picks, not a weaker one (unless
 * `allowWeakerTier`).
 */
@Injectable()
export class SandboxManager implements OnApplicationBootstrap {
  private readonly logger = new Logger(SandboxManager.name);
  private readonly tiers = new Map<Tier, SandboxTier>();
  private readonly availabilities: TierAvailabilities;

  constructor(
    @Inject(SANDBOX_OPTIONS) private readonly options: ResolvedSandboxOptions,
    private readonly risk: RiskPolicy,
    @Inject(SANDBOX_TIERS) tiers: SandboxTier[],
    private readonly kernels: SessionKernels,
    /** Absent in unit tests of routing alone: then only kernels count as a session's live state. */
    private readonly processes?: SessionProcesses,
    /** An open terminal holds state too: what its shell started is the session's, reached like a process's. */
    private readonly terminals?: SessionTerminals,
  ) {
    for (const tier of tiers) {
      if (this.tiers.has(tier.name)) throw new SandboxConfigError('tiers', `two tiers named "${tier.name}"`);
      this.tiers.set(tier.name, tier);
    }
    this.availabilities = new TierAvailabilities(this.tiers, this.logger);
  }

  /**
   * Validates (throwing `InvalidInputError` naming the field), scores and routes a request, once. The answer holds
   * everything `execute` needs; a `denial` in it means the action is recorded `denied` without running. A call
   * channel with `state: "session"` is refused (field `state`): a kernel cell cannot have a per-action channel.
   */
  prepare(req: CodeRequest, options: PrepareOptions = {}): RoutedCode {
    const { timeoutMs, env } = validateCodeRequest(req, this.options);
    const floor = this.floorOf(req, req.state === 'session', options);
    const decision = this.stateful(req, this.route(req, floor.minTier, floor.floorReason, floor.announce));
    // Only the default can exceed the tier's maximum here; an explicit timeout that does was refused in `route`.
    const tierMax = decision.tier ? this.options.tierLimits[decision.tier].maxTimeoutMs : timeoutMs;
    return {
      ...decision,
      request: req,
      timeoutMs: Math.min(timeoutMs, tierMax),
      env: {
        ...buildChildEnv(
          { ...this.trustEnv(), ...this.imageEnvFor(req, decision.tier), ...env },
          req.language,
        ),
        ...this.egressEnvFor(req, decision.tier),
      },
      callerEnv: env,
    };
  }

  /**
   * What every sandbox's environment holds beyond `BASE_ENV`: the variables naming the operator's extra trusted CAs,
   * when there are some (under the image's and the caller's entries).
   */
  trustEnv(): Record<string, string> {
    return this.options.trustedCa ? trustedCaEnv(this.options.trustedCa) : {};
  }

  /**
   * The proxy settings for a session with network, in the tiers that reach its egress proxy (the containers); the
   * subprocess tier stays offline.
   */
  private egressEnvFor(req: CodeRequest, tier: Tier | undefined): Record<string, string> {
    return req.egress && (tier === 'pooled' || tier === 'container') ? egressEnv() : {};
  }

  /**
   * The session image's environment (a template's), in every tier: each runs that image (the subprocess tier on its
   * exported root). The engine floors template sessions at `pooled` still, so today only the containers see it.
   */
  private imageEnvFor(req: CodeRequest, tier: Tier | undefined): Record<string, string> {
    return req.image && tier !== undefined ? req.image.env : {};
  }

  /** A `state: "session"` request routed to a tier that holds no state (the one-off tier) is refused. */
  private stateful(req: CodeRequest, decision: RoutingDecision): RoutingDecision {
    if (req.state !== 'session' || decision.denial || decision.tier === undefined) return decision;
    if (isStatefulTier(decision.tier)) return decision;
    const { risk } = decision;
    const because = risk.reasons.length > 0 ? ` for its ${risk.level} risk (${risk.reasons.join('; ')})` : '';
    return {
      ...decision,
      denial: {
        class: 'policy',
        code: 'STATELESS_TIER',
        message:
          `this would run in the session's kernel or background processes, but it routes to the ${decision.tier} ` +
          `tier${because}, which holds no state (each action gets a new container); run it as a code action ` +
          `with state "fresh"`,
      },
    };
  }

  /**
   * Scores long code ahead without holding the event loop (see `RiskPolicy.assessAhead`), so that the routing of the
   * same code that follows finds its score made. Call it before routing code that came from a request.
   */
  assessAhead(language: Language, code: string): Promise<void> {
    return this.risk.assessAhead(language, code);
  }

  /** The routing decision alone: risk, tier, and a refusal when the request may not run. Pure. */
  route(req: CodeRequest, minTier?: Tier, floorReason?: string, announce = false): RoutingDecision {
    let risk = this.risk.assess(req.language, req.code);
    if (risk.level === 'critical') return { risk, denial: criticalRiskDenial(risk) };
    const routed = this.options.routing[risk.level];
    let requested = req.tier ?? 'auto';
    if (minTier !== undefined && (requested === 'auto' || rank(requested) < rank(minTier))) {
      const asked = requested;
      requested = rank(routed) > rank(minTier) ? routed : minTier;
      // A weaker tier asked for explicitly is not silently ignored: the answer says where it ran instead, and why.
      if (asked !== 'auto') {
        const because = floorReason ?? 'a retry never runs in a weaker tier than the action it retries';
        const why = `tier "${asked}" was asked for but "${requested}" is this action's floor: ${because}`;
        risk = { ...risk, reasons: [...risk.reasons, why] };
      } else if (announce && requested !== routed && floorReason) {
        const why = `runs in the ${requested} tier rather than ${routed}: ${floorReason}`;
        risk = { ...risk, reasons: [...risk.reasons, why] };
        return this.withinTierLimits(req, { risk, tier: requested });
      }
    }
    if (requested === 'auto' || requested === routed)
      return this.withinTierLimits(req, { risk, tier: routed });
    if (rank(requested) > rank(routed) || this.options.allowWeakerTier) {
      return this.withinTierLimits(req, { risk, tier: requested });
    }
    return {
      risk,
      tier: requested,
      denial: {
        class: 'policy',
        code: 'TIER_TOO_WEAK',
        message:
          `tier "${requested}" is weaker than "${routed}", which ${risk.level} risk requires ` +
          `(${risk.reasons.join('; ')}); ask for "${routed}", a stronger tier or "auto"`,
      },
    };
  }

  /** A timeout the chosen tier does not allow is a policy refusal (the global maximum was checked already). */
  private withinTierLimits(req: CodeRequest, decision: RoutingDecision & { tier: Tier }): RoutingDecision {
    const max = this.options.tierLimits[decision.tier].maxTimeoutMs;
    if (req.timeoutMs === undefined || req.timeoutMs <= max) return decision;
    return {
      ...decision,
      denial: {
        class: 'policy',
        code: 'TIMEOUT_ABOVE_TIER_MAX',
        message: `timeoutMs ${req.timeoutMs} exceeds the ${decision.tier} tier's maximum of ${max} ms`,
      },
    };
  }

  /**
   * Runs a prepared request in its tier. Only engine faults reject; everything the code does is in the outcome.
   * A tier that is missing or unavailable at run time is `denied`, never swapped for another.
   * `hooks.onOutput` receives output as it arrives (already redacted, within the caps).
   */
  async execute(
    routed: RunnableCode,
    signal?: AbortSignal,
    hooks: { onOutput?: TierJob['onOutput'] } = {},
  ): Promise<CodeOutcome> {
    const started = performance.now();
    const { request: req, risk, tier: tierName } = routed;
    const elapsed = () => Math.round(performance.now() - started);
    const tier = this.tiers.get(tierName);
    const unavailable = await this.unavailable(tierName);
    if (!tier || unavailable) return denied(risk, unavailable!, elapsed(), tierName);
    let result: TierRunResult;
    try {
      if (req.state === 'session') {
        const cell = await this.runCell(routed, hooks.onOutput, signal);
        return cellOutcome(cell, risk, routed.timeoutMs);
      }
      result = await tier.run(
        {
          actionId: req.actionId,
          sessionId: req.sessionId,
          language: req.language,
          code: req.code,
          stdin: req.stdin,
          env: routed.env,
          timeoutMs: routed.timeoutMs,
          workspaceDir: req.workspaceDir,
          ...(req.egress && { egress: req.egress }),
          ...(req.image && { image: req.image.ref }),
          // Fresh runs only (`prepare` refused one with state "session"): the tier sets the socket's path.
          ...(req.channel && { channel: req.channel }),
          output: this.options.tierLimits[tierName].output,
          onOutput: hooks.onOutput,
        },
        signal,
      );
    } catch (err) {
      // A tier at its capacity refuses the action, naming the setting to raise; that is a denial, not a fault.
      if (err instanceof SandboxCapacityError) {
        return denied(risk, { class: 'limit', code: err.code, message: err.message }, elapsed(), tierName);
      }
      // A tier that cannot give what the job needs refuses it (an `unprocessable` error): a denial, not a fault.
      if (err instanceof SandboxError && err.kind === 'unprocessable') {
        return denied(risk, { class: 'policy', code: err.code, message: err.message }, elapsed(), tierName);
      }
      // A tier that turned out unavailable for this job (shutting down, the session's image has no root) is the
      // same refusal as one unavailable before it started.
      if (err instanceof SandboxError && err.kind === 'unavailable') {
        const message = err.message.startsWith('tier ')
          ? err.message
          : `tier "${tierName}" is not available: ${err.message}`;
        return denied(risk, { class: 'policy', code: 'TIER_UNAVAILABLE', message }, elapsed(), tierName);
      }
      const known = err instanceof SandboxError;
      if (!known) this.logger.error(`tier ${tierName} failed on ${req.actionId}`, (err as Error).stack);
      return {
        status: 'error',
        tier: tierName,
        risk,
        run: NO_OUTPUT,
        // Unknown errors may carry host details; only our own errors' messages are meant for callers.
        error: known
          ? { class: 'internal', code: err.code, message: err.message }
          : { class: 'internal', code: 'INTERNAL', message: 'internal sandbox error' },
        durationMs: elapsed(),
      };
    }
    return toOutcome(result, tierName, risk, routed.timeoutMs);
  }

  /** A cell for the session's kernel of its language, in the routed tier or a stronger one holding that state. */
  private runCell(
    routed: RunnableCode,
    onOutput: TierJob['onOutput'],
    signal?: AbortSignal,
  ): Promise<CellRunResult> {
    const { request: req, tier } = routed;
    if (!isStatefulTier(tier))
      throw new SandboxInternalError('STATELESS_TIER', `tier ${tier} holds no kernels`);
    return this.kernels.runCell(
      {
        actionId: req.actionId,
        sessionId: req.sessionId,
        language: req.language,
        code: req.code,
        env: routed.callerEnv,
        baseEnv: {
          ...buildChildEnv({ ...this.trustEnv(), ...this.imageEnvFor(req, tier) }, req.language),
          ...this.egressEnvFor(req, tier),
        },
        timeoutMs: routed.timeoutMs,
        tier,
        tierExplicit: req.tier !== undefined && req.tier !== 'auto',
        workspaceDir: req.workspaceDir,
        ...(req.egress && { egress: req.egress }),
        ...(req.image && { image: req.image.ref }),
        output: this.options.tierLimits[tier].output,
        onOutput,
      },
      signal,
    );
  }

  /**
   * The refusal of a tier that is not installed or not available now (`TIER_UNAVAILABLE`, recorded `denied`), or
   * `undefined` when it can run. Never a fallback to another tier.
   */
  async unavailable(tierName: Tier): Promise<ActionError | undefined> {
    const availability = await this.availabilities.of(tierName);
    if (availability.available) return undefined;
    return {
      class: 'policy',
      code: 'TIER_UNAVAILABLE',
      message: `tier "${tierName}" is not available: ${availability.reason ?? 'unknown reason'}`,
    };
  }

  /**
   * Routes input that will run in the session's stateful sandbox without being a cell (a background process's
   * command, text for its stdin): scored as bash code, never to a weaker tier, and refused where no state is held.
   */
  routeStateful(req: CodeRequest, minTier?: Tier, floorReason?: string): RoutingDecision {
    const floor = this.floorOf(req, true, { minTier, floorReason });
    return this.stateful(
      { ...req, state: 'session' },
      this.route(req, floor.minTier, floor.floorReason, floor.announce),
    );
  }

  /**
   * The caller's floor, raised so that the session stays one computer (`stateFloor`): an action runs with the
   * session's running kernels and processes, and new state goes to the strongest stateful tier available.
   */
  private floorOf(req: CodeRequest, holdsState: boolean, base: PrepareOptions): RoutingFloor {
    const live = [
      ...new Set([
        ...this.kernels.liveTiers(req.sessionId),
        ...(this.processes?.liveTiers(req.sessionId) ?? []),
        ...(this.terminals?.liveTiers(req.sessionId) ?? []),
      ]),
    ];
    return stateFloor(
      {
        ...(base.minTier !== undefined && { minTier: base.minTier }),
        ...(base.floorReason && { floorReason: base.floorReason }),
      },
      {
        live,
        holdsState,
        explicitTier: req.tier !== undefined && req.tier !== 'auto',
        stateTier: holdsState ? this.availabilities.stateTier() : undefined,
      },
    );
  }

  /** The first availability answers, so that the first actions route as the later ones will. */
  onApplicationBootstrap(): Promise<void> {
    return this.availabilities.probeAtBoot();
  }

  /** Every tier, registered or not; unregistered ones say so. */
  availability(): Promise<Record<Tier, TierAvailability>> {
    return this.availabilities.all();
  }

  /**
   * The session has ended (its actions are stopped; `releaseSession` follows in the background): what it holds stops
   * counting against the tiers' session limits now, before its containers and pods are gone.
   */
  fenceSession(sessionId: string): void {
    for (const tier of this.tiers.values()) tier.fenceSession?.(sessionId);
  }

  /** Frees what every tier holds for the session; tries all of them before reporting a failure. */
  async releaseSession(sessionId: string): Promise<void> {
    // Kernels end first, so their records say why; the tiers then kill the boxes they lived in.
    await this.kernels.releaseSession(sessionId);
    const results = await Promise.allSettled(
      [...this.tiers.values()].map((t) => t.releaseSession(sessionId)),
    );
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed.length === 0) return;
    for (const f of failed)
      this.logger.error(`releaseSession(${sessionId}) failed`, (f.reason as Error)?.stack);
    throw new SandboxInternalError(
      'RELEASE_FAILED',
      `could not release session ${sessionId} in ${failed.length} tier(s)`,
      {
        retriable: true,
        cause: failed[0].reason,
      },
    );
  }
}

function denied(risk: RiskAssessment, error: ActionError, durationMs: number, tier?: Tier): CodeOutcome {
  return {
    status: 'denied',
    tier,
    risk,
    run: NO_OUTPUT,
    error,
    durationMs,
  };
}

/**
 * A cell's observations as the action's outcome: a tier run's, plus its kernel and the value of its last expression.
 * An interrupt request ends it `cancelled`; a timeout or an out-of-memory kill says whether the kernel kept its state.
 */
export function cellOutcome(r: CellRunResult, risk: RiskAssessment, timeoutMs: number): CodeOutcome {
  // The kernel's tier: the routed one, or a stronger one whose kernel already held the session's state.
  const ran = r.kernel.tier;
  const outcome: CodeOutcome = {
    ...toOutcome(r, ran, risk, timeoutMs),
    kernel: { ...r.kernel, ...(r.stateLost && { stateLost: true }) },
    ...(r.result !== undefined && { result: r.result }),
    results: r.results ?? [],
    ...(r.note !== undefined && { note: r.note }),
  };
  const lost =
    "its kernel was killed, so the session's state in it is lost; the next cell starts a fresh kernel";
  if (r.interrupted) {
    outcome.status = 'cancelled';
    outcome.error = {
      class: 'cancelled',
      code: 'KERNEL_INTERRUPTED',
      message: 'interrupted; the kernel keeps its state',
    };
  } else if (outcome.status === 'timed_out') {
    outcome.error = {
      class: 'timeout',
      code: 'TIMEOUT',
      message: r.stateLost
        ? `timed out after ${timeoutMs} ms and did not stop when interrupted: ${lost}`
        : `timed out after ${timeoutMs} ms; the cell was interrupted and the kernel keeps its state`,
    };
  } else if (outcome.error?.class === 'limit' && r.stateLost) {
    outcome.error = { ...outcome.error, message: `${outcome.error.message}; ${lost}` };
  }
  return outcome;
}

/**
 * A tier's observations as the action's outcome, keeping them as its `run`. A non-zero exit is `failed` without an
 * engine error.
 */
export function toOutcome(
  r: TierRunResult,
  tier: Tier,
  risk: RiskAssessment,
  timeoutMs: number,
): CodeOutcome {
  const base = {
    tier,
    risk,
    run: r,
    durationMs: r.durationMs,
    ...(r.containerId === undefined ? {} : { containerId: r.containerId }),
    ...(r.runtime === undefined ? {} : { runtime: r.runtime }),
  };
  if (r.spawnError !== undefined) {
    return {
      ...base,
      status: 'error',
      error: { class: 'spawn', code: 'SPAWN_FAILED', message: r.spawnError },
    };
  }
  if (r.aborted)
    return { ...base, status: 'error', error: { class: 'internal', code: 'ABORTED', message: 'cancelled' } };
  if (r.timedOut) {
    return {
      ...base,
      status: 'timed_out',
      error: { class: 'timeout', code: 'TIMEOUT', message: `timed out after ${timeoutMs} ms` },
    };
  }
  if (r.limit)
    return {
      ...base,
      status: 'failed',
      error: { class: 'limit', code: r.limit.code, message: r.limit.message },
    };
  return { ...base, status: r.exitCode === 0 ? 'succeeded' : 'failed' };
}
