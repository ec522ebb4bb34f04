import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  criticalRiskDenial,
  InvalidInputError,
  LANGUAGES,
  TIERS,
  type ActionError,
  type RiskAssessment,
  type Tier,
} from '@switchyard/common';
import { buildChildEnv, validateEnv } from './env-policy';
import { RiskPolicy } from './risk/risk-policy';
import { SANDBOX_OPTIONS, SANDBOX_TIERS } from './sandbox.constants';
import { SandboxConfigError, SandboxError, SandboxInternalError } from './sandbox.errors';
import type { ResolvedSandboxOptions } from './sandbox.options';
import { SandboxTier } from './sandbox-tier.port';
import type {
  CodeOutcome,
  CodeRequest,
  RoutingDecision,
  TierAvailability,
  TierJob,
  TierRunResult,
} from './sandbox.types';

const NO_TRUNCATION = Object.freeze({ stdout: false, stderr: false });
const rank = (tier: Tier) => TIERS.indexOf(tier);

/**
 * Validates code requests, scores and routes them to a tier, and runs them there.
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

  /** Throws `InvalidInputError` (with the offending field) for a request that must not run. */
  validate(req: CodeRequest): void {
    this.normalize(req);
  }

  route(req: CodeRequest): RoutingDecision {
    const risk = this.risk.assess(req.language, req.code);
    if (risk.level === 'critical') return { risk, denial: criticalRiskDenial(risk) };
    const routed = this.options.routing[risk.level];
    if (req.tier === 'auto' || req.tier === routed) return this.withinTierLimits(req, { risk, tier: routed });
    if (rank(req.tier) > rank(routed) || this.options.allowWeakerTier) {
      return this.withinTierLimits(req, { risk, tier: req.tier });
    }
    return {
      risk,
      tier: req.tier,
      denial: {
        class: 'policy',
        code: 'TIER_TOO_WEAK',
        message:
          `tier "${req.tier}" is weaker than "${routed}", which ${risk.level} risk requires ` +
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
   * Runs a validated request. Only engine faults reject; everything the code does is in the outcome.
   * `hooks.onOutput` receives output as it arrives (already redacted, within the caps).
   */
  async execute(
    req: CodeRequest,
    signal?: AbortSignal,
    hooks: { onOutput?: TierJob['onOutput'] } = {},
  ): Promise<CodeOutcome> {
    const started = performance.now();
    const { timeoutMs, env } = this.normalize(req);
    const decision = this.route(req);
    const elapsed = () => Math.round(performance.now() - started);
    if (decision.denial) return denied(decision.risk, decision.denial, elapsed(), decision.tier);
    const tierName = decision.tier!;
    const limits = this.options.tierLimits[tierName];
    // Only the default can exceed the tier's maximum here; an explicit timeout that does was refused in `route`.
    const runTimeoutMs = Math.min(timeoutMs, limits.maxTimeoutMs);
    const tier = this.tiers.get(tierName);
    const availability = tier ? await this.safeAvailability(tier) : notInstalled();
    if (!tier || !availability.available) {
      const error: ActionError = {
        class: 'policy',
        code: 'TIER_UNAVAILABLE',
        message: `tier "${tierName}" is not available: ${availability.reason ?? 'unknown reason'}`,
      };
      return denied(decision.risk, error, elapsed(), tierName);
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
          env: buildChildEnv(env, req.language),
          timeoutMs: runTimeoutMs,
          workspaceDir: req.workspaceDir,
          output: limits.output,
          onOutput: hooks.onOutput,
        },
        signal,
      );
    } catch (err) {
      const known = err instanceof SandboxError;
      if (!known) this.logger.error(`tier ${tierName} failed on ${req.actionId}`, (err as Error).stack);
      return {
        status: 'error',
        tier: tierName,
        risk: decision.risk,
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
    return toOutcome(result, tierName, decision.risk, runTimeoutMs);
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

  private normalize(req: CodeRequest): { timeoutMs: number; env: Record<string, string> } {
    const o = this.options;
    if (!LANGUAGES.includes(req.language)) {
      throw new InvalidInputError(
        'language',
        `language must be one of ${LANGUAGES.join(', ')}`,
        'INVALID_LANGUAGE',
      );
    }
    if (req.tier !== 'auto' && !TIERS.includes(req.tier)) {
      throw new InvalidInputError('tier', `tier must be auto or one of ${TIERS.join(', ')}`, 'INVALID_TIER');
    }
    if (typeof req.code !== 'string')
      throw new InvalidInputError('code', 'code must be a string', 'INVALID_CODE');
    if (req.code.includes('\0'))
      throw new InvalidInputError('code', 'code contains a NUL byte', 'INVALID_CODE');
    const codeBytes = Buffer.byteLength(req.code, 'utf8');
    if (codeBytes > o.maxCodeBytes) {
      throw new InvalidInputError(
        'code',
        `code is ${codeBytes} bytes; at most ${o.maxCodeBytes}`,
        'CODE_TOO_LARGE',
        {
          limit: o.maxCodeBytes,
        },
      );
    }
    if (req.stdin !== undefined) {
      if (typeof req.stdin !== 'string')
        throw new InvalidInputError('stdin', 'stdin must be a string', 'INVALID_STDIN');
      const stdinBytes = Buffer.byteLength(req.stdin, 'utf8');
      if (stdinBytes > o.maxStdinBytes) {
        throw new InvalidInputError(
          'stdin',
          `stdin is ${stdinBytes} bytes; at most ${o.maxStdinBytes}`,
          'STDIN_TOO_LARGE',
          {
            limit: o.maxStdinBytes,
          },
        );
      }
    }
    const timeoutMs = req.timeoutMs ?? o.defaultTimeoutMs;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > o.maxTimeoutMs) {
      throw new InvalidInputError(
        'timeoutMs',
        `timeoutMs must be an integer from 1 to ${o.maxTimeoutMs}`,
        'INVALID_TIMEOUT',
        {
          max: o.maxTimeoutMs,
        },
      );
    }
    if (
      typeof req.workspaceDir !== 'string' ||
      !req.workspaceDir.startsWith('/') ||
      req.workspaceDir.includes('\0')
    ) {
      throw new InvalidInputError(
        'workspaceDir',
        'workspaceDir must be an absolute path',
        'INVALID_WORKSPACE',
      );
    }
    return { timeoutMs, env: validateEnv(req.env) };
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
