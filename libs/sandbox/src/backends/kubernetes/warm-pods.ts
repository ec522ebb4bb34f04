import type { Logger } from '@nestjs/common';
import { type Clock, WarmTarget } from '@switchyard/common';
import type { RunnerHello } from '../../core/runner/runner-protocol';
import type { KubeClient } from './kube-client';
import type { PodInfo } from './kube-types';
import { KubernetesUnavailableError } from './kubernetes.errors';
import {
  K8S_ANNOTATIONS,
  K8S_LABELS,
  MANAGED_VALUE,
  SESSION_TIER_VALUE,
  type SessionPodState,
  DELETE_GRACE_SECONDS,
} from './kubernetes.constants';
import type { KubernetesLimits, ResolvedKubernetesOptions } from './kubernetes.options';
import { deleteWhileStill } from './kube-reaper';
import type { PodLauncher } from './pod-launcher';
import { runnerStatus } from './pod-runner';
import { claimLabels, engineSelector, podName, selector, sessionPodManifest } from './pod-spec';

const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 10_000;
/** A claim re-reads a pod whose version moved (the kubelet updated its status) at most this often before moving on. */
const CLAIM_ATTEMPTS = 3;

/** A warm pod of this engine, as last seen. */
interface WarmEntry {
  info: PodInfo;
  hello?: RunnerHello;
}

/** A warm pod now owned by a session (its labels say so). */
export interface ClaimedPod {
  info: PodInfo;
  /** The runner's greeting when its warmer recorded it (`switchyard.dev/runner`), for the runner's pid. */
  runnerPid?: number;
  /** It was warmed by another engine of the namespace. */
  fromOtherEngine: boolean;
}

export interface WarmPodStats {
  /** This engine's warm pods, ready to be claimed. */
  warm: number;
  /** Its warm pods being started (at most `kubernetes.starts` at once). */
  starting: number;
  /** The floor (`kubernetes.min`). */
  min: number;
  /** Warm pods it keeps now: the floor plus the latest burst of claims (`WarmTarget`), at most `max`. */
  target: number;
  max: number;
  consecutiveStartFailures: number;
  /** Claims served by a pod that was warm when the claim asked (this engine's or another's). */
  warmClaims: number;
  /** Claims served by a pod of this engine that finished starting while the claim waited for it. */
  waitedClaims: number;
  /** Of those, pods warmed by another engine. */
  otherEngineClaims: number;
  /** Claims that found a pod already claimed by someone else (the optimistic update lost). */
  lostRaces: number;
  lastStartError?: { message: string; at: string };
}

/** Is the pod a warm session pod whose runner container runs, not being deleted? */
export function isClaimable(pod: PodInfo, specHash: string): boolean {
  return (
    pod.phase === 'Running' &&
    !pod.deleting &&
    pod.labels[K8S_LABELS.state] === 'warm' &&
    pod.labels[K8S_LABELS.spec] === specHash &&
    runnerStatus(pod)?.state === 'running'
  );
}

/**
 * Warm session pods: this engine keeps a target of its own started (`WarmTarget`: `min`, plus the latest burst of
 * claims for `demandWindowMs`, at most `max` warm or starting; at most `starts` starting at once), each with its
 * runner woken and checked once, then detached, waiting for requests. Every engine of the namespace may claim any
 * warm pod of the same spec: a claim is an optimistic update of the pod's labels at the version it read (`claim`),
 * so of two engines racing for one pod exactly one wins; the loser re-reads and moves on. A claimed pod belongs to
 * its session from then on (labelled with it and its new engine), and this pool starts a replacement.
 *
 * The pool's state is the API's: pods another engine claimed drop out at the next claim or reconcile, which lists
 * this engine's warm pods every `reconcileIntervalMs`, deletes those above a target that fell (the window passed),
 * and refills.
 */
