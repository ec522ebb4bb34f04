import type { Logger } from '@nestjs/common';
import type { ResolvedSandboxOptions } from '../sandbox.options';
import type { PendingCleanups } from '../supervision/pending-cleanups';
import type { buildLauncherCommand } from './bwrap-command';
import { cgroupName, ENGINE_MARK_ENV, formatEngineMark } from './engine-mark';
import type { LaunchedProcess, ProcessLauncher } from './process-launcher';
import type { LimitGroup, ProcessLimiter } from './process-limiter';

export type LaunchCommand = ReturnType<typeof buildLauncherCommand>;

/**
 * A launched bubblewrap that is still reading its options, already inside its own cgroup. Slots are made ahead
 * of time (`warmSlots`) because spawning from a large Node process and moving a task between cgroups (which
 * waits for an RCU grace period) each cost milliseconds that would otherwise be paid by every run. The cgroup is
 * created closed (no fork) and opened only for the run: should the engine die, the parent-death signal kills the
 * launcher, and one that sees its options pipe close first cannot start a sandbox that nobody would ever end.
 */
export interface Slot {
  /** The launch command (interpreter, rlimits, confinement) is fixed at spawn; a slot fits runs with the same. */
  readonly key: string;
  readonly proc: LaunchedProcess;
  readonly group?: LimitGroup;
  /** Resolves once bubblewrap is in its cgroup; rejects if it could not be moved. */
  readonly ready: Promise<void>;
  exited: boolean;
}

/** The subprocess tier's launched-ahead sandboxes: at most `subprocess.warmSlots` idle, one per launch command. */
export class WarmSlots {
  private readonly idle: Slot[] = [];
  private closed = false;

  constructor(
    private readonly options: Pick<ResolvedSandboxOptions, 'subprocess' | 'runAs'>,
    private readonly launcher: ProcessLauncher,
    private readonly limiter: ProcessLimiter,
    private readonly cleanups: PendingCleanups,
    private readonly logger: Logger,
  ) {}

  /** An idle slot for `key`, or a new one. The caller owns it and must {@link release} it. */
  take(key: string, launch: LaunchCommand): Slot {
    for (;;) {
      const i = this.idle.findIndex((s) => s.key === key);
      if (i === -1) return this.create(key, launch);
      const [slot] = this.idle.splice(i, 1);
      if (!slot.exited) return slot;
      this.discard(slot);
    }
  }

  /** Keeps one idle slot for `key`, evicting the oldest others beyond `warmSlots`. */
  refill(key: string, launch: LaunchCommand): void {
    const max = this.options.subprocess.warmSlots;
    if (this.closed || max === 0 || this.idle.some((s) => s.key === key && !s.exited)) return;
    while (this.idle.length >= max) this.discard(this.idle.shift()!);
    try {
      this.idle.push(this.create(key, launch));
    } catch (err) {
      this.logger.warn(`could not prepare a warm sandbox: ${(err as Error).message}`);
    }
  }

  /** A used slot: kills what is left of it and removes its cgroup in the background. */
  release(slot: Slot): void {
    if (!slot.exited) slot.proc.killGroup();
    if (slot.group) this.cleanups.track(slot.group.destroy());
  }

  /** Discards every idle slot; no new one is made after. */
  close(): void {
    this.closed = true;
    for (const slot of this.idle.splice(0)) this.discard(slot);
  }

  /**
   * Launches bubblewrap in a fresh cgroup. It blocks reading the run's options, so it is moved into the cgroup
   * before it creates any process: everything in the sandbox is born inside it.
   */
  private create(key: string, { command, args }: LaunchCommand): Slot {
    // The engine's pid and start time in the name let a later engine tell leftovers of dead engines from live groups.
    const s = this.options.subprocess;
    const group = this.limiter.create(
      cgroupName(),
      { memoryBytes: s.memoryBytes, pids: s.pids, cpus: s.cpus },
      { closed: true },
    );
    let proc: LaunchedProcess;
    try {
      // Only the engine's mark, by which a successor finds launchers of a dead engine. The code's environment comes
      // only from `--setenv` in the options (`--clearenv`); the code can read the mark only as bubblewrap's own
      // (`/proc/1/environ`), like bubblewrap's command line: the engine's pid and start time, no secret.
      const runAs = this.options.runAs;
      proc = this.launcher.launch({
        command,
        args,
        env: { [ENGINE_MARK_ENV]: formatEngineMark() },
        cwd: '/',
        uid: runAs?.uid,
        gid: runAs?.gid,
      });
    } catch (err) {
      if (group) this.cleanups.track(group.destroy());
      throw err;
    }
    const pid = proc.pid;
    const ready = group && pid !== undefined ? group.join(pid) : Promise.resolve();
    ready.catch(() => undefined); // reported when the slot is used
    const slot: Slot = { key, proc, group, ready, exited: false };
    void proc.closed.then(() => (slot.exited = true));
    return slot;
  }

  private discard(slot: Slot): void {
    if (!slot.exited) slot.proc.killGroup();
    this.cleanups.track(slot.proc.closed);
    if (slot.group) this.cleanups.track(slot.group.destroy());
  }
}
