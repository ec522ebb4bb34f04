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
 * the same pod (`stateful`). A job's egress is carried over the runner's attach stream (`PodChannels`): the pod
 * keeps no network. Jobs with a call `channel` are refused (`CALL_CHANNEL_UNSUPPORTED`).
 */
@Injectable()
export class KubernetesPooledTier extends SandboxTier {
  readonly name = 'pooled' as const;
  override readonly stateful: KubernetesBoxes;

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
    this.backend.checkJob(job);
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const pod = await sessions.podFor(job.sessionId, job.image);
    const limits = this.backend.options.limits.pooled;
    return sessions.serialise(pod, async () => ({
      ...(await this.backend.runs.run(
        sessions.target(pod),
        job,
        {
          memoryBytes: limits.memoryBytes,
          fileSizeBytes: limits.fileSizeBytes,
          memoryWords: sessions.memoryWords,
        },
        signal,
        started,
      )),
      containerId: pod.name,
    }));
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

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    this.backend.checkJob(job);
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
