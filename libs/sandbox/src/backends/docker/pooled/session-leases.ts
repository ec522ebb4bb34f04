import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../../../core/sandbox.errors';
import type { TierJob } from '../../../core/sandbox.types';
import type { PendingCleanups } from '../../../core/supervision/pending-cleanups';
import type { HostMounts } from './host-mounts';
import { PoolExhaustedError } from '../../../core/pooled.errors';
import type { ResolvedPooledOptions } from './pooled.options';
import { egressDirOf } from './container-config';
import type { PooledContainer, PooledContainerFactory } from './pooled-container';
import type { PooledReaper } from './pooled-reaper';
import type { WarmPool } from './warm-pool';

/** A session workspace as the host sees it: real path, device and inode (decimal, exact for 64-bit values). */
export interface HostWorkspace {
  path: string;
  id: [dev: string, ino: string];
}

/** A container while a session owns it. Runs on it are serialised. */
export interface Lease {
  readonly sessionId: string;
  readonly container: PooledContainer;
  /** The workspace currently mounted at /workspace; every run has the runner check it is what the container sees. */
  workspace: HostWorkspace;
  tail: Promise<unknown>;
  /** Runs queued or running. */
  busy: number;
  /** Kernels and background processes living in the container: it is not freed for idleness while any does. */
  pins: number;
  /** Fresh runs sent to its runner so far. */
  runs: number;
  idleTimer?: NodeJS.Timeout;
  released: boolean;
  /** Stops the session's egress proxy answering in this container's directory. */
  stopEgress?: () => Promise<void>;
}

/**
 * Which session holds which pooled container: the claim of a warm one at a session's first pooled action (with its
 * workspace mounted into it), the session's runs one at a time, and the end of the lease (release, idle timeout,
 * runner gone, failure), which destroys the container: it never serves another session.
 */
export class SessionLeases {
  private readonly sessions = new Map<string, Promise<Lease>>();
  private readonly leases = new Map<string, Lease>();
  /** Sessions that ended and whose release is under way: they no longer count against `maxSessions`. */
  private readonly ending = new Set<string>();
  private rootReady?: Promise<void>;
  private closing = false;
  /** Duration of the latest claim, in ms. */
  lastClaimMs?: number;

