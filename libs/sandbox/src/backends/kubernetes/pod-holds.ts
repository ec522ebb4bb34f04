import { callingAction } from '../../core/call-scope';
import type { RunTarget } from './pod-runs';
import type { SessionPod } from './session-pod';

/**
 * Per session pod, the runs under way that hold it and may make calls (a skill's body: a job with a call channel), by
 * action id, with the workspace each run sees (the pod's, or a one-off pod's copy of it). A call of such an action
 * (`callingAction`: the engine's record, never the pod's word) is served in that workspace, beside the run, instead
 * of queueing behind the run that waits for it (`SessionPods.withPod`).
 */
export class PodHolds {
  private readonly holds = new WeakMap<SessionPod, Map<string, RunTarget>>();

  /** `fn`, with action `actionId`'s run holding `pod` with `target`'s workspace until `fn` settles. */
  async holding<T>(pod: SessionPod, actionId: string, target: RunTarget, fn: () => Promise<T>): Promise<T> {
    let holds = this.holds.get(pod);
    if (!holds) this.holds.set(pod, (holds = new Map<string, RunTarget>()));
    holds.set(actionId, target);
    try {
      return await fn();
    } finally {
      if (holds.get(actionId) === target) holds.delete(actionId);
    }
  }

  /**
   * The target the calling action's own run holds the pod with, for runs nested in that run (no walk of their own:
   * the holding run's walk after it sees their changes), or none: not a call, or its caller holds no run here.
   */
  heldFor(pod: SessionPod): RunTarget | undefined {
    const caller = callingAction();
    const held = caller === undefined ? undefined : this.holds.get(pod)?.get(caller);
    if (!held) return undefined;
    const { walkAfter: _walkAfter, walked: _walked, ...rest } = held;
    return { ...rest, nested: true };
  }

  /** How many runs hold the pod. */
  count(pod: SessionPod): number {
    return this.holds.get(pod)?.size ?? 0;
  }
}
