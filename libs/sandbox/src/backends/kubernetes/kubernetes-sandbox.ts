import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import type { TierAvailability } from '../../core/sandbox.types';
import { KubeAvailability } from './kube-availability';
import { KubeClient } from './kube-client';
import { KubeReaper } from './kube-reaper';
import { KUBE_CLIENT, KUBERNETES_OPTIONS } from './kubernetes.constants';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import { KubernetesBoxes } from './kubernetes-boxes';
import { OneOffRuns } from './one-off-runs';
import { KubeSetupCheck } from './kube-setup-check';
import { PodChannels } from './pod-channels';
import { PodLauncher, type PodStartFailure, realSleep } from './pod-launcher';
import { PodRuns } from './pod-runs';
import { networkPolicyManifest, sessionPodSpecHash } from './pod-spec';
import { RunnerRecovery } from './runner-recovery';
import { SessionPods } from './session-pods';
import { WarmPods, type WarmPodStats } from './warm-pods';

/** Numbers for metrics and `/health`. */
export interface KubernetesStats {
  warm?: WarmPodStats;
  claimed: number;
  claiming: number;
  maxSessions: number;
  lastClaimMs?: number;
}

/**
 * The Kubernetes backend as one object: the client, the warm pods, the session pods, the one-off runs, the reaper
 * and the availability probe, started and stopped together. The two tiers (`KubernetesPooledTier`,
 * `KubernetesOneOffTier`) are thin views of it, so Nest may instantiate them more than once.
 */
@Injectable()
export class KubernetesSandbox implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('KubernetesSandbox');
  readonly clock: Clock;
  readonly launcher: PodLauncher;
  readonly warm?: WarmPods;
  readonly sessions: SessionPods;
  readonly oneOff: OneOffRuns;
  readonly runs: PodRuns;
  readonly boxes: KubernetesBoxes;
  readonly probe: KubeAvailability;
  readonly reaper: KubeReaper;
  private started?: Promise<void>;
  private stopped = false;

  constructor(
    @Inject(KUBERNETES_OPTIONS) readonly options: ResolvedKubernetesOptions,
    @Inject(KUBE_CLIENT) readonly client: KubeClient,
    @Optional() @Inject(CLOCK) clock?: Clock,
  ) {
    this.clock = clock ?? systemClock;
    const nap = realSleep;
    this.launcher = new PodLauncher(client, options, this.clock, this.logger, nap);
    const limits = options.limits.pooled;
    if (options.image) {
      const hash = sessionPodSpecHash(options.image, limits, options);
      this.warm = new WarmPods(
        client,
        this.launcher,
        options,
        options.image,
        limits,
        hash,
        this.clock,
        this.logger,
      );
    }
    const recovery = new RunnerRecovery(client, options, this.clock, this.logger, nap);
    this.runs = new PodRuns(this.clock, options.runnerGraceMs, new PodChannels(this.logger));
    this.sessions = new SessionPods(
      client,
      options,
      this.launcher,
      this.warm,
      recovery,
      this.runs,
      this.clock,
      this.logger,
    );
    this.oneOff = new OneOffRuns(
      client,
      options,
      this.launcher,
      this.sessions,
      this.runs,
      recovery,
      this.clock,
      this.logger,
    );
    this.boxes = new KubernetesBoxes(this.sessions, limits.memoryBytes, this.runs.channels);
    this.probe = new KubeAvailability(client, options, this.clock);
    this.reaper = new KubeReaper(client, options.engineId, this.logger);
  }

  /**
   * The configuration against the cluster, before the engine starts (the module awaits it): a namespace that does
   * not exist, credentials the server refuses or rights the account lacks reject with `KubernetesSetupError` naming
   * the setting. A server that does not answer does not stop the engine (see `KubeSetupCheck`). Without an image the
   * tiers stay unavailable and nothing is checked.
   */
  async validate(): Promise<void> {
    if (!this.options.image) return;
    await new KubeSetupCheck(this.client, this.options, this.logger).run();
  }

  /** Starts in the background: boot never waits for the cluster (`validate` already checked what it could). */
  onModuleInit(): void {
    void this.start();
  }

  /**
   * Reaps leftovers of dead engines, makes sure the deny-all NetworkPolicy exists, starts the warm pods. Runs once per
   * success; a failure (cluster unreachable) lets the next `availability()` try again. Never rejects.
   */
  start(): Promise<void> {
    this.started ??= this.startOnce().catch((err: unknown) => {
      this.started = undefined;
      this.logger.warn(`Kubernetes sandbox backend could not start yet: ${(err as Error).message}`);
    });
    return this.started;
  }

  private async startOnce(): Promise<void> {
    if (this.stopped) return;
    if (!this.options.image) {
      this.logger.warn('no sandbox image configured for the Kubernetes tiers; they stay unavailable');
      return;
    }
    await this.client.ping();
    await this.reaper.reapDead();
    try {
      if (await this.client.ensureNetworkPolicy(networkPolicyManifest())) {
        this.logger.log(
          `created NetworkPolicy denying all traffic of sandbox pods in ${this.options.namespace}`,
        );
      }
    } catch (err) {
      this.logger.warn(`could not ensure the sandbox NetworkPolicy: ${(err as Error).message}`);
    }
    if (!this.stopped) this.warm?.start();
  }

  /** Both tiers' availability; a backend that could not start yet is started by the first positive answer. */
  async availability(): Promise<TierAvailability> {
    if (this.stopped || this.sessions.closed)
      return { available: false, reason: 'the Kubernetes backend is shutting down' };
    const result = await this.probe.current();
    if (!result.available) return result;
    await this.start();
    return { ...result, details: { ...result.details, ...this.stats() } };
  }

  /**
   * Why the latest pod of the sandbox image did not start (no later one did), for `/health`: the cluster answers and
   * is set up, yet cannot run the engine's pods (no node fits them, no scheduler, the image will not come).
   */
  podStartFailure(): PodStartFailure | undefined {
    return this.launcher.lastFailure();
  }

  stats(): KubernetesStats {
    const lastClaimMs = this.sessions.lastClaimMs;
    return {
      ...(this.warm && { warm: this.warm.stats() }),
      ...this.sessions.counts(),
      maxSessions: this.options.maxSessions,
      ...(lastClaimMs !== undefined && { lastClaimMs }),
    };
  }

  /** Kills every run, deletes every pod of this engine (sessions', warm and one-off ones, known or not). */
  async onApplicationShutdown(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.warm?.close();
    await this.oneOff.close();
    await this.sessions.close();
    while (this.launcher.inFlight.size > 0) await Promise.allSettled([...this.launcher.inFlight]);
    await this.warm?.deleteWarm().catch(() => undefined);
    await this.reaper.removeAll();
    this.client.close();
  }
}
