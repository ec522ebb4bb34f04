import type { Logger } from '@nestjs/common';
import { TIERS, type Tier } from '@switchyard/common';
import type { SandboxTier } from './sandbox-tier.port';
import type { TierAvailability } from './sandbox.types';
import type { StatefulTier } from './stateful/kernel-ref';

/** How long an availability answer stands for routing new state (`stateTier`) before it is asked again. */
const STATE_TIER_RECHECK_MS = 5_000;
/** How long boot waits for the first availability answers. */
const BOOT_PROBE_MS = 3_000;

const notInstalled = (): TierAvailability => ({ available: false, reason: 'not installed in this engine' });

/**
 * The tiers' availability answers, asked without ever throwing, and the latest of each kept, so that routing can use
 * one without waiting on Docker (`stateTier`).
 */
export class TierAvailabilities {
  private readonly seen = new Map<Tier, { available: boolean; at: number }>();

  constructor(
    private readonly tiers: ReadonlyMap<Tier, SandboxTier>,
    private readonly logger: Logger,
  ) {}

  /** A tier's answer now (one not registered is "not installed"). Never throws. */
  async of(name: Tier): Promise<TierAvailability> {
    const tier = this.tiers.get(name);
    if (!tier) return notInstalled();
    let answer: TierAvailability;
    try {
      answer = await tier.availability();
    } catch (err) {
      this.logger.error(`availability of ${tier.name} failed`, (err as Error).stack);
      answer = { available: false, reason: `availability check failed: ${(err as Error).message}` };
    }
    this.seen.set(tier.name, { available: answer.available, at: performance.now() });
    return answer;
  }

  /** Every tier, registered or not. */
  async all(): Promise<Record<Tier, TierAvailability>> {
    const entries = await Promise.all(TIERS.map(async (name) => [name, await this.of(name)] as const));
    return Object.fromEntries(entries) as Record<Tier, TierAvailability>;
  }

  /** The first answers (at most BOOT_PROBE_MS of waiting), so that the first actions route as the later ones will. */
  async probeAtBoot(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.all(),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, BOOT_PROBE_MS))),
    ]).finally(() => clearTimeout(timer));
  }

  /**
   * Where a session's new kernels and processes go: the pooled tier when it holds state and its latest answer was
   * yes, else none (the policy's tier). An old answer is refreshed in the background, so routing never waits.
   */
  stateTier(): StatefulTier | undefined {
    if (!this.tiers.get('pooled')?.stateful) return undefined;
    const seen = this.seen.get('pooled');
    if (!seen || performance.now() - seen.at > STATE_TIER_RECHECK_MS) void this.of('pooled');
    return seen?.available ? 'pooled' : undefined;
  }
}
