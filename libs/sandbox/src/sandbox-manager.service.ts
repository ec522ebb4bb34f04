import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  criticalRiskDenial,
  TIERS,
  type ActionError,
  type RiskAssessment,
  type Tier,
} from '@switchyard/common';
import { validateCodeRequest } from './code-request.validation';
import { buildChildEnv } from './env-policy';
import { RiskPolicy } from './risk/risk-policy';
import { SANDBOX_OPTIONS, SANDBOX_TIERS } from './sandbox.constants';
import {
  SandboxCapacityError,
  SandboxConfigError,
  SandboxError,
  SandboxInternalError,
} from './sandbox.errors';
import type { ResolvedSandboxOptions } from './sandbox.options';
import { SandboxTier } from './sandbox-tier.port';
import type {
  CodeOutcome,
  CodeRequest,
  RoutedCode,
  RoutingDecision,
  RunnableCode,
  TierAvailability,
  TierJob,
  TierRunResult,
} from './sandbox.types';

const NO_TRUNCATION = Object.freeze({ stdout: false, stderr: false });
const rank = (tier: Tier) => TIERS.indexOf(tier);

export interface PrepareOptions {
  /**
   * The weakest tier the request may run in (a retry's floor: the tier its original ran in, or one above when
   * escalating). A request for `auto` or for a weaker tier is raised to this floor or to the policy's tier,
   * whichever is stronger.
   */
  minTier?: Tier;
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
export class SandboxManager {
  private readonly logger = new Logger(SandboxManager.name);
  private readonly tiers = new Map<Tier, SandboxTier>();

  constructor(
    @Inject(SANDBOX_OPTIONS) private readonly options: ResolvedSandboxOptions,
    private readonly risk: RiskPolicy,
    @Inject(SANDBOX_TIERS) tiers: SandboxTier[],
  ) {
    for (const tier of tiers) {
      if (this.tiers.has(tier.name)) throw new SandboxConfigError('tiers', `two tiers named "${tier.name}"`);
      this.tiers.set(tier.name, tier);
    }
  }

  /**
   * Validates (throwing `InvalidInputError` naming the field), scores and routes a request, once. The answer holds
   * everything `execute` needs; a `denial` in it means the action is recorded `denied` without running.
   */
  prepare(req: CodeRequest, options: PrepareOptions = {}): RoutedCode {
    const { timeoutMs, env } = validateCodeRequest(req, this.options);
    const decision = this.route(req, options.minTier);
    // Only the default can exceed the tier's maximum here; an explicit timeout that does was refused in `route`.
    const tierMax = decision.tier ? this.options.tierLimits[decision.tier].maxTimeoutMs : timeoutMs;
    return {
      ...decision,
      request: req,
      timeoutMs: Math.min(timeoutMs, tierMax),
      env: buildChildEnv(env, req.language),
    };
  }

  /** The routing decision alone: risk, tier, and a refusal when the request may not run. Pure. */
  route(req: CodeRequest, minTier?: Tier): RoutingDecision {
    let risk = this.risk.assess(req.language, req.code);
    if (risk.level === 'critical') return { risk, denial: criticalRiskDenial(risk) };
    const routed = this.options.routing[risk.level];
    let requested = req.tier ?? 'auto';
    if (minTier !== undefined && (requested === 'auto' || rank(requested) < rank(minTier))) {
      const asked = requested;
      requested = rank(routed) > rank(minTier) ? routed : minTier;
      // A weaker tier asked for explicitly is not silently ignored: the answer says where it ran instead, and why.
      if (asked !== 'auto') {
        const why = `tier "${asked}" was asked for but "${requested}" is this action's floor: a retry never runs in a weaker tier than the action it retries`;
        risk = { ...risk, reasons: [...risk.reasons, why] };
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
    const availability = tier ? await this.safeAvailability(tier) : notInstalled();
    if (!tier || !availability.available) {
      const error: ActionError = {
        class: 'policy',
        code: 'TIER_UNAVAILABLE',
        message: `tier "${tierName}" is not available: ${availability.reason ?? 'unknown reason'}`,
      };
      return denied(risk, error, elapsed(), tierName);
    }
    let result: TierRunResult;
    try {
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
      const known = err instanceof SandboxError;
      if (!known) this.logger.error(`tier ${tierName} failed on ${req.actionId}`, (err as Error).stack);
      return {
        status: 'error',
        tier: tierName,
        risk,
        stdout: '',
        stderr: '',
        truncated: NO_TRUNCATION,
        // Unknown errors may carry host details; only our own errors' messages are meant for callers.
        error: known
          ? { class: 'internal', code: err.code, message: err.message }
          : { class: 'internal', code: 'INTERNAL', message: 'internal sandbox error' },
        durationMs: elapsed(),
      };
    }
    return toOutcome(result, tierName, risk, routed.timeoutMs);
  }

  /** Every tier, registered or not; unregistered ones say so. */
  async availability(): Promise<Record<Tier, TierAvailability>> {
    const entries = await Promise.all(
      TIERS.map(async (name) => {
        const tier = this.tiers.get(name);
        return [name, tier ? await this.safeAvailability(tier) : notInstalled()] as const;
      }),
    );
    return Object.fromEntries(entries) as Record<Tier, TierAvailability>;
  }

  /** Frees what every tier holds for the session; tries all of them before reporting a failure. */
  async releaseSession(sessionId: string): Promise<void> {
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

  private async safeAvailability(tier: SandboxTier): Promise<TierAvailability> {
    try {
      return await tier.availability();
    } catch (err) {
      this.logger.error(`availability of ${tier.name} failed`, (err as Error).stack);
      return { available: false, reason: `availability check failed: ${(err as Error).message}` };
    }
  }
}

function notInstalled(): TierAvailability {
  return { available: false, reason: 'not installed in this engine' };
}

function denied(risk: RiskAssessment, error: ActionError, durationMs: number, tier?: Tier): CodeOutcome {
  return {
    status: 'denied',
    tier,
    risk,
    stdout: '',
    stderr: '',
    truncated: NO_TRUNCATION,
    error,
    durationMs,
  };
}

/** A tier's observations as the action's outcome. A non-zero exit is `failed` without an engine error. */
export function toOutcome(
  r: TierRunResult,
  tier: Tier,
  risk: RiskAssessment,
  timeoutMs: number,
): CodeOutcome {
  const base = {
    tier,
    risk,
    stdout: r.stdout,
    stderr: r.stderr,
    truncated: r.truncated,
    durationMs: r.durationMs,
    ...(r.exitCode === undefined ? {} : { exitCode: r.exitCode }),
    ...(r.containerId === undefined ? {} : { containerId: r.containerId }),
    ...(r.redacted ? { redacted: true } : {}),
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
