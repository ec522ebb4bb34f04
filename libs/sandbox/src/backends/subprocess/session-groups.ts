import type { PendingCleanups } from '../../core/supervision/pending-cleanups';
import { cgroupName } from './engine-mark';
import type { LimitParent, ProcessLimiter } from './process-limiter';

/**
 * CPU weight of a session group holding one sandbox: v2 `cpu.weight` 100, a nice-0 process's. A session holding
 * more sandboxes at once gets this divided by their number, so a busy session weighs no more than an idle one.
 */
const BASE_WEIGHT = 100;

/** One holder's claim on its session's group. */
export interface SessionHold {
  /** The session's group; undefined where the limiter makes none (no cpu controller): runs are grouped flat. */
  readonly parent?: LimitParent;
  /** Ends this claim; the group is removed when the last claim on it ends. Idempotent. */
  release(): void;
}

interface Entry {
  readonly parent: LimitParent;
  holds: number;
}

/**
 * The subprocess tier's session cgroups (SECURITY.md: many concurrent actions of one session): every sandbox of a
 * session (each run, a sandbox launched ahead for it, its stateful sandbox with the kernels and background
 * processes) gets its group under one session group whose CPU quota (`subprocess.sessionCpus`) they share, so
 * eight concurrent actions of one session take one session's CPU, not eight actions' worth. The session group's CPU
 * weight falls as it holds more sandboxes: a session running eight busy actions competes for CPU as one, and a
 * bystander's short run is not queued behind it.
 *
 * A group lives while anything holds it: made with the first sandbox of a session, removed (with anything still
 * in it) when the last one ends, so an idle session leaves no cgroup. A later sandbox of the session makes a new
 * one. Each name carries the engine's mark, so a successor removes the groups of a dead engine with their runs.
 */
export class SessionGroups {
  private readonly held = new Map<string, Entry>();

  constructor(
    private readonly limiter: ProcessLimiter,
    /** The quota of each session, in CPUs. */
    private readonly cpus: number,
    private readonly cleanups: PendingCleanups,
  ) {}

  /** A claim on `sessionId`'s group, making it if there is none. Throws `SandboxInternalError` on failure. */
  hold(sessionId: string): SessionHold {
    let entry = this.held.get(sessionId);
    if (!entry) {
      const parent = this.limiter.createParent(cgroupName(), { cpus: this.cpus, weight: BASE_WEIGHT });
      if (!parent) return { release: () => undefined };
      entry = { parent, holds: 0 };
      this.held.set(sessionId, entry);
    }
    const e = entry;
    e.holds++;
    reweigh(e);
    let released = false;
    return {
      parent: e.parent,
      release: () => {
        if (released) return;
        released = true;
        if (--e.holds > 0) return reweigh(e);
        if (this.held.get(sessionId) === e) this.held.delete(sessionId);
        this.cleanups.track(e.parent.destroy());
      },
    };
  }

  /** Shutdown: every group goes, with whatever still holds it (the runs are being ended too). */
  close(): void {
    for (const entry of this.held.values()) this.cleanups.track(entry.parent.destroy());
    this.held.clear();
  }

  /** Sessions with a group now; for tests and diagnostics. */
  get size(): number {
    return this.held.size;
  }
}

function reweigh(entry: Entry): void {
  entry.parent.setWeight(Math.max(1, Math.round(BASE_WEIGHT / entry.holds)));
}
