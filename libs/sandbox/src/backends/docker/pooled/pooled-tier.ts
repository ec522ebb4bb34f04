import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import { DOCKER_CLIENT, type DockerClient } from '../docker-client';
import { SandboxUnavailableError } from '../../../core/sandbox.errors';
import { SandboxTier } from '../../../core/sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../../../core/sandbox.types';
import { emptyResult } from '../../../core/supervision/limit-messages';
import { PendingCleanups } from '../../../core/supervision/pending-cleanups';
import { HostMounts } from './host-mounts';
import { POOLED_OPTIONS } from './pooled.constants';
import type { ResolvedPooledOptions } from './pooled.options';
import { PooledContainerFactory } from './pooled-container';
import { PooledBoxes } from './pooled-boxes';
import { PooledImageProbe } from './pooled-image-probe';
import { PooledReaper } from './pooled-reaper';
import { RunnerRuns } from './runner-runs';
import { SessionLeases } from './session-leases';
import { WarmPool, type WarmPoolStats } from './warm-pool';

/** The manager asks before every action; a positive answer is reused this long (a negative one never). */
const AVAILABLE_TTL_MS = 2000;

/** Pool numbers for metrics: the warm pool plus the containers held by sessions. */
export interface PooledStats extends WarmPoolStats {
  /** Containers held by sessions. */
  claimed: number;
  /** Sessions waiting for their first container. */
  claiming: number;
  maxSessions: number;
  /** Duration of the latest claim (health check of a warm container + workspace mount), in ms. */
  lastClaimMs?: number;
}

/**
 * The pooled tier: warm containers (see `WarmPool`), each claimed by the first pooled action of a session and
 * then serving only that session until `releaseSession`, `pooled.sessionIdleTimeoutMs` of inactivity, or its
 * runner dies (`SessionLeases`). Such a container is destroyed, never returned to the pool, so nothing (files in
 * /tmp, processes, shared memory) crosses from one session to another.
 *
 * The session workspace is shared, not copied: each container bind-mounts its own empty host directory at
 * /workspace with `rslave` propagation, under a mount root the engine made a shared mount; at claim the engine
 * bind-mounts the session workspace onto that directory on the host, and the mount propagates into the container.
 * Only mounts inside a container's own directory reach it, so it sees exactly its session's workspace, live in
 * both directions. Each run names the workspace's device and inode and the runner starts nothing unless
 * /workspace is that directory.
 *
 * Runs go to the container's runner over its attached stdin/stdout, one at a time: no `docker exec` per action
 * (`RunnerRuns`). Leftovers of dead engines, and of this one at shutdown, are removed by `PooledReaper`.
 */
@Injectable()
export class PooledTier extends SandboxTier implements OnModuleInit, OnApplicationShutdown {
  readonly name = 'pooled' as const;
  private readonly logger = new Logger(PooledTier.name);
  private readonly clock: Clock;
  private readonly factory: PooledContainerFactory;
  private readonly pool: WarmPool;
  private readonly cleanups = new PendingCleanups(this.logger, 'pooled cleanup');
  private readonly reaper: PooledReaper;
  private readonly leases: SessionLeases;
  private readonly runs: RunnerRuns;
  private readonly images: PooledImageProbe;
  /** Sessions' containers as the boxes of their kernels and background processes. */
  override readonly stateful: PooledBoxes;
  private availableAt?: { at: number; result: TierAvailability };
  private started = false;

  constructor(
    @Inject(POOLED_OPTIONS) private readonly options: ResolvedPooledOptions,
    @Inject(DOCKER_CLIENT) docker: DockerClient,
    mounts: HostMounts,
    @Optional() @Inject(CLOCK) clock?: Clock,
  ) {
    super();
    this.clock = clock ?? systemClock;
    this.factory = new PooledContainerFactory(options, docker, mounts, this.clock);
    this.pool = new WarmPool(this.factory, options, this.clock);
    this.reaper = new PooledReaper(options, docker, mounts, this.factory, this.clock, this.logger);
    this.leases = new SessionLeases(
      options,
      this.factory,
      this.pool,
      mounts,
      this.reaper,
      this.cleanups,
      this.clock,
      this.logger,
    );
    this.runs = new RunnerRuns(options, docker, this.leases, this.clock, this.logger);
    this.images = new PooledImageProbe(options, docker, this.clock);
    this.stateful = new PooledBoxes(this.leases, options.limits.memoryBytes);
  }

