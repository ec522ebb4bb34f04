import type { PodRunner } from './pod-runner';

/**
 * A session's pod while the session holds it: the pod (and its `/workspace` emptyDir) lives as long as the session;
 * its runner may die and be restarted by the kubelet, the engine then re-attaches (`runner` is replaced). Runs, tar
 * copies and the one-off tier's copy in and out are serialised on `tail`.
 */
export class SessionPod {
  /** The attached runner; `alive` false once its connection closed (runner killed, OOM, connection dropped). */
  runner: PodRunner;
  /** The runner's pid inside the pod (from its greeting), to kill a runner that hangs. */
  runnerPid?: number;
  /** Device and inode of `/workspace` inside the pod, recorded at claim; every run names them. */
  readonly workspace: [dev: string, ino: string];
  tail: Promise<unknown> = Promise.resolve();
  /** Runs (and copies) queued or running. */
  busy = 0;
  /** Operations started on `tail` so far: what tells whether anything ran in the pod since a given one. */
  ops = 0;
  /**
   * The snapshot the runner took after the latest tier run (`RunTarget.walked`), the operation it ended and its
   * bounds: the code action's snapshot after its run, unless something else ran in the pod since.
   */
  walked?: { answer: Record<string, unknown>; op: number; bounds: string };
  /** Kernels and background processes of the session use the runner (for stats; the pod is never idled out). */
  pins = 0;
  released = false;
  /** Set while the engine waits for the kubelet to restart the runner and re-attaches; shared by every caller. */
  recovering?: Promise<void>;
  /** Why the runner was lost last, for logs. */
  lostReason?: string;
  /** When it was claimed (`clock.now()`), for operators. */
  readonly claimedAt: string;

  constructor(
    readonly sessionId: string,
    readonly name: string,
    readonly uid: string,
    readonly image: string,
    runner: PodRunner,
    runnerPid: number | undefined,
    claimedAt: Date,
    /** It came from the warm pool (rather than started for the session). */
    readonly warm: boolean,
    /** Taken over from an engine that went away, its runner and what lived in it kept (`PodAdoption`). */
    readonly adopted = false,
  ) {
    this.runner = runner;
    this.workspace = runner.workspace;
    if (runnerPid !== undefined) this.runnerPid = runnerPid;
    this.claimedAt = claimedAt.toISOString();
  }

  /** The runner answers: not released, its connection open. */
  get alive(): boolean {
    return !this.released && this.runner.alive;
  }
}
