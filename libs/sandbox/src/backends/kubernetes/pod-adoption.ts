import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import type { RunnerResynced } from '../../core/runner/runner-protocol';
import type { KubeClient } from './kube-client';
import { deleteWhileStill } from './kube-reaper';
import type { PodInfo } from './kube-types';
import {
  DELETE_GRACE_SECONDS,
  K8S_ANNOTATIONS,
  K8S_LABELS,
  MANAGED_VALUE,
  SESSION_TIER_VALUE,
} from './kubernetes.constants';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import { type AttachOptions, type ReattachedRunner, reattachRunner, runnerStatus } from './pod-runner';
import { labelValue, selector } from './pod-spec';
import { SessionPod } from './session-pod';

/** Whose session pods this engine may take: its own earlier incarnation, a dead engine of its host, a dead replica. */
export type AdoptableOwner = (engineId: string) => boolean;

/** A session pod taken over, and what lives in its runner. */
export interface AdoptedPod {
  pod: SessionPod;
  state: RunnerResynced;
}

export type Reattach = (
  client: KubeClient,
  podName: string,
  options: AttachOptions,
  clock: Clock,
) => Promise<ReattachedRunner>;

const CLAIM_ATTEMPTS = 4;

/**
 * Session pods outlive their engine: a restarted engine (same data) or the replica that takes a dead one's sessions
 * over adopts each session's pod instead of deleting it, with its workspace, kernels and background processes.
 * Adopting is claiming the pod for this engine (its engine annotation and label, written at the version read: of two
 * engines adopting one pod exactly one wins) and re-attaching to its live runner with a resync (`reattachRunner`),
 * never a restart. A pod that cannot be adopted (gone, its runner dead or silent) is deleted once it is this
 * engine's; the session then gets a fresh pod as before.
 */
