import { randomBytes } from 'node:crypto';
import { type Clock, type Language, NotFoundError, TIERS } from '@switchyard/common';
import type { SessionEgressAccess } from '../sandbox.types';
import type { StatefulBox } from './stateful-box.port';
import type { KernelEndReason, KernelInfo, StatefulTier } from './stateful.types';

const rank = (tier: StatefulTier) => TIERS.indexOf(tier);

/** One live kernel: a process beside the runner of its session's box. */
export interface Kernel {
  readonly id: string;
  readonly sessionId: string;
  readonly language: Language;
  readonly tier: StatefulTier;
  box: StatefulBox;
  /** What a restart needs to start the same kernel again. */
  readonly workspaceDir: string;
  readonly baseEnv: Record<string, string>;
  readonly egress?: SessionEgressAccess;
  readonly image?: string;
  pid?: number;
  executionCount: number;
  busy: boolean;
  startedAt: string;
  lastUsedAt: string;
  /** Cells queue here, one at a time per kernel. */
  tail: Promise<unknown>;
  idleTimer?: NodeJS.Timeout;
  unpin: () => void;
  ended: boolean;
  /** Being restarted: its end is a restart, not a death. */
  restarting?: boolean;
}

export const newKernelId = (): string => `krn_${randomBytes(8).toString('hex')}`;

/**
 * Which kernels each session has, by id, and the choice of the kernel a cell runs in. Knows nothing of runners:
 * `SessionKernels` starts and drives them.
 */
export class KernelRegistry {
  private readonly sessions = new Map<string, Map<string, Kernel>>();

  constructor(private readonly clock: Clock) {}

  add(kernel: Kernel): void {
    let kernels = this.sessions.get(kernel.sessionId);
    if (!kernels) this.sessions.set(kernel.sessionId, (kernels = new Map<string, Kernel>()));
    kernels.set(kernel.id, kernel);
  }

  /** Forgets a kernel that ended; true when it was still registered. */
  remove(kernel: Kernel): boolean {
    const kernels = this.sessions.get(kernel.sessionId);
    if (!kernels?.delete(kernel.id)) return false;
    if (kernels.size === 0) this.sessions.delete(kernel.sessionId);
    return true;
  }

  /** The session's kernel, or a `NotFoundError` naming it. */
  get(sessionId: string, kernelId: string): Kernel {
    const kernel = this.sessions.get(sessionId)?.get(kernelId);
    if (!kernel)
      throw new NotFoundError(`kernel ${kernelId} not found in session ${sessionId}`, { kernelId });
    return kernel;
  }

  of(sessionId: string): Kernel[] {
    return [...(this.sessions.get(sessionId)?.values() ?? [])];
  }

  all(): Kernel[] {
    return [...this.sessions.values()].flatMap((m) => [...m.values()]);
  }

  /** Kernels of the session that live in `box` (all of them die with it). */
  inBox(box: StatefulBox): Kernel[] {
    return this.of(box.sessionId).filter((k) => k.box === box);
  }

  /**
   * The kernel a cell of `language` runs in, given the tier the risk policy routed it to. An explicit tier gets
   * exactly its own kernel. Otherwise the strongest existing kernel at or above the routed tier keeps the session's
   * state (a stronger tier is always allowed); a kernel in a weaker tier is never used. `undefined`: start one in
   * `tier`. `skipped`: the session's kernels of the language in weaker tiers, which keep their state.
   */
  pick(
    sessionId: string,
    language: Language,
    tier: StatefulTier,
    explicit: boolean,
  ): { kernel?: Kernel; skipped: Kernel[] } {
    const same = this.of(sessionId).filter((k) => k.language === language && !k.ended);
    const skipped = same.filter((k) => rank(k.tier) < rank(tier));
    const usable = same
      .filter((k) => (explicit ? k.tier === tier : rank(k.tier) >= rank(tier)))
      .sort((a, b) => rank(b.tier) - rank(a.tier));
    return { kernel: usable[0], skipped };
  }

  info(kernel: Kernel): KernelInfo {
    return {
      id: kernel.id,
      sessionId: kernel.sessionId,
      language: kernel.language,
      tier: kernel.tier,
      executionCount: kernel.executionCount,
      busy: kernel.busy,
      ...(kernel.pid !== undefined && { pid: kernel.pid }),
      startedAt: kernel.startedAt,
      lastUsedAt: kernel.lastUsedAt,
    };
  }

  touch(kernel: Kernel): void {
    kernel.lastUsedAt = this.clock.now().toISOString();
  }
}

/** Human words for why a kernel ended, for logs and answers. */
export const KERNEL_END_WORDS: Record<KernelEndReason, string> = {
  restarted: 'restarted on request',
  stopped: 'stopped on request',
  died: 'its process ended',
  idle: 'idle too long',
  session_ended: 'its session ended',
  shutdown: 'the engine shut down',
};
