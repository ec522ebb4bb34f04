import type { Logger } from '@nestjs/common';
import type { ResolvedSandboxOptions } from '../../core/sandbox.options';
import type { PendingCleanups } from '../../core/supervision/pending-cleanups';
import type { buildLauncherCommand } from './bwrap-command';
import { cgroupName, ENGINE_MARK_ENV, formatEngineMark } from './engine-mark';
import type { LaunchedProcess, ProcessLauncher } from './process-launcher';
import type { LimitGroup, ProcessLimiter } from './process-limiter';
import type { SessionGroups, SessionHold } from './session-groups';

export type LaunchCommand = ReturnType<typeof buildLauncherCommand>;

/**
 * A launched bubblewrap that is still reading its options, already inside its own cgroup. Slots are made ahead
 * of time (`warmSlots`) because spawning from a large Node process and moving a task between cgroups (which
 * waits for an RCU grace period) each cost milliseconds that would otherwise be paid by every run. The cgroup is
 * created closed (no fork) and opened only for the run: should the engine die, the parent-death signal kills the
 * launcher, and one that sees its options pipe close first cannot start a sandbox that nobody would ever end.
 * A slot is launched for a session, its group under that session's group (`SessionGroups`), since that is where
 * the session's next run needs it; a run of another session moves it into a group under its own session first.
 */
export interface Slot {
  /** The launch command (interpreter, rlimits, confinement) is fixed at spawn; a slot fits runs with the same. */
  readonly key: string;
  readonly proc: LaunchedProcess;
  /** The session it was launched for; undefined for runs of no session (the tier's probe). */
  readonly session?: string;
  readonly group?: LimitGroup;
  /** The slot's claim on its session's group, released once its own group is gone. */
  readonly hold?: SessionHold;
  /** Resolves once bubblewrap is in its cgroup; rejects if it could not be moved. */
  readonly ready: Promise<void>;
  exited: boolean;
}

/**
 * The subprocess tier's launched-ahead sandboxes: at most `subprocess.warmSlots` idle, one per launch command and
 * session.
 */
export class WarmSlots {
  private readonly idle: Slot[] = [];
  private closed = false;

  constructor(
    private readonly options: Pick<ResolvedSandboxOptions, 'subprocess' | 'runAs'>,
    private readonly launcher: ProcessLauncher,
    private readonly limiter: ProcessLimiter,
    private readonly sessions: SessionGroups,
    private readonly cleanups: PendingCleanups,
    private readonly logger: Logger,
  ) {}

  /**
   * An idle slot for `key` launched for `session`; else another session's, moved into `session`'s group; else a new
   * one. The caller owns it and must {@link release} it.
   */
  take(key: string, launch: LaunchCommand, session?: string): Slot {
    const own = this.pick((s) => s.key === key && s.session === session);
    if (own) return own;
    const other = session === undefined ? undefined : this.pick((s) => s.key === key);
    return other ? this.move(other, session!) : this.create(key, launch, session);
  }

  /** Keeps one idle slot for `key` and `session`, evicting the oldest others beyond `warmSlots`. */
  refill(key: string, launch: LaunchCommand, session?: string): void {
    const max = this.options.subprocess.warmSlots;
    const fits = (s: Slot) => s.key === key && s.session === session && !s.exited;
    if (this.closed || max === 0 || this.idle.some(fits)) return;
    while (this.idle.length >= max) this.discard(this.idle.shift()!);
    try {
      this.idle.push(this.create(key, launch, session));
    } catch (err) {
      this.logger.warn(`could not prepare a warm sandbox: ${(err as Error).message}`);
    }
  }

  /** A used slot: kills what is left of it and removes its cgroup in the background. */
  release(slot: Slot): void {
    if (!slot.exited) slot.proc.killGroup();
    this.removeGroup(slot);
  }

  /** The session ended: its idle slots go, so its session group can. */
  forget(session: string): void {
    for (let i = this.idle.length - 1; i >= 0; i--) {
      if (this.idle[i].session === session) this.discard(this.idle.splice(i, 1)[0]);
    }
  }

  /** Discards every idle slot; no new one is made after. */
  close(): void {
    this.closed = true;
    for (const slot of this.idle.splice(0)) this.discard(slot);
  }

  /** Takes the first live idle slot that `fits`, discarding dead ones on the way. */
  private pick(fits: (slot: Slot) => boolean): Slot | undefined {
    for (;;) {
      const i = this.idle.findIndex(fits);
      if (i === -1) return undefined;
      const [slot] = this.idle.splice(i, 1);
      if (!slot.exited) return slot;
      this.discard(slot);
    }
  }

  /**
   * Moves a slot launched for another session into a new (closed) group under `session`'s: one cgroup move, still
   * cheaper than a launch. Its old group, empty once the move is done, is removed then.
   */
  private move(slot: Slot, session: string): Slot {
    const { group, hold } = this.groupFor(session);
    const ready = slot.ready.then(() => {
      const pid = slot.proc.pid;
      return group && pid !== undefined ? group.join(pid) : undefined;
    });
    ready.catch(() => undefined); // reported when the slot is used
    void ready.finally(() => this.removeGroup(slot)).catch(() => undefined);
    const moved: Slot = { key: slot.key, proc: slot.proc, session, group, hold, ready, exited: slot.exited };
    void slot.proc.closed.then(() => (moved.exited = true));
    return moved;
  }

  /** A new closed group for one sandbox, under `session`'s group where there is a session. */
  private groupFor(session: string | undefined): { group?: LimitGroup; hold?: SessionHold } {
    const hold = session === undefined ? undefined : this.sessions.hold(session);
    const s = this.options.subprocess;
    try {
      const group = this.limiter.create(
        cgroupName(),
        { memoryBytes: s.memoryBytes, pids: s.pids, cpus: s.cpus },
        { closed: true, parent: hold?.parent },
      );
      return { group, hold };
    } catch (err) {
      hold?.release();
      throw err;
    }
  }

  /** Removes a slot's group in the background, then lets go of its session group. */
  private removeGroup({ group, hold }: Pick<Slot, 'group' | 'hold'>): void {
    if (group) this.cleanups.track(group.destroy().finally(() => hold?.release()));
    else hold?.release();
  }

  /**
   * Launches bubblewrap in a fresh cgroup. It blocks reading the run's options, so it is moved into the cgroup
   * before it creates any process: everything in the sandbox is born inside it.
   */
  private create(key: string, { command, args }: LaunchCommand, session: string | undefined): Slot {
    // The engine's pid and start time in the name let a later engine tell leftovers of dead engines from live groups.
    const { group, hold } = this.groupFor(session);
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
      this.removeGroup({ group, hold });
      throw err;
    }
    // bubblewrap waits for its options, which the engine writes only once `ready` has resolved.
    const ready = proc.started.then((pid) => (group && pid !== undefined ? group.join(pid) : undefined));
    ready.catch(() => undefined); // reported when the slot is used
    const slot: Slot = { key, proc, session, group, hold, ready, exited: false };
    void proc.closed.then(() => (slot.exited = true));
    return slot;
  }

  private discard(slot: Slot): void {
    if (!slot.exited) slot.proc.killGroup();
    this.cleanups.track(slot.proc.closed);
    this.removeGroup(slot);
  }
}
