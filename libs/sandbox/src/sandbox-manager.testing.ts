import { NO_OUTPUT, systemClock } from '@switchyard/common';
import type { SandboxManager } from './sandbox-manager.service';
import type { SandboxTier } from './core/sandbox-tier.port';
import { SessionKernels } from './core/stateful/session-kernels';
import { type CodeOutcome, type CodeRequest, isRunnable, type TierJob } from './core/sandbox.types';

/**
 * @internal Tests only: prepares a request once and runs it, as the engine's code handler does. A request the policy
 * refuses answers its denial as an outcome instead of running.
 */
export async function prepareAndRun(
  manager: SandboxManager,
  req: CodeRequest,
  hooks: { onOutput?: TierJob['onOutput'] } = {},
): Promise<CodeOutcome> {
  const routed = manager.prepare(req);
  if (!isRunnable(routed)) {
    return {
      status: 'denied',
      tier: routed.tier,
      risk: routed.risk,
      run: NO_OUTPUT,
      error: routed.denial,
      durationMs: 0,
    };
  }
  return manager.execute(routed, undefined, hooks);
}

/** @internal Tests only: the kernels of `tiers` (those that hold state), with short, test-friendly timings. */
export function kernelsOf(tiers: readonly SandboxTier[] = []): SessionKernels {
  return new SessionKernels(
    tiers.flatMap((t) => (t.stateful ? [t.stateful] : [])),
    {
      idleMs: 60_000,
      interruptGraceMs: 1000,
      runnerGraceMs: 5000,
      results: { maxBytes: 1024 * 1024, cellMaxBytes: 4 * 1024 * 1024 },
    },
    systemClock,
  );
}