export class WarmPods {
  private readonly warm = new Map<string, WarmEntry>();
  private starting = 0;
  private waiting = 0;
  private closed = false;
  private timer?: NodeJS.Timeout;
  private readonly readyWaiters = new Set<() => void>();
  private failures = 0;
  private retryAt = 0;
  private retryTimer?: NodeJS.Timeout;
  private lastError?: { message: string; at: string };
  /** Counts failed starts, so that a claim waiting for a starting pod learns that it failed, and why. */
  private failedStarts = 0;
  private lastFailure?: unknown;
  private warmClaims = 0;
  private waitedClaims = 0;
  private otherEngineClaims = 0;
  private lostRaces = 0;
  private readonly target: WarmTarget;

  constructor(
    private readonly client: KubeClient,
    private readonly launcher: PodLauncher,
    private readonly options: ResolvedKubernetesOptions,
    private readonly image: string,
    private readonly limits: KubernetesLimits,
    readonly specHash: string,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.target = new WarmTarget(
      { min: options.min, max: options.max, windowMs: options.demandWindowMs },
      clock,
    );
  }

  /** Starts filling and the periodic reconcile. */
  start(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => void this.reconcile(), this.options.reconcileIntervalMs);
    this.timer.unref();
    void this.reconcile();
  }

  /**
   * A warm pod for `sessionId`, claimed: this engine's own first (oldest first), then any engine's of the same spec.
   * When none is warm but one of ours is starting (and no other claim waits for it), waits for it until `deadline`.
   * Resolves `undefined` when there is none: the caller starts a pod for the session itself.
   */
  async claim(sessionId: string, deadline: number): Promise<ClaimedPod | undefined> {
    const { labels, annotations } = claimLabels(this.options.engineId, sessionId);
    this.target.claimed();
    let waited = false;
    for (;;) {
      for (const [name, entry] of [...this.warm]) {
        this.warm.delete(name);
        const info = await this.tryClaim(entry.info, labels, annotations);
        if (info) return this.claimed(info, false, entry.hello?.pid, waited);
      }
      const others = await this.client.listPods(
        selector({
          [K8S_LABELS.managed]: MANAGED_VALUE,
          [K8S_LABELS.tier]: SESSION_TIER_VALUE,
          [K8S_LABELS.state]: 'warm',
          [K8S_LABELS.spec]: this.specHash,
        }),
      );
      others.sort((a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''));
      for (const pod of others) {
        if (!isClaimable(pod, this.specHash)) continue;
        const info = await this.tryClaim(pod, labels, annotations);
        if (info) {
          const ours = pod.annotations[K8S_ANNOTATIONS.engine] === this.options.engineId;
          this.warm.delete(pod.name);
          return this.claimed(info, !ours, runnerPidOf(pod), waited);
        }
      }
      // Nothing warm: the pool was one short (counted once per claim).
      if (!waited) this.target.missed();
      this.refill();
      const left = deadline - this.clock.monotonic();
      if (this.starting <= this.waiting || left <= 0) return undefined;
      const failedBefore = this.failedStarts;
      waited = true;
      this.waiting++;
      try {
        await this.nextReady(left);
      } finally {
        this.waiting--;
      }
      // The pod waited for did not start because of the cluster (no node, no image…): a pod started for this claim
      // would wait its whole start timeout to fail the same way, so the claim fails now, saying why.
      if (this.failedStarts !== failedBefore && this.lastFailure instanceof KubernetesUnavailableError) {
        throw this.lastFailure;
      }
    }
  }

  stats(): WarmPodStats {
    return {
      warm: this.warm.size,
      starting: this.starting,
      min: this.options.min,
      target: this.target.target(),
      max: this.options.max,
      consecutiveStartFailures: this.failures,
      warmClaims: this.warmClaims,
      waitedClaims: this.waitedClaims,
      otherEngineClaims: this.otherEngineClaims,
      lostRaces: this.lostRaces,
      ...(this.lastError && { lastStartError: this.lastError }),
    };
  }

  /** Stops refilling; the warm pods stay for the reaper / shutdown (`deleteWarm`). */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.retryTimer);
    for (const wake of this.readyWaiters) wake();
  }

  /**
   * Deletes this engine's warm pods (shutdown), each only at the version last seen: one another engine claimed
   * meanwhile is its session's now and stays.
   */
  async deleteWarm(): Promise<void> {
    const pods = await this.client.listPods(
      engineSelector(this.options.engineId, { [K8S_LABELS.tier]: SESSION_TIER_VALUE }),
    );
    const stillWarm = (p: PodInfo) =>
      p.labels[K8S_LABELS.state] !== 'claimed' &&
      p.annotations[K8S_ANNOTATIONS.engine] === this.options.engineId;
    await Promise.allSettled(pods.filter(stillWarm).map((p) => deleteWhileStill(this.client, p, stillWarm)));
    this.warm.clear();
  }

  /** Re-lists this engine's warm pods (the API is the truth), drops or deletes broken ones, then refills. */
  async reconcile(): Promise<void> {
    if (this.closed) return;
    try {
      const pods = await this.client.listPods(
        engineSelector(this.options.engineId, {
          [K8S_LABELS.tier]: SESSION_TIER_VALUE,
          [K8S_LABELS.state]: 'warm',
        }),
      );
      const seen = new Set<string>();
      for (const pod of pods) {
        if (pod.annotations[K8S_ANNOTATIONS.engine] !== this.options.engineId) continue;
        if (isClaimable(pod, this.specHash)) {
          seen.add(pod.name);
          const known = this.warm.get(pod.name);
          this.warm.set(pod.name, { info: pod, ...(known?.hello && { hello: known.hello }) });
        } else if (!pod.deleting && pod.labels[K8S_LABELS.spec] === this.specHash) {
          // Failed, or its runner container is not running (restarting, crash-looping): replaced.
          this.logger.warn(`warm pod ${pod.name} is not usable (${pod.phase}); replacing it`);
          void this.client
            .deletePod(pod.name, DELETE_GRACE_SECONDS, { resourceVersion: pod.resourceVersion })
            .catch(() => undefined);
        }
      }
      for (const name of [...this.warm.keys()]) if (!seen.has(name)) this.warm.delete(name);
      this.trim();
    } catch (err) {
      this.logger.debug(`warm pod reconcile failed: ${(err as Error).message}`);
    }
    this.refill();
  }

  /**
   * Deletes the oldest warm pods above the target (it fell: the burst that raised it left the window), each only at
   * the version seen, so one another engine claimed meanwhile stays. Not while a claim waits.
   */
  private trim(): void {
    const surplus = this.warm.size - this.target.target();
    // An engine without a pool (`min` 0) starts none: the warm pods it sees are not its to trim.
    if (surplus <= 0 || this.waiting > 0 || this.options.min === 0) return;
    const oldest = [...this.warm.values()]
      .sort((a, b) => (a.info.createdAt ?? '').localeCompare(b.info.createdAt ?? ''))
      .slice(0, surplus);
    for (const { info } of oldest) {
      this.warm.delete(info.name);
      void this.client
        .deletePod(info.name, DELETE_GRACE_SECONDS, { resourceVersion: info.resourceVersion })
        .catch(() => undefined);
    }
  }

  /**
   * Starts warm pods until the target is warm or starting (never past `max`, at most `starts` starting at once),
   * unless backing off after failures. Each start that ends calls it again.
   */
  refill(): void {
    if (this.closed) return;
    const have = this.warm.size + this.starting;
    const want = Math.min(
      Math.min(this.target.target(), this.options.max) - have,
      this.options.starts - this.starting,
    );
    if (want <= 0) return;
    const wait = this.retryAt - this.clock.monotonic();
    if (wait > 0) {
      if (!this.retryTimer) {
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.refill();
        }, wait);
        this.retryTimer.unref();
      }
      return;
    }
    for (let i = 0; i < want; i++) void this.startOne();
  }

  private claimed(
    info: PodInfo,
    fromOtherEngine: boolean,
    runnerPid: number | undefined,
    waited: boolean,
  ): ClaimedPod {
    if (waited) this.waitedClaims++;
    else this.warmClaims++;
    if (fromOtherEngine) this.otherEngineClaims++;
    this.refill();
    return { info, fromOtherEngine, ...(runnerPid !== undefined && { runnerPid }) };
  }

  /**
   * The optimistic update at the version seen. A conflict is re-read: the kubelet may only have updated the pod's
   * status (try again at the new version); if it is no longer warm, someone else claimed it.
   */
  private async tryClaim(
    pod: PodInfo,
    labels: Record<string, string>,
    annotations: Record<string, string>,
  ): Promise<PodInfo | undefined> {
    let current: PodInfo | undefined = pod;
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS && current; attempt++) {
      if (!isClaimable(current, this.specHash)) break;
      if (await this.client.claim(current.name, current.resourceVersion, labels, annotations)) {
        return {
          ...current,
          labels: { ...current.labels, ...labels },
          annotations: { ...current.annotations, ...annotations },
        };
      }
      current = await this.client.readPod(pod.name);
    }
    this.lostRaces++;
    return undefined;
  }

  private async startOne(): Promise<void> {
    this.starting++;
    const t0 = this.clock.monotonic();
    try {
      const launched = await this.launcher.launch(this.manifest(podName('session'), 'starting'));
      const name = launched.info.name; // another one when the node rejected the first (retried)
      const hello = launched.runner.hello;
      // Detached: the runner keeps its stdin (stdinOnce false) and waits for the claimer's attach.
      launched.runner.close();
      const info = await this.markWarm(name, hello);
      if (this.closed) {
        await this.client.deletePod(name, DELETE_GRACE_SECONDS, { resourceVersion: info.resourceVersion });
        return;
      }
      this.warm.set(name, { info, ...(hello && { hello }) });
      this.target.started(this.clock.monotonic() - t0);
      if (this.failures > 0) this.logger.log(`warm pods start again after ${this.failures} failure(s)`);
      this.failures = 0;
      for (const wake of this.readyWaiters) wake();
    } catch (err) {
      if (this.closed) return;
      this.failures++;
      this.failedStarts++;
      this.lastFailure = err;
      for (const wake of this.readyWaiters) wake();
      this.lastError = { message: (err as Error).message, at: this.clock.now().toISOString() };
      const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(this.failures - 1, 10));
      this.retryAt = this.clock.monotonic() + delay * (0.5 + Math.random() / 2);
      if (this.failures === 1 || this.failures % 20 === 0) {
        this.logger.warn(`warm pod start failed (${this.failures} in a row): ${(err as Error).message}`);
      }
    } finally {
      this.starting--;
      if (!this.closed) this.refill();
    }
  }

  /** `starting` → `warm`, with the runner's pid and protocol recorded; resolves with the pod at its new version. */
  private async markWarm(name: string, hello: RunnerHello | undefined): Promise<PodInfo> {
    const runner: Record<string, string> = hello
      ? { [K8S_ANNOTATIONS.runner]: JSON.stringify({ pid: hello.pid, protocol: hello.protocol }) }
      : {};
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const info = await this.client.readPod(name);
      if (!info || info.deleting) throw new Error(`pod ${name} disappeared while warming`);
      if (await this.client.claim(name, info.resourceVersion, { [K8S_LABELS.state]: 'warm' }, runner)) {
        const warmed = await this.client.readPod(name);
        if (!warmed) throw new Error(`pod ${name} disappeared while warming`);
        return warmed;
      }
    }
    await this.launcher.remove(name).catch(() => undefined);
    throw new Error(`pod ${name} kept changing while being marked warm`);
  }

  private manifest(name: string, state: SessionPodState) {
    return sessionPodManifest({
      name,
      image: this.image,
      engineId: this.options.engineId,
      limits: this.limits,
      options: this.options,
      state,
      specHash: this.specHash,
    });
  }

  private nextReady(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.readyWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.readyWaiters.add(done);
    });
  }
}

/** The runner pid a warmer recorded in the pod's annotation. */
export function runnerPidOf(pod: PodInfo): number | undefined {
  try {
    const parsed = JSON.parse(pod.annotations[K8S_ANNOTATIONS.runner] ?? 'null') as { pid?: unknown } | null;
    return typeof parsed?.pid === 'number' ? parsed.pid : undefined;
  } catch {
    return undefined;
  }
}