export class PodAdoption {
  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly reattach: Reattach = reattachRunner,
  ) {}

  /** The session's pod, adopted, or undefined when it has none this engine may take (or none could be adopted). */
  async adopt(sessionId: string, adoptable: AdoptableOwner): Promise<AdoptedPod | undefined> {
    let candidates: PodInfo[];
    try {
      candidates = await this.candidates(sessionId, adoptable);
    } catch (err) {
      this.logger.warn(
        `session ${sessionId}: could not look for its pod to adopt: ${(err as Error).message}`,
      );
      return undefined;
    }
    let adopted: AdoptedPod | undefined;
    for (const pod of candidates) {
      if (adopted) {
        // Two pods of one session (a claim raced a crash): the other one holds nothing this session will see.
        const owner = pod.annotations[K8S_ANNOTATIONS.engine];
        const still = (now: PodInfo) => now.annotations[K8S_ANNOTATIONS.engine] === owner;
        await deleteWhileStill(this.client, pod, still).catch(() => false);
        continue;
      }
      adopted = await this.adoptPod(sessionId, pod, adoptable);
    }
    return adopted;
  }

  /**
   * Deletes the claimed session pods of engines this one may take over whose session is not `known` (it ended, or
   * this engine's state never had it); resolves with their names. Never throws.
   */
  async reapOrphans(known: ReadonlySet<string>, adoptable: AdoptableOwner): Promise<string[]> {
    try {
      const pods = await this.client.listPods(
        selector({
          [K8S_LABELS.managed]: MANAGED_VALUE,
          [K8S_LABELS.tier]: SESSION_TIER_VALUE,
          [K8S_LABELS.state]: 'claimed',
        }),
      );
      const orphans = pods.filter((p) => {
        const owner = p.annotations[K8S_ANNOTATIONS.engine] ?? '';
        const session = p.annotations[K8S_ANNOTATIONS.session] ?? '';
        return !p.deleting && owner !== this.options.engineId && adoptable(owner) && !known.has(session);
      });
      const removed: string[] = [];
      await Promise.all(
        orphans.map(async (p) => {
          const owner = p.annotations[K8S_ANNOTATIONS.engine];
          const still = (now: PodInfo) => now.annotations[K8S_ANNOTATIONS.engine] === owner;
          if (await deleteWhileStill(this.client, p, still)) removed.push(p.name);
        }),
      );
      if (removed.length > 0)
        this.logger.log(
          `reaped ${removed.length} pod(s) of sessions that no longer exist: ${removed.join(', ')}`,
        );
      return removed;
    } catch (err) {
      this.logger.warn(`could not reap the pods of sessions that no longer exist: ${(err as Error).message}`);
      return [];
    }
  }

  /** Claimed pods of the session whose engine this one may take over, newest first. */
  private async candidates(sessionId: string, adoptable: AdoptableOwner): Promise<PodInfo[]> {
    const pods = await this.client.listPods(
      selector({
        [K8S_LABELS.managed]: MANAGED_VALUE,
        [K8S_LABELS.tier]: SESSION_TIER_VALUE,
        [K8S_LABELS.session]: labelValue(sessionId),
      }),
    );
    return pods
      .filter((p) => this.adoptableNow(p, sessionId, adoptable))
      .sort((a, b) => (b.createdAt ?? '').localeCompare(a.createdAt ?? ''));
  }

  private adoptableNow(p: PodInfo, sessionId: string, adoptable: AdoptableOwner): boolean {
    return (
      !p.deleting &&
      p.phase === 'Running' &&
      p.labels[K8S_LABELS.state] === 'claimed' &&
      p.annotations[K8S_ANNOTATIONS.session] === sessionId &&
      adoptable(p.annotations[K8S_ANNOTATIONS.engine] ?? '')
    );
  }

  private async adoptPod(
    sessionId: string,
    found: PodInfo,
    adoptable: AdoptableOwner,
  ): Promise<AdoptedPod | undefined> {
    const previous = found.annotations[K8S_ANNOTATIONS.engine] ?? '?';
    const claimed = await this.claim(found, sessionId, adoptable).catch((err: unknown) => {
      this.logger.warn(`session ${sessionId}: could not claim pod ${found.name}: ${(err as Error).message}`);
      return undefined;
    });
    if (!claimed) return undefined;
    const t0 = this.clock.monotonic();
    try {
      const containerId = runnerStatus(claimed)?.containerId;
      const { runner, state } = await this.reattach(
        this.client,
        claimed.name,
        {
          startTimeoutMs: this.options.runnerStartTimeoutMs,
          ...(containerId !== undefined && { containerId }),
        },
        this.clock,
      );
      const pod = new SessionPod(
        sessionId,
        claimed.name,
        claimed.uid,
        claimed.annotations[K8S_ANNOTATIONS.image] ?? this.options.image ?? '',
        runner,
        state.pid,
        this.clock.now(),
        false,
        true,
      );
      this.logger.log(
        `session ${sessionId}: adopted pod ${claimed.name} of engine ${previous} in ` +
          `${Math.round(this.clock.monotonic() - t0)} ms (${state.kernels.length} kernel(s), ` +
          `${state.procs.length} process(es) alive)`,
      );
      return { pod, state };
    } catch (err) {
      // Ours now, and of no use: deleted, and the session starts over in a fresh pod.
      this.logger.warn(
        `session ${sessionId}: could not re-attach to the runner of pod ${claimed.name} (${(err as Error).message}); ` +
          `deleting it: the session gets a new pod with an empty workspace`,
      );
      await this.client.deletePod(claimed.name, DELETE_GRACE_SECONDS).catch(() => false);
      return undefined;
    }
  }

  /**
   * Writes this engine into the pod at the version read; a version moved by a status update is read again and
   * retried while the pod is still adoptable, one claimed by another engine meanwhile is left to it.
   */
  private async claim(
    pod: PodInfo,
    sessionId: string,
    adoptable: AdoptableOwner,
  ): Promise<PodInfo | undefined> {
    const engineId = this.options.engineId;
    const labels = { [K8S_LABELS.engine]: labelValue(engineId) };
    const annotations = { [K8S_ANNOTATIONS.engine]: engineId };
    let current: PodInfo | undefined = pod;
    for (let i = 0; i < CLAIM_ATTEMPTS && current; i++) {
      if (!this.adoptableNow(current, sessionId, adoptable)) return undefined;
      if (await this.client.claim(current.name, current.resourceVersion, labels, annotations)) {
        return {
          ...current,
          labels: { ...current.labels, ...labels },
          annotations: { ...current.annotations, ...annotations },
        };
      }
      current = await this.client.readPod(pod.name);
    }
    return undefined;
  }
}