  /** Reaps leftovers of dead engines, prepares the mount root and starts warming containers. Never throws. */
  async onModuleInit(): Promise<void> {
    if (this.started || !this.options.image) {
      if (!this.options.image) this.logger.warn('pooled tier has no sandbox image; it stays unavailable');
      return;
    }
    this.started = true;
    try {
      await this.leases.ensureRoot();
    } catch (err) {
      this.logger.error(`pooled tier cannot prepare ${this.options.mountRoot}: ${(err as Error).message}`);
      return;
    }
    await this.reaper.reapOnce();
    this.pool.start();
  }

  async availability(): Promise<TierAvailability> {
    if (this.leases.closed) return { available: false, reason: 'the pooled tier is shutting down' };
    const cached = this.availableAt;
    if (cached && this.clock.monotonic() - cached.at < AVAILABLE_TTL_MS) {
      return { ...cached.result, details: { ...cached.result.details, pool: this.stats() } };
    }
    const result = await this.probe();
    this.availableAt = result.available ? { at: this.clock.monotonic(), result } : undefined;
    return result;
  }

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = this.clock.monotonic();
    if (this.leases.closed) throw new SandboxUnavailableError('the pooled tier is shutting down');
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const lease = await this.leases.leaseFor(job);
    return this.leases.serialise(lease, async () => ({
      ...(await this.runs.run(lease, job, signal, started)),
      containerId: lease.container.id,
    }));
  }

  override fenceSession(sessionId: string): void {
    this.leases.fence(sessionId);
  }

  /** Destroys the session's container (killing a run in progress) and unmounts its workspace. Idempotent. */
  releaseSession(sessionId: string): Promise<void> {
    return this.leases.release(sessionId);
  }

  /** Warm pool and session numbers, for metrics. */
  stats(): PooledStats {
    const lastClaimMs = this.leases.lastClaimMs;
    return {
      ...this.pool.stats(),
      ...this.leases.counts(),
      maxSessions: this.options.maxSessions,
      ...(lastClaimMs !== undefined && { lastClaimMs }),
    };
  }

  /** Every container this engine holds, for operators and tests. */
  containers(): Array<{ id: string; state: string; alive: boolean; sessionId?: string; runnerPid: number }> {
    return [...this.factory.live.values()].map((c) => ({
      id: c.id,
      state: c.state,
      alive: c.alive,
      runnerPid: c.hello.pid,
      ...(c.sessionId !== undefined && { sessionId: c.sessionId }),
    }));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.leases.close();
    await this.pool.close();
    while (this.factory.creating.size > 0) await Promise.allSettled([...this.factory.creating]);
    await this.cleanups.drain();
    await this.reaper.removeAll(this.started);
    this.factory.closeHosts();
  }

  private async probe(): Promise<TierAvailability> {
    const problem = await this.images.problem();
    if (problem) return problem;
    try {
      await this.leases.ensureRoot();
    } catch (err) {
      return { available: false, reason: (err as Error).message };
    }
    // Docker may have come back after a failed boot: finish what start-up could not do.
    if (!this.started) await this.onModuleInit();
    else void this.reaper.reapOnce();
    const o = this.options;
    const stats = this.stats();
    const details = { image: o.image, imageSource: o.imageSource, limits: o.limits, pool: stats };
    if (stats.available === 0 && stats.consecutiveCreateFailures >= 3) {
      return {
        available: false,
        reason: `warm containers fail to start: ${stats.lastCreateError?.message ?? 'unknown error'}`,
        details,
      };
    }
    return { available: true, details };
  }
}
