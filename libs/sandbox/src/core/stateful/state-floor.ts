import { TIERS, type Tier } from '@switchyard/common';
import type { StatefulTier } from './kernel-ref';

const rank = (tier: Tier): number => TIERS.indexOf(tier);

/** The weakest tier one action may run in, and why, as routing takes it (`SandboxManager.route`). */
export interface RoutingFloor {
  minTier?: Tier;
  floorReason?: string;
  /** The answer says why even when the action asked for no tier (`auto`) and the floor raised it. */
  announce?: boolean;
}

/** What decides a session's floor beyond the caller's own: where its state lives, and where new state goes. */
export interface StateFloorInput {
  /** Tiers in which the session holds a running kernel or background process now. */
  live: readonly StatefulTier[];
  /** The action starts or uses state (a kernel cell, a background process) rather than running fresh. */
  holdsState: boolean;
  /** The caller named a tier. */
  explicitTier: boolean;
  /** Where a session's new kernels and processes go when nothing asks otherwise (the strongest that is available). */
  stateTier?: StatefulTier;
}

/**
 * One session, one computer: the servers, kernels and processes a session starts are reachable (on 127.0.0.1, in one
 * network namespace) from every later action of the session but a one-off container's. Two rules, both raising only:
 *
 * - While a session holds a running kernel or process in a tier, none of its actions runs in a weaker one: an action
 *   the policy routes lower runs in that tier's box, with them. A one-off container is stronger and stays one-off.
 * - A new kernel or process goes to `stateTier` (the pooled tier when it is available) unless the caller named a
 *   tier, so that the session's state is where both its low-risk and its network actions can meet it.
 *
 * `base` is the caller's floor (a retry's, a template's); the stronger of the floors wins.
 */
export function stateFloor(base: RoutingFloor, input: StateFloorInput): RoutingFloor {
  let floor = base;
  const home = [...input.live].sort((a, b) => rank(b) - rank(a))[0];
  if (home !== undefined && above(home, floor.minTier)) {
    floor = {
      minTier: home,
      floorReason:
        `the session runs kernels or background processes in the ${home} tier, and its later actions run with ` +
        'them so that they reach what those started (servers on 127.0.0.1)',
      announce: true,
    };
  }
  if (input.holdsState && !input.explicitTier && input.stateTier && above(input.stateTier, floor.minTier)) {
    floor = {
      minTier: input.stateTier,
      floorReason:
        `a session's kernels and background processes live in the ${input.stateTier} tier while it is available, ` +
        "so that every later action of the session but a one-off container's reaches what they start",
      announce: true,
    };
  }
  return floor;
}

const above = (tier: Tier, floor: Tier | undefined): boolean =>
  floor === undefined || rank(tier) > rank(floor);
