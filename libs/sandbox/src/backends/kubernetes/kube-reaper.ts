import * as os from 'node:os';
import type { Logger } from '@nestjs/common';
import { engineDeadHere as sameHostDead } from '../../core/engine-instance';
import type { KubeClient } from './kube-client';
import type { PodInfo } from './kube-types';
import {
  K8S_ANNOTATIONS,
  K8S_LABELS,
  MANAGED_VALUE,
  DELETE_GRACE_SECONDS,
  SESSION_TIER_VALUE,
} from './kubernetes.constants';
import { engineSelector, labelValue, selector } from './pod-spec';

/** Calls made while shutting down wait at most this long each: a hung API server must not hold the engine open. */
const SHUTDOWN_CALL_MS = 5000;

/**
 * True when `engineId` (`<hostname>:<pid>:<start ticks>:<instance>`) names a process of this host that no longer
 * exists (or whose pid was reused). Ids of other hosts are never dead from here: on Kubernetes another replica of the
 * engine may own them and be alive.
 */
export const engineDeadHere: (engineId: string, hostname?: string) => boolean = sameHostDead;

/**
 * Removes what the Kubernetes tiers left behind (SECURITY.md #17): at start-up, the pods of engines that died on this
 * host, and of this very engine id, but for their sessions' pods (those hold workspaces: the engine that serves the
 * session next adopts them, and pods of sessions that no longer exist are reaped by `PodAdoption.reapOrphans`); at
 * shutdown, every pod of this engine. A pod another engine may have claimed
 * meanwhile (a warm one) is deleted only at the version seen, so a claim that won in between is never undone.
 *
 * Pods of engines of other hosts (other replicas) are left alone: only a successor on the same host can tell their
 * engine is dead. When the engine runs in the cluster, setting the engine's own Pod as the sandbox pods'
 * `ownerReference` would let the garbage collector do that instead (not done here: the test cluster has none).
 */
export class KubeReaper {
  constructor(
    private readonly client: KubeClient,
    private readonly engineId: string,
    private readonly logger: Logger,
    private readonly hostname: string = os.hostname(),
  ) {}

  /**
   * Deletes the leftovers of dead engines of this host and of this engine id (warm pods, one-off pods), not their
   * sessions' pods (`sessionPod`); resolves with their names.
   */
  async reapDead(): Promise<string[]> {
    const pods = await this.client.listPods(selector({ [K8S_LABELS.managed]: MANAGED_VALUE }));
    const dead = pods.filter((p) => {
      const owner = p.annotations[K8S_ANNOTATIONS.engine] ?? '';
      const ownerDead = owner === this.engineId || engineDeadHere(owner, this.hostname);
      return !p.deleting && ownerDead && !sessionPod(p);
    });
    const removed: string[] = [];
    await Promise.all(
      dead.map(async (p) => {
        const owner = p.annotations[K8S_ANNOTATIONS.engine];
        // Still that engine's: a claim by a live engine in between changes the owner, and then the pod stays.
        const still = (now: PodInfo) => now.annotations[K8S_ANNOTATIONS.engine] === owner;
        if (await deleteWhileStill(this.client, p, still)) removed.push(p.name);
      }),
    );
    if (removed.length > 0)
      this.logger.log(`reaped ${removed.length} pod(s) of dead engines: ${removed.join(', ')}`);
    return removed;
  }

  /**
   * Deletes every pod of engine `engineId` (a replica another replica declared dead: its lease ran out), warm or
   * claimed, on whatever host it ran; resolves with their names. A pod another engine claimed meanwhile stays.
   */
  async reapEngine(engineId: string): Promise<string[]> {
    const pods = await this.client.listPods(engineSelector(engineId));
    const removed: string[] = [];
    const still = (now: PodInfo) => now.annotations[K8S_ANNOTATIONS.engine] === engineId;
    await Promise.all(
      pods
        .filter((p) => !p.deleting && still(p))
        .map(async (p) => {
          if (await deleteWhileStill(this.client, p, still)) removed.push(p.name);
        }),
    );
    if (removed.length > 0)
      this.logger.log(`reaped ${removed.length} pod(s) of replica ${engineId}: ${removed.join(', ')}`);
    return removed;
  }

