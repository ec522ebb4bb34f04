import { Inject, Injectable } from '@nestjs/common';
import { SandboxUnavailableError } from '../../core/sandbox.errors';
import { SandboxTier } from '../../core/sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../../core/sandbox.types';
import { emptyResult } from '../../core/supervision/limit-messages';
import type { KubernetesBoxes } from './kubernetes-boxes';
import { KubernetesSandbox } from './kubernetes-sandbox';

/**
 * The pooled tier on Kubernetes (`pooled`): a run goes to the session's pod (claimed from warm pods at the session's
 * first use, held until the session is released) through its runner, exactly as the Docker pooled tier runs in a
 * container. The pod holds `/workspace`: `job.workspaceDir` is not used. Kernels and background processes live in
 * the same pod (`stateful`). A job's egress and call channel are carried over the runner's attach stream
 * (`PodChannels`): the pod keeps no network. A job with a call channel (a skill's body) holds the pod for its calls,
 * which run beside it (`SessionPods.holding`, `withPod`).
 */
@Injectable()
export class KubernetesPooledTier extends SandboxTier {
  readonly name = 'pooled' as const;
  override readonly stateful: KubernetesBoxes;
  /** Fresh runs sent to each session pod so far: from its second, the runner keeps a python started for the next. */
  private readonly runsIn = new WeakMap<object, number>();

  constructor(@Inject(KubernetesSandbox) private readonly backend: KubernetesSandbox) {
    super();
    this.stateful = backend.boxes;
  }

  availability(): Promise<TierAvailability> {
    return this.backend.availability();
  }

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = this.backend.clock.monotonic();
    const sessions = this.backend.sessions;
    if (sessions.closed) throw new SandboxUnavailableError('the Kubernetes pooled tier is shutting down');
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const pod = await sessions.podFor(job.sessionId, job.image);
    const limits = this.backend.options.limits.pooled;
    const before = this.runsIn.get(pod) ?? 0;
    this.runsIn.set(pod, before + 1);
    // Serialised with the session's other work, or (a skill's nested skill) beside the run of the skill that called.
    return sessions.withPod(pod, async (target) => {
      const run = () =>
        this.backend.runs.run(
          target,
          job,
          {
            memoryBytes: limits.memoryBytes,
            fileSizeBytes: limits.fileSizeBytes,
            memoryWords: sessions.memoryWords,
          },
          signal,
          started,
          before > 0,
        );
      const result = job.channel ? await sessions.holding(pod, job.actionId, target, run) : await run();
      return { ...result, containerId: target.podName };
    });
  }

  override fenceSession(sessionId: string): void {
    this.backend.sessions.fence(sessionId);
  }

  /** Deletes the session's pod (its workspace, kernels and processes with it). Idempotent. */
  releaseSession(sessionId: string): Promise<void> {
    return this.backend.sessions.release(sessionId);
  }
}

/**
 * The one-off tier on Kubernetes (`container`): a pod per action (the configured RuntimeClass), given a copy of the
 * session pod's workspace, its changes copied back after the run, deleted always (see `OneOffRuns`).
 */
@Injectable()
export class KubernetesOneOffTier extends SandboxTier {
  readonly name = 'container' as const;

  constructor(@Inject(KubernetesSandbox) private readonly backend: KubernetesSandbox) {
    super();
  }

  availability(): Promise<TierAvailability> {
    return this.backend.availability();
  }

  run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    return this.backend.oneOff.run(job, signal);
  }

  /** Kills the session's one-off runs, then deletes its session pod and any other pod labelled with it. Idempotent. */
  async releaseSession(sessionId: string): Promise<void> {
    await this.backend.oneOff.releaseSession(sessionId);
    await this.backend.sessions.release(sessionId);
    // Then whatever pod of the session this engine does not hold (SECURITY.md #17).
    await this.backend.reaper.removeSession(sessionId);
  }
}