  constructor(
    private readonly options: ResolvedPooledOptions,
    private readonly factory: PooledContainerFactory,
    private readonly pool: WarmPool,
    private readonly mounts: HostMounts,
    private readonly reaper: PooledReaper,
    private readonly cleanups: PendingCleanups,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** The tier is shutting down: no new lease, and a run's failure is an abort, not a lost runner. */
  get closed(): boolean {
    return this.closing;
  }

  /** Containers held by sessions, and sessions waiting for their first one. */
  counts(): { claimed: number; claiming: number } {
    return { claimed: this.leases.size, claiming: this.sessions.size - this.leases.size };
  }

  /**
   * Marks the mount root as used by this engine (so no other engine's shutdown unmounts it) and makes it a shared
   * mount, once; a failure lets a later call try again.
   */
  ensureRoot(): Promise<void> {
    const root = this.options.mountRoot;
    this.rootReady ??= this.reaper
      .markRoot()
      .then(() => this.mounts.ensureSharedRoot(root))
      .catch((err: unknown) => {
        this.rootReady = undefined;
        throw new SandboxUnavailableError(
          `cannot make ${this.options.mountRoot} a shared mount point (pooled.mountRoot): ${(err as Error).message}`,
          {},
          { cause: err },
        );
      });
    return this.rootReady;
  }

  /** The session's lease, claiming a container for its first action or after its runner died. */
  async leaseFor(job: Pick<TierJob, 'sessionId' | 'workspaceDir' | 'egress' | 'image'>): Promise<Lease> {
    const existing = this.sessions.get(job.sessionId);
    if (existing) {
      const lease = await existing;
      if (lease.container.alive && !lease.released) return lease;
      // Its runner died between actions: the session starts over in a fresh container (its workspace is kept).
      if (this.sessions.get(job.sessionId) === existing) this.sessions.delete(job.sessionId);
      await this.retire(lease, 'runner gone').catch(() => undefined);
      return this.leaseFor(job);
    }
    if (this.holding() >= this.options.maxSessions) {
      throw new PoolExhaustedError(
        'POOL_SESSIONS_EXHAUSTED',
        `${this.options.maxSessions} sessions already hold a pooled container (the limit); end a session or raise ` +
          this.options.settingNames.maxSessions,
        { maxSessions: this.options.maxSessions },
      );
    }
    const entry = this.claim(job);
    this.sessions.set(job.sessionId, entry);
    entry.catch(() => {
      if (this.sessions.get(job.sessionId) === entry) this.sessions.delete(job.sessionId);
    });
    return entry;
  }

  /** The session's lease when it holds a container whose runner is alive, without claiming one. */
  current(sessionId: string): Lease | undefined {
    const lease = this.leases.get(sessionId);
    return lease && lease.container.alive && !lease.released ? lease : undefined;
  }

  /** Runs `run` on the lease after the runs queued before it; the lease's idle timer waits while any is queued. */
  async serialise<T>(lease: Lease, run: () => Promise<T>): Promise<T> {
    lease.busy++;
    clearTimeout(lease.idleTimer);
    const turn = lease.tail.then(run);
    lease.tail = turn.catch(() => undefined);
    try {
      return await turn;
    } finally {
      lease.busy--;
      if (lease.busy === 0) this.armIdleTimer(lease);
    }
  }

  /** The session ended: its container, released next, no longer counts against `maxSessions`. */
  fence(sessionId: string): void {
    if (this.sessions.has(sessionId)) this.ending.add(sessionId);
  }

  /** Destroys the session's container (killing a run in progress). Idempotent. */
  async release(sessionId: string): Promise<void> {
    this.ending.delete(sessionId);
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    this.sessions.delete(sessionId);
    const lease = await entry.catch(() => undefined);
    if (lease) await this.retire(lease, 'session released');
  }

  /** Sessions holding or claiming a container, but those that ended. */
  private holding(): number {
    let count = this.sessions.size;
    for (const sessionId of this.ending) if (this.sessions.has(sessionId)) count--;
    return count;
  }

  /** Shutdown: ends every lease; none is made after. */
  async close(): Promise<void> {
    this.closing = true;
    const entries = [...this.sessions.values()];
    this.sessions.clear();
    this.ending.clear();
    await Promise.allSettled(
      entries.map(async (entry) => {
        const lease = await entry.catch(() => undefined);
        if (lease) await this.retire(lease, 'shutdown');
      }),
    );
  }

  async resolveWorkspace(dir: string): Promise<HostWorkspace> {
    let real: string;
    let id: HostWorkspace['id'];
    try {
      real = await fs.promises.realpath(dir);
      const stat = await fs.promises.stat(real, { bigint: true });
      if (!stat.isDirectory()) throw new Error('not a directory');
      id = [stat.dev.toString(), stat.ino.toString()];
    } catch (err) {
      throw new SandboxInternalError(
        'WORKSPACE_MISSING',
        `session workspace ${dir} is unusable: ${(err as Error).message}`,
      );
    }
    const root = this.options.mountRoot;
    if (real === '/' || real === root || real.startsWith(`${root}/`) || root.startsWith(`${real}/`)) {
      throw new SandboxInternalError(
        'WORKSPACE_INVALID',
        `session workspace ${dir} overlaps the pooled mount root`,
      );
    }
    return { path: real, id };
  }

  /** Mounts the session's workspace anew when it moved (another path, or the directory was replaced). */
  async ensureWorkspace(lease: Lease, dir: string): Promise<void> {
    const workspace = await this.resolveWorkspace(dir);
    const { path, id } = lease.workspace;
    if (workspace.path !== path || workspace.id[0] !== id[0] || workspace.id[1] !== id[1]) {
      await this.remount(lease, workspace);
    }
  }

  private async remount(lease: Lease, workspace: HostWorkspace): Promise<void> {
    const { container } = lease;
    await this.mounts.unmount(container.mountPoint);
    await this.mounts.bind(workspace.path, container.mountPoint);
    lease.workspace = workspace;
    container.workspace = workspace.path;
  }

  /** The lease's runner failed: the lease ends and its container is destroyed; the session's next action claims anew. */
  async retireAfterFailure(lease: Lease): Promise<void> {
    const entry = this.sessions.get(lease.sessionId);
    if (entry && (await entry.catch(() => undefined)) === lease) this.sessions.delete(lease.sessionId);
    await this.retire(lease, 'runner failed').catch(() => undefined);
  }

  /**
   * Takes a warm container for the session and mounts its workspace into it. Its cost is one runner round trip: the
   * pool's test on borrow (the runner really spawns a process), during which the mount helper bind-mounts the
   * workspace. That the container sees the mount is not checked here with a round trip of its own: every run carries
   * the workspace's device and inode, and the runner refuses to start anything unless /workspace is that directory
   * (`RunnerRuns`), so no code runs in an unverified workspace.
   */
  private async claim({
    sessionId,
    workspaceDir,
    egress,
    image,
  }: Pick<TierJob, 'sessionId' | 'workspaceDir' | 'egress' | 'image'>): Promise<Lease> {
    const t0 = this.clock.monotonic();
    await this.ensureRoot();
    // The host's view of the workspace is resolved while the pool finds a container.
    const resolving = this.resolveWorkspace(workspaceDir);
    resolving.catch(() => undefined); // observed through `prepare`
    let tBorrowed = t0;
    let tMounted = t0;
    const prepare = async (candidate: PooledContainer): Promise<void> => {
      tBorrowed = this.clock.monotonic();
      await this.mounts.bind((await resolving).path, candidate.mountPoint);
      tMounted = this.clock.monotonic();
    };
    // Warm containers are of the default image; a session with its own (a template's) gets one made for it.
    const own = image !== undefined && image !== this.options.image;
    const container = await (own ? this.claimNew(image, prepare) : this.pool.claim(prepare)).catch(
      (err: unknown) => {
        throw claimError(err);
      },
    );
    const workspace = await resolving;
    if (this.closing) {
      await this.factory.destroy(container).catch((e: Error) => this.reaper.orphan(container, e));
      throw new SandboxUnavailableError('the pooled tier is shutting down');
    }
    container.sessionId = sessionId;
    container.workspace = workspace.path;
    // The session's way out, when it has one: its proxy answers in the container's own egress directory.
    let stopEgress: Lease['stopEgress'];
    if (egress) {
      try {
        stopEgress = await egress.listen(path.join(egressDirOf(container.mountPoint), 'proxy.sock'));
        await container.connection.egress();
      } catch (err) {
        await this.factory.destroy(container).catch((e: Error) => this.reaper.orphan(container, e));
        throw new SandboxInternalError(
          'EGRESS_SOCKET',
          `could not give the container its egress: ${(err as Error).message}`,
          {
            retriable: true,
            cause: err,
          },
        );
      }
    }
    const lease: Lease = {
      sessionId,
      container,
      workspace,
      tail: Promise.resolve(),
      busy: 0,
      pins: 0,
      runs: 0,
      released: false,
      ...(stopEgress && { stopEgress }),
    };
    this.leases.set(sessionId, lease);
    void container.connection.closed.then(() => this.onRunnerClosed(lease));
    this.armIdleTimer(lease);
    const done = this.clock.monotonic();
    this.lastClaimMs = done - t0;
    this.logger.debug(
      `session ${sessionId} claimed ${container.shortId} in ${(done - t0).toFixed(2)} ms (borrowed at ` +
        `${(tBorrowed - t0).toFixed(2)} ms, mounted at ${(tMounted - t0).toFixed(2)} ms, health check meanwhile)`,
    );
    return lease;
  }

  /**
   * A container of `image` made for the session (same factory, settings and runner checks as a warm one), claimed at
   * once: what a warm claim saves is this start (create, start, runner greeting and health check).
   */
  private async claimNew(
    image: string,
    prepare: (container: PooledContainer) => Promise<void>,
  ): Promise<PooledContainer> {
    const container = await this.factory.create(image);
    container.state = 'claimed';
    try {
      await prepare(container);
    } catch (err) {
      await this.factory.destroy(container).catch((e: Error) => this.reaper.orphan(container, e));
      throw err;
    }
    return container;
  }

  /** Ends the lease and destroys its container. */
  private async retire(lease: Lease, why: string): Promise<void> {
    lease.released = true;
    clearTimeout(lease.idleTimer);
    await lease.stopEgress?.().catch(() => undefined);
    if (this.leases.get(lease.sessionId) === lease) this.leases.delete(lease.sessionId);
    this.logger.debug(`session ${lease.sessionId}: container ${lease.container.shortId} destroyed (${why})`);
    try {
      await this.factory.destroy(lease.container);
      this.reaper.destroyed(lease.container);
    } catch (err) {
      this.reaper.orphan(lease.container, err as Error);
      throw new SandboxInternalError(
        'POOLED_RELEASE',
        `could not remove the container of session ${lease.sessionId}: ${(err as Error).message}`,
        { retriable: true, cause: err },
      );
    }
  }

  /** Keeps the lease from idling out while a kernel or process lives in its container; answers the release. */
  pin(lease: Lease): () => void {
    lease.pins++;
    clearTimeout(lease.idleTimer);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--lease.pins === 0 && lease.busy === 0) this.armIdleTimer(lease);
    };
  }

  private armIdleTimer(lease: Lease): void {
    clearTimeout(lease.idleTimer);
    if (lease.released || lease.pins > 0) return;
    lease.idleTimer = setTimeout(() => {
      if (lease.busy > 0 || lease.pins > 0 || lease.released) return;
      this.logger.log(
        `session ${lease.sessionId} idle for ${this.options.sessionIdleTimeoutMs} ms; container freed`,
      );
      void this.dropIdle(lease);
    }, this.options.sessionIdleTimeoutMs);
    lease.idleTimer.unref();
  }

  private async dropIdle(lease: Lease): Promise<void> {
    const entry = this.sessions.get(lease.sessionId);
    if (entry && (await entry.catch(() => undefined)) === lease) this.sessions.delete(lease.sessionId);
    this.cleanups.track(this.retire(lease, 'idle'));
  }

  /** The runner of a claimed container went away. During a run, the run reports it; between runs it is cleaned up here. */
  private onRunnerClosed(lease: Lease): void {
    if (lease.released || lease.busy > 0 || this.closing) return;
    this.logger.warn(
      `runner of session ${lease.sessionId}'s container ${lease.container.shortId} died while idle; ` +
        `the next action gets a fresh container`,
    );
    void this.dropIdle(lease);
  }
}

/** Our own errors pass through; anything else (a runner timeout, generic-pool closing) becomes a typed one. */
function claimError(err: unknown): SandboxError {
  if (err instanceof SandboxError) return err;
  return new SandboxInternalError(
    'POOLED_CLAIM',
    `could not give the session a pooled container: ${(err as Error).message}`,
    { retriable: true, cause: err },
  );
}
