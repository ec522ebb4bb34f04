/** Per-run limits a `ProcessLimiter` enforces on a whole process tree. */
export interface GroupLimits {
  memoryBytes: number;
  pids: number;
  /** CPU quota in CPUs (`1` = one CPU's worth of time per period, shared by every process of the run). */
  cpus?: number;
}

/** How a group starts. */
export interface GroupOptions {
  /**
   * Start closed: nothing in the group can create a process (pids.max 1) until {@link LimitGroup.open}. A
   * launcher whose engine dies before handing it a run then fails at its first fork instead of starting a sandbox.
   */
  closed?: boolean;
  /**
   * On an out-of-memory kill, kill the whole group (cgroup v2 `memory.oom.group`; the default) rather than the one
   * process the kernel picks. A session's stateful sandbox turns it off: one kernel over the limit must not take
   * the runner and the session's other kernels and processes with it.
   */
  oomGroup?: boolean;
  /** Create the group under this session group (its CPU quota then bounds the group with its siblings). */
  parent?: LimitParent;
}

/** Limits of a session group: what all the groups under it share. */
export interface ParentLimits {
  /** CPU quota in CPUs for everything under the group together, however many runs it holds. */
  cpus: number;
  /**
   * Relative CPU weight of the group against its siblings and the engine (cgroup v2 `cpu.weight`, 1–10000, 100 =
   * a nice-0 process; v1 `cpu.shares` scaled to 1024). Default 100.
   */
  weight?: number;
}

/**
 * A session's group: a cgroup holding no process itself, whose CPU quota is shared by every run group created under
 * it ({@link GroupOptions.parent}), so concurrent runs of one session cannot take more CPU than one session may.
 */
export interface LimitParent {
  readonly name: string;
  /** Sets the group's CPU weight (see {@link ParentLimits.weight}); best effort, never throws. */
  setWeight(weight: number): void;
  /** Kills everything below it, removes its groups and itself. Idempotent; never throws. */
  destroy(): Promise<void>;
}

/** What a group saw, read after the run and before it is destroyed. */
export interface LimitGroupReport {
  oomKilled: boolean;
  /** How many processes the OOM killer took in the group so far. */
  oomKills: number;
  pidsLimitHit: boolean;
}

/**
 * One run's cgroup(s). The tier joins bubblewrap to the group while bubblewrap still waits for the run's options on
 * its args pipe, so nothing of the user's code ever runs outside the group.
 */
export interface LimitGroup {
  readonly name: string;
  /** Moves a process (its whole thread group) into the group; rejects when that fails (e.g. ESRCH). */
  join(pid: number): Promise<void>;
  /** Lifts the hold of a group created `closed`: its processes may fork up to the pids limit. Throws on failure. */
  open(): void;
  /** SIGKILLs everything still in the group and waits (briefly) until it is empty. */
  kill(): Promise<void>;
  report(): LimitGroupReport;
  /** Kills and removes the group. Idempotent; never throws. */
  destroy(): Promise<void>;
}

export type LimiterMode = 'cgroup-v2' | 'cgroup-v1' | 'none';

/**
 * Port for limits rlimits cannot give us. RLIMIT_NPROC is not enforced for host uid 0, and bubblewrap maps the
 * sandbox uid to the engine's, so pids, memory and CPU need cgroups. With `mode: 'none'` the tier still runs,
 * confined by namespaces and rlimits only, and says so in its availability details.
 */
export abstract class ProcessLimiter {
  abstract readonly mode: LimiterMode;
  /** Where the groups live, or why there are none; for operators. */
  abstract readonly description: string;
  /** Creates a group for one run; `undefined` in mode `none`. Throws `SandboxInternalError` on failure. */
  abstract create(name: string, limits: GroupLimits, options?: GroupOptions): LimitGroup | undefined;
  /**
   * Creates a session group to create run groups under; `undefined` where there is no CPU quota to share (mode
   * `none`, or no cpu controller): runs are then grouped flat, as before. Throws `SandboxInternalError` on failure.
   */
  createParent(_name: string, _limits: ParentLimits): LimitParent | undefined {
    return undefined;
  }
  /** Removes what the limiter itself created (best effort). */
  abstract dispose(): Promise<void>;
  /**
   * Kills what is left in the groups of engines that are no longer running and removes those groups; groups of
   * running engines are left alone. Returns the names removed. Default: nothing to reap.
   */
  async reapOrphans(): Promise<string[]> {
    return [];
  }
}