  /**
   * The session ended: deletes every pod labelled with it, whichever engine made it (a one-off pod of an engine that
   * died, a session pod another replica held), so that a session's delete leaves none; resolves with their names.
   * Never throws: a pod left by a dead engine is also reaped with that engine.
   */
  async removeSession(sessionId: string): Promise<string[]> {
    try {
      const labelled = await this.client.listPods(
        selector({ [K8S_LABELS.managed]: MANAGED_VALUE, [K8S_LABELS.session]: labelValue(sessionId) }),
      );
      // The label is a label-safe form (perhaps a hash): the annotation holds the exact id.
      const pods = labelled.filter(
        (p) => !p.deleting && p.annotations[K8S_ANNOTATIONS.session] === sessionId,
      );
      const removed: string[] = [];
      await Promise.all(
        pods.map(async (p) => {
          if (await this.client.deletePod(p.name, DELETE_GRACE_SECONDS)) removed.push(p.name);
        }),
      );
      return removed;
    } catch (err) {
      this.logger.warn(
        `could not delete the pods of session ${sessionId} (those of dead engines are reaped with them): ${(err as Error).message}`,
      );
      return [];
    }
  }

  /**
   * Deletes every pod labelled with this engine (shutdown), known or not: warm ones at the version seen (another
   * engine may be claiming them), the others at once. Never throws.
   */
  async removeAll(): Promise<string[]> {
    try {
      const pods = await withDeadline(this.client.listPods(engineSelector(this.engineId)), SHUTDOWN_CALL_MS);
      const ours = pods.filter((p) => p.annotations[K8S_ANNOTATIONS.engine] === this.engineId && !p.deleting);
      const removed: string[] = [];
      await Promise.allSettled(
        ours.map(async (p) => {
          const stillClaimable = (now: PodInfo) =>
            now.annotations[K8S_ANNOTATIONS.engine] === this.engineId && claimable(now);
          const deleted = claimable(p)
            ? deleteWhileStill(this.client, p, stillClaimable)
            : this.client.deletePod(p.name, DELETE_GRACE_SECONDS);
          if (await withDeadline(deleted, SHUTDOWN_CALL_MS)) removed.push(p.name);
        }),
      );
      return removed;
    } catch (err) {
      this.logger.warn(
        `could not delete this engine's pods at shutdown (the next start reaps them): ${(err as Error).message}`,
      );
      return [];
    }
  }
}

/** A session's pod (claimed): it holds the session's workspace, kernels and processes, for whoever adopts them. */
export function sessionPod(p: PodInfo): boolean {
  return (
    p.labels[K8S_LABELS.tier] === SESSION_TIER_VALUE &&
    p.labels[K8S_LABELS.state] === 'claimed' &&
    p.annotations[K8S_ANNOTATIONS.session] !== undefined
  );
}

/** A pod another engine could claim (warm, or being warmed). */
function claimable(p: PodInfo): boolean {
  const state = p.labels[K8S_LABELS.state];
  return state === 'warm' || state === 'starting';
}

/**
 * Deletes the pod only at a version at which `still` holds. A version that moved (a kubelet status update, or a claim
 * by another engine) is re-read: the pod is deleted at its new version while `still` holds, and left alone once it
 * does not (someone claimed it). Resolves whether it was deleted (or was already gone).
 */
export async function deleteWhileStill(
  client: KubeClient,
  pod: PodInfo,
  still: (now: PodInfo) => boolean,
  attempts = 4,
): Promise<boolean> {
  let current: PodInfo | undefined = pod;
  for (let i = 0; i < attempts; i++) {
    const version = { resourceVersion: current.resourceVersion };
    if (await client.deletePod(current.name, DELETE_GRACE_SECONDS, version)) return true;
    current = await client.readPod(pod.name);
    if (!current) return true;
    if (current.deleting || !still(current)) return false;
  }
  return false;
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
