import type { Language, Tier } from '@switchyard/common';

/*
 * The stateful words `sandbox.types` needs too (a request's `state`, an answer's `kernel`), apart from
 * `stateful.types` so the two type files do not import each other.
 */

/** Whether a code action runs in a fresh interpreter (the default) or in the session's kernel for its language. */
export const CODE_STATES = ['fresh', 'session'] as const;
export type CodeState = (typeof CODE_STATES)[number];

/** Tiers that hold state: the one-off container tier holds none (each action is a new container). */
export type StatefulTier = Extract<Tier, 'subprocess' | 'pooled'>;
export const STATEFUL_TIERS: readonly StatefulTier[] = ['subprocess', 'pooled'];
export const isStatefulTier = (tier: Tier): tier is StatefulTier =>
  tier === 'subprocess' || tier === 'pooled';

/** The kernel a cell ran in, as the action's answer shows it (`output.kernel`). */
export interface KernelRef {
  id: string;
  language: Language;
  tier: StatefulTier;
  /** Cells this kernel has run, this one included. */
  executionCount: number;
  /** True when this action found no kernel and began a fresh one: state from before is gone. */
  started: boolean;
  /**
   * On the first cell after the session's kernel of this language ended without being asked to (it died, or sat
   * idle past its limit): why the state from before is gone.
   */
  reset?: KernelReset;
}

/** Why a kernel's state was lost without the caller asking (`died`: its process ended; `idle`: unused too long). */
export interface KernelReset {
  reason: 'died' | 'idle';
  message: string;
  /** When it ended (ISO 8601). */
  at: string;
}
