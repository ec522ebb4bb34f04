import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { OutputCollector } from '../output-collector';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../sandbox.errors';
import { SandboxTier } from '../sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../sandbox.types';
import {
  DOCKER_CLIENT,
  type ContainerSummary,
  type DockerCallOptions,
  type DockerClient,
} from '../container/docker-client';
import { POOLED_LABELS, POOLED_TIER_LABEL } from './container-config';
import { HostMounts } from './host-mounts';
import { POOLED_OPTIONS } from './pooled.constants';
import { PoolExhaustedError, RunnerLostError } from './pooled.errors';
import { PooledContainerFactory, type PooledContainer } from './pooled-container';
import { engineAliveHere, engineOnThisHost } from '../container/container.options';
import { dockerUnreachable, SANDBOX_IMAGE_MISSING } from '../container/docker-availability';
import type { ResolvedPooledOptions } from './pooled.options';
import { RunnerRefusedError, type RunnerExit } from './runner-connection';
import { WarmPool, type WarmPoolStats } from './warm-pool';

/** The runner may forward this much past the byte cap, so redaction (which can shorten text) still sees enough. */
const CAP_SLACK_BYTES = 64 * 1024;
const PING_TIMEOUT_MS = 2000;
const IMAGE_CHECK_TTL_MS = 30_000;
/** The manager asks before every action; a positive answer is reused this long (a negative one never). */
const AVAILABLE_TTL_MS = 2000;
/** A directory under the mount root with no container is swept only once it is this old (one may be starting). */
const STRAY_DIR_AGE_MS = 5 * 60_000;
/** Docker calls made at shutdown wait at most this long: a hung daemon must not hold the engine open. */
const SHUTDOWN_DOCKER_CALL_MS = 5000;
const SIGXCPU = os.constants.signals.SIGXCPU;
const SIGXFSZ = os.constants.signals.SIGXFSZ;

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

/** A session workspace as the host sees it: real path, device and inode (decimal, exact for 64-bit values). */
interface HostWorkspace {
  path: string;
  id: [dev: string, ino: string];
}

/** A container while a session owns it. Runs on it are serialised. */
interface Lease {
  readonly sessionId: string;
  readonly container: PooledContainer;
  /** The workspace currently mounted at /workspace; every run has the runner check it is what the container sees. */
  workspace: HostWorkspace;
  tail: Promise<unknown>;
  /** Runs queued or running. */
  busy: number;
  idleTimer?: NodeJS.Timeout;
  released: boolean;
}

/**
 * The pooled tier: warm containers (see `WarmPool`), each claimed by the first pooled action of a session and
 * then serving only that session until `releaseSession`, `pooled.sessionIdleTimeoutMs` of inactivity, or its
 * runner dies. Such a container is destroyed, never returned to the pool, so nothing (files in /tmp, processes,
 * shared memory) crosses from one session to another.
 *
 * The session workspace is shared, not copied: each container bind-mounts its own empty host directory at
 * /workspace with `rslave` propagation, under a mount root the engine made a shared mount; at claim the engine
 * bind-mounts the session workspace onto that directory on the host, and the mount propagates into the container.
 * Only mounts inside a container's own directory reach it, so it sees exactly its session's workspace, live in
 * both directions. Each run names the workspace's device and inode and the runner starts nothing unless
 * /workspace is that directory.
 *
 * Runs go to the container's runner (docker/sandbox/runner/runner.py) over its attached stdin/stdout, one at a
 * time: no `docker exec` per action. The runner enforces the timeout and output caps and kills every process the
 * run left; the engine keeps the exact caps and redaction (`OutputCollector`) and a hard deadline of
 * timeout + `runnerGraceMs`, past which the container is destroyed.
 */
@Injectable()
export class PooledTier extends SandboxTier implements OnModuleInit, OnApplicationShutdown {
  readonly name = 'pooled' as const;
  private readonly logger = new Logger(PooledTier.name);
  private readonly factory: PooledContainerFactory;
  private readonly pool: WarmPool;
  private readonly sessions = new Map<string, Promise<Lease>>();
  private readonly leases = new Map<string, Lease>();
  /** Containers whose destruction failed (Docker gone); retried by the reaper and at shutdown. */
  private readonly orphans = new Set<PooledContainer>();
  private readonly cleanups = new Set<Promise<unknown>>();
  private rootReady?: Promise<void>;
  private reaped?: Promise<void>;
  private imageSeen?: { image: string; at: number };
  private availableAt?: { at: number; result: TierAvailability };
  private lastClaimMs?: number;
  private started = false;
  private shuttingDown = false;

  constructor(
    @Inject(POOLED_OPTIONS) private readonly options: ResolvedPooledOptions,
    @Inject(DOCKER_CLIENT) private readonly docker: DockerClient,
    private readonly mounts: HostMounts,
  ) {
    super();
    this.factory = new PooledContainerFactory(options, docker, mounts);
    this.pool = new WarmPool(this.factory, options);
  }

  /** Reaps leftovers of dead engines, prepares the mount root and starts warming containers. Never throws. */
  async onModuleInit(): Promise<void> {
    if (this.started || !this.options.image) {
      if (!this.options.image) this.logger.warn('pooled tier has no sandbox image; it stays unavailable');
      return;
    }
    this.started = true;
    try {
      await this.ensureRoot();
    } catch (err) {
      this.logger.error(`pooled tier cannot prepare ${this.options.mountRoot}: ${(err as Error).message}`);
      return;
    }
    await this.reapOnce();
    this.pool.start();
  }

  async availability(): Promise<TierAvailability> {
    if (this.shuttingDown) return { available: false, reason: 'the pooled tier is shutting down' };
    const cached = this.availableAt;
    if (cached && Date.now() - cached.at < AVAILABLE_TTL_MS) {
      return { ...cached.result, details: { ...cached.result.details, pool: this.stats() } };
    }
    const result = await this.probe();
    this.availableAt = result.available ? { at: Date.now(), result } : undefined;
    return result;
  }

  private async probe(): Promise<TierAvailability> {
    const o = this.options;
    if (!o.image) {
      return {
        available: false,
        code: SANDBOX_IMAGE_MISSING,
        reason:
          'no sandbox image configured: set pooled.image or SWITCHYARD_SANDBOX_IMAGE, or build one with ' +
          '`npm run sandbox:image` (writes .runtime/sandbox-image.tag)',
      };
    }
    if (process.getuid?.() !== 0) {
      return {
        available: false,
        reason: 'the pooled tier bind-mounts workspaces on the host and must run as root',
      };
    }
    try {
      await this.docker.ping({ timeoutMs: PING_TIMEOUT_MS });
    } catch (err) {
      return { available: false, ...dockerUnreachable(this.docker.endpoint, err) };
    }
    try {
      if (!(await this.imageExists(o.image))) {
        return {
          available: false,
          code: SANDBOX_IMAGE_MISSING,
          reason: `sandbox image ${o.image} not found; build it with \`npm run sandbox:image\``,
        };
      }
      await this.ensureRoot();
    } catch (err) {
      return { available: false, reason: (err as Error).message };
    }
    // Docker may have come back after a failed boot: finish what start-up could not do.
    if (!this.started) await this.onModuleInit();
    else void this.reapOnce();
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

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = performance.now();
    if (this.shuttingDown) throw new SandboxUnavailableError('the pooled tier is shutting down');
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const lease = await this.leaseFor(job);
    lease.busy++;
    clearTimeout(lease.idleTimer);
    const turn = lease.tail.then(async () => ({
      ...(await this.runOn(lease, job, signal, started)),
      containerId: lease.container.id,
    }));
    lease.tail = turn.catch(() => undefined);
    try {
      return await turn;
    } finally {
      lease.busy--;
      if (lease.busy === 0) this.armIdleTimer(lease);
    }
  }

  /** Destroys the session's container (killing a run in progress) and unmounts its workspace. Idempotent. */
  async releaseSession(sessionId: string): Promise<void> {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    this.sessions.delete(sessionId);
    const lease = await entry.catch(() => undefined);
    if (lease) await this.retire(lease, 'session released');
  }

  /** Warm pool and session numbers, for metrics. */
  stats(): PooledStats {
    return {
      ...this.pool.stats(),
      claimed: this.leases.size,
      claiming: this.sessions.size - this.leases.size,
      maxSessions: this.options.maxSessions,
      ...(this.lastClaimMs !== undefined && { lastClaimMs: this.lastClaimMs }),
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
    this.shuttingDown = true;
    const entries = [...this.sessions.entries()];
    this.sessions.clear();
    await Promise.allSettled(
      entries.map(async ([, entry]) => {
        const lease = await entry.catch(() => undefined);
        if (lease) await this.retire(lease, 'shutdown');
      }),
    );
    await this.pool.close();
    while (this.factory.creating.size > 0) await Promise.allSettled([...this.factory.creating]);
    while (this.cleanups.size > 0) await Promise.allSettled([...this.cleanups]);
    // Anything still known (a destroy that failed, a start that raced the close) goes now.
    const rest = [...this.factory.live.values(), ...this.orphans];
    await Promise.allSettled(rest.map((c) => this.factory.destroy(c)));
    if (this.started) await this.removeUnknownOwnContainers();
  }

  /**
   * Removes every container still labelled with this engine's id, known or not: one Docker made for a create whose
   * reply was lost (a daemon restart) is known only to Docker. Called at shutdown, when all of them must go.
   */
  private async removeUnknownOwnContainers(): Promise<void> {
    try {
      const call = { timeoutMs: SHUTDOWN_DOCKER_CALL_MS };
      const left = await this.docker.listByLabel(
        { [POOLED_LABELS.tier]: POOLED_TIER_LABEL, [POOLED_LABELS.engine]: this.options.engineId },
        call,
      );
      for (const c of left) {
        await this.removeLeftover(c, call);
      }
      if (left.length > 0)
        this.logger.warn(`removed ${left.length} pooled container(s) the engine had lost track of`);
    } catch (err) {
      this.logger.warn(
        `could not check for this engine's pooled containers at shutdown (the next start reaps them): ${(err as Error).message}`,
      );
    }
  }

  // -- sessions ----------------------------------------------------------------------------------------------

  private async leaseFor(job: TierJob): Promise<Lease> {
    const existing = this.sessions.get(job.sessionId);
    if (existing) {
      const lease = await existing;
      if (lease.container.alive && !lease.released) return lease;
      // Its runner died between actions: the session starts over in a fresh container (its workspace is kept).
      if (this.sessions.get(job.sessionId) === existing) this.sessions.delete(job.sessionId);
      await this.retire(lease, 'runner gone').catch(() => undefined);
      return this.leaseFor(job);
    }
    if (this.sessions.size >= this.options.maxSessions) {
      throw new PoolExhaustedError(
        'POOL_SESSIONS_EXHAUSTED',
        `${this.options.maxSessions} sessions already hold a pooled container; release one or raise pooled.maxSessions`,
        { maxSessions: this.options.maxSessions },
      );
    }
    const entry = this.claim(job.sessionId, job.workspaceDir);
    this.sessions.set(job.sessionId, entry);
    entry.catch(() => {
      if (this.sessions.get(job.sessionId) === entry) this.sessions.delete(job.sessionId);
    });
    return entry;
  }

  /**
   * Takes a warm container for the session and mounts its workspace into it. Its cost is one runner round trip: the
   * pool's test on borrow (the runner really spawns a process), during which the mount helper bind-mounts the
   * workspace. That the container sees the mount is not checked here with a round trip of its own: every run carries
   * the workspace's device and inode, and the runner refuses to start anything unless /workspace is that directory
   * (`runOn`), so no code runs in an unverified workspace.
   */
  private async claim(sessionId: string, workspaceDir: string): Promise<Lease> {
    const t0 = performance.now();
    await this.ensureRoot();
    // The host's view of the workspace is resolved while the pool finds a container.
    const resolving = this.resolveWorkspace(workspaceDir);
    resolving.catch(() => undefined); // observed through `prepare`
    let tBorrowed = t0;
    let tMounted = t0;
    const container = await this.pool
      .claim(async (candidate) => {
        tBorrowed = performance.now();
        await this.mounts.bind((await resolving).path, candidate.mountPoint);
        tMounted = performance.now();
      })
      .catch((err: unknown) => {
        throw claimError(err);
      });
    const workspace = await resolving;
    if (this.shuttingDown) {
      await this.factory.destroy(container).catch((e: Error) => this.orphan(container, e));
      throw new SandboxUnavailableError('the pooled tier is shutting down');
    }
    container.sessionId = sessionId;
    container.workspace = workspace.path;
    const lease: Lease = {
      sessionId,
      container,
      workspace,
      tail: Promise.resolve(),
      busy: 0,
      released: false,
    };
    this.leases.set(sessionId, lease);
    void container.connection.closed.then(() => this.onRunnerClosed(lease));
    this.armIdleTimer(lease);
    const done = performance.now();
    this.lastClaimMs = done - t0;
    this.logger.debug(
      `session ${sessionId} claimed ${container.shortId} in ${(done - t0).toFixed(2)} ms (borrowed at ` +
        `${(tBorrowed - t0).toFixed(2)} ms, mounted at ${(tMounted - t0).toFixed(2)} ms, health check meanwhile)`,
    );
    return lease;
  }

  private async resolveWorkspace(dir: string): Promise<HostWorkspace> {
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

  /** Ends the lease and destroys its container. */
  private async retire(lease: Lease, why: string): Promise<void> {
    lease.released = true;
    clearTimeout(lease.idleTimer);
    if (this.leases.get(lease.sessionId) === lease) this.leases.delete(lease.sessionId);
    this.logger.debug(`session ${lease.sessionId}: container ${lease.container.shortId} destroyed (${why})`);
    try {
      await this.factory.destroy(lease.container);
      this.orphans.delete(lease.container);
    } catch (err) {
      this.orphan(lease.container, err as Error);
      throw new SandboxInternalError(
        'POOLED_RELEASE',
        `could not remove the container of session ${lease.sessionId}: ${(err as Error).message}`,
        { retriable: true, cause: err },
      );
    }
  }

  private orphan(container: PooledContainer, err: Error): void {
    this.logger.warn(`container ${container.shortId} could not be destroyed (${err.message}); retried later`);
    this.orphans.add(container);
  }

  private armIdleTimer(lease: Lease): void {
    clearTimeout(lease.idleTimer);
    if (lease.released) return;
    lease.idleTimer = setTimeout(() => {
      if (lease.busy > 0 || lease.released) return;
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
    this.track(this.retire(lease, 'idle'));
  }

  /** The runner of a claimed container went away. During a run, the run reports it; between runs it is cleaned up here. */
  private onRunnerClosed(lease: Lease): void {
    if (lease.released || lease.busy > 0 || this.shuttingDown) return;
    this.logger.warn(
      `runner of session ${lease.sessionId}'s container ${lease.container.shortId} died while idle; ` +
        `the next action gets a fresh container`,
    );
    void this.dropIdle(lease);
  }

  // -- runs --------------------------------------------------------------------------------------------------

  private async runOn(
    lease: Lease,
    job: TierJob,
    signal: AbortSignal | undefined,
    started: number,
  ): Promise<TierRunResult> {
    const elapsed = () => Math.round(performance.now() - started);
    if (lease.released || signal?.aborted) return { ...emptyResult(elapsed()), aborted: true };
    const { container } = lease;
    if (!container.alive)
      return this.runnerLost(lease, job, new Error('the runner was already gone'), elapsed);
    const workspace = await this.resolveWorkspace(job.workspaceDir);
    if (workspace.path !== lease.workspace.path || !sameId(workspace.id, lease.workspace.id)) {
      await this.remount(lease, workspace);
    }

    const stdout = new OutputCollector(job.output, (t) => job.onOutput?.('stdout', t));
    const stderr = new OutputCollector(job.output, (t) => job.onOutput?.('stderr', t));
    let cappedByEngine = false;
    let aborted = false;
    const { id, exit } = container.connection.run(
      {
        language: job.language,
        code: job.code,
        stdin: job.stdin,
        env: job.env,
        timeoutMs: job.timeoutMs,
        cpuSeconds: Math.ceil(job.timeoutMs / 1000) + 1,
        capBytes: job.output.maxBytes + CAP_SLACK_BYTES,
        capLines: job.output.maxLines,
        workspace: lease.workspace.id,
      },
      (fd, data, runId) => {
        if ((fd === 2 ? stderr : stdout).push(data) || cappedByEngine) return;
        // Past a cap: the rest is unwanted, so the run ends now (the runner kills everything it started).
        cappedByEngine = true;
        container.connection.kill(runId);
      },
    );
    const onAbort = () => {
      aborted = true;
      container.connection.kill(id);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    let deadline: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => {
      deadline = setTimeout(() => resolve('hung'), job.timeoutMs + this.options.runnerGraceMs);
    });
    let outcome: RunnerExit | 'hung';
    try {
      outcome = await Promise.race([exit, hung]);
    } catch (err) {
      if (lease.released || this.shuttingDown)
        return { ...this.partial(stdout, stderr, elapsed()), aborted: true };
      if (err instanceof RunnerRefusedError && err.code === 'workspace') {
        return this.workspaceNotVisible(lease, err);
      }
      return this.runnerLost(lease, job, err as Error, elapsed, stdout, stderr);
    } finally {
      clearTimeout(deadline);
      signal?.removeEventListener('abort', onAbort);
    }
    if (outcome === 'hung') {
      await this.retireAfterFailure(lease);
      throw new RunnerLostError(
        'RUNNER_UNRESPONSIVE',
        `the runner of the session's container did not finish the run within its timeout + ${this.options.runnerGraceMs} ms; ` +
          `the container was destroyed and the session's next action gets a fresh one (workspace kept, /tmp lost)`,
        { container: container.shortId },
      );
    }
    return this.toResult(outcome, stdout, stderr, { cappedByEngine, aborted }, job, elapsed());
  }

  private toResult(
    exit: RunnerExit,
    stdout: OutputCollector,
    stderr: OutputCollector,
    flags: { cappedByEngine: boolean; aborted: boolean },
    job: TierJob,
    durationMs: number,
  ): TierRunResult {
    const result: TierRunResult = {
      timedOut: exit.timedOut,
      stdout: stdout.text(),
      stderr: stderr.text(),
      truncated: {
        stdout: stdout.truncated || exit.capped.stdout,
        stderr: stderr.truncated || exit.capped.stderr,
      },
      redacted: stdout.redacted || stderr.redacted,
      durationMs,
    };
    if (exit.exitCode !== null) result.exitCode = exit.exitCode;
    if (exit.signal !== null) result.signal = exit.signal;
    if (flags.aborted) result.aborted = true;
    if (exit.spawnError) {
      result.spawnError = exit.spawnError;
      return result;
    }
    const limits = this.options.limits;
    // bash reports a child killed by signal n as exit 128 + n.
    const signalled = (n: number) => exit.exitCode === 128 + n;
    if (exit.oomKilled) {
      result.limit = {
        code: 'OUT_OF_MEMORY',
        message: `out of memory: the run went over the container's ${formatBytes(limits.memoryBytes)} limit`,
      };
    } else if (flags.cappedByEngine || exit.ended === 'output' || exit.capped.stdout || exit.capped.stderr) {
      result.limit = {
        code: 'OUTPUT_CAP',
        message: `output over ${formatBytes(job.output.maxBytes)} or ${job.output.maxLines} lines on a stream; the run was stopped`,
      };
    } else if (result.signal === 'SIGXCPU' || signalled(SIGXCPU)) {
      result.limit = { code: 'CPU_TIME', message: 'CPU time limit reached' };
    } else if (result.signal === 'SIGXFSZ' || signalled(SIGXFSZ)) {
      result.limit = {
        code: 'FILE_SIZE',
        message: `file size limit of ${formatBytes(limits.fileSizeBytes)} reached`,
      };
    } else if (exit.pidsLimitHit && (exit.timedOut || exit.exitCode !== 0)) {
      result.limit = { code: 'PIDS', message: `process limit of ${limits.pids} reached` };
    }
    return result;
  }

  /**
   * The runner died during a run. Out of memory (the kernel chose the runner, or the whole container) is the
   * run's outcome; anything else is an engine fault. Either way the container is destroyed first.
   */
  private async runnerLost(
    lease: Lease,
    job: TierJob,
    err: Error,
    elapsed: () => number,
    stdout?: OutputCollector,
    stderr?: OutputCollector,
  ): Promise<TierRunResult> {
    const { container } = lease;
    const state = await this.docker.inspect(container.id).catch(() => undefined);
    const diagnostics = container.diagnostics();
    await this.retireAfterFailure(lease);
    if (state?.oomKilled) {
      return {
        ...this.partial(stdout, stderr, elapsed()),
        signal: 'SIGKILL',
        limit: {
          code: 'OUT_OF_MEMORY',
          message:
            `out of memory: the run went over the container's ${formatBytes(this.options.limits.memoryBytes)} limit ` +
            `and took the runner down; the session's container was replaced (workspace kept, /tmp lost)`,
        },
      };
    }
    this.logger.warn(
      `runner of ${container.shortId} (session ${job.sessionId}) lost during ${job.actionId}: ${err.message}` +
        (diagnostics ? `; runner stderr: ${diagnostics.slice(-300)}` : ''),
    );
    throw new RunnerLostError(
      'RUNNER_LOST',
      `the runner in the session's container stopped during the run (${err.message}); the container was destroyed ` +
        `and the session's next action gets a fresh one (workspace kept, /tmp lost)`,
      { container: container.shortId, exitCode: state?.exitCode },
      { cause: err },
    );
  }

  private async retireAfterFailure(lease: Lease): Promise<void> {
    const entry = this.sessions.get(lease.sessionId);
    if (entry && (await entry.catch(() => undefined)) === lease) this.sessions.delete(lease.sessionId);
    await this.retire(lease, 'runner failed').catch(() => undefined);
  }

  /**
   * The runner refused a run because /workspace is not the session workspace (nothing of the run started): a broken
   * mount propagation leaves it the empty mount point. The container is destroyed; the claim cannot work here.
   */
  private async workspaceNotVisible(lease: Lease, err: RunnerRefusedError): Promise<never> {
    await this.retireAfterFailure(lease);
    throw new SandboxInternalError(
      'WORKSPACE_NOT_VISIBLE',
      `the session workspace did not appear at /workspace in the pooled container (it sees ` +
        `${err.workspace ? `device/inode ${err.workspace.join('/')}` : 'something else'}, expected ` +
        `${lease.workspace.id.join('/')}); is pooled.mountRoot (${this.options.mountRoot}) a shared mount in the ` +
        `Docker daemon's mount namespace?`,
      { retriable: false, cause: err },
    );
  }

  /** The session's workspace moved (another path, or the directory was replaced): mount the current one. */
  private async remount(lease: Lease, workspace: HostWorkspace): Promise<void> {
    const { container } = lease;
    await this.mounts.unmount(container.mountPoint);
    await this.mounts.bind(workspace.path, container.mountPoint);
    lease.workspace = workspace;
    container.workspace = workspace.path;
  }

  private partial(
    stdout: OutputCollector | undefined,
    stderr: OutputCollector | undefined,
    durationMs: number,
  ): TierRunResult {
    return {
      ...emptyResult(durationMs),
      stdout: stdout?.text() ?? '',
      stderr: stderr?.text() ?? '',
      truncated: { stdout: stdout?.truncated ?? false, stderr: stderr?.truncated ?? false },
      redacted: (stdout?.redacted ?? false) || (stderr?.redacted ?? false),
    };
  }

  // -- housekeeping ------------------------------------------------------------------------------------------

  private ensureRoot(): Promise<void> {
    this.rootReady ??= this.mounts.ensureSharedRoot(this.options.mountRoot).catch((err: unknown) => {
      this.rootReady = undefined;
      throw new SandboxUnavailableError(
        `cannot make ${this.options.mountRoot} a shared mount point (pooled.mountRoot): ${(err as Error).message}`,
        {},
        { cause: err },
      );
    });
    return this.rootReady;
  }

  private async imageExists(image: string): Promise<boolean> {
    const seen = this.imageSeen;
    if (seen?.image === image && Date.now() - seen.at < IMAGE_CHECK_TTL_MS) return true;
    const exists = await this.docker.imageExists(image);
    if (exists) this.imageSeen = { image, at: Date.now() };
    return exists;
  }

  /** Runs the reaper once per engine life that succeeds; a failure (Docker down) lets a later call try again. */
  private reapOnce(): Promise<void> {
    this.reaped ??= this.reap().catch((err: unknown) => {
      this.reaped = undefined;
      this.logger.warn(`pooled reaper could not run: ${(err as Error).message}`);
    });
    return this.reaped;
  }

  /**
   * Removes pooled containers of dead engines (same host, process gone or replaced) and exited ones, then mounts
   * and directories under the mount root that no container uses. Containers of live engines are left alone.
   */
  private async reap(): Promise<void> {
    const found = await this.docker.listByLabel({ [POOLED_LABELS.tier]: POOLED_TIER_LABEL });
    const keep = new Set<string>(this.factory.keys);
    let removed = 0;
    for (const c of found) {
      const key = c.labels[POOLED_LABELS.mountKey];
      const engine = c.labels[POOLED_LABELS.engine] ?? '';
      const dead =
        engine !== this.options.engineId &&
        (engineIsDead(engine) || c.state === 'exited' || c.state === 'dead');
      if (!dead) {
        if (key) keep.add(key);
        continue;
      }
      await this.removeLeftover(c);
      removed++;
    }
    const root = this.options.mountRoot;
    const keyOf = (p: string) => path.relative(root, p).split(path.sep)[0];
    for (const target of await this.mounts.mountsUnder(root)) {
      if (!keep.has(keyOf(target))) await this.mounts.unmount(target);
    }
    const now = Date.now();
    for (const name of await fs.promises.readdir(root).catch(() => [] as string[])) {
      if (keep.has(name) || this.factory.keys.has(name)) continue;
      const dir = path.join(root, name);
      const stat = await fs.promises.lstat(dir).catch(() => undefined);
      if (!stat?.isDirectory() || now - stat.mtimeMs < STRAY_DIR_AGE_MS) continue;
      await fs.promises.rmdir(dir).catch(() => undefined); // never recursive: only empty mount points go
    }
    for (const c of [...this.orphans]) {
      await this.factory
        .destroy(c)
        .then(() => this.orphans.delete(c))
        .catch(() => undefined);
    }
    if (removed > 0) this.logger.log(`reaped ${removed} pooled container(s) left by dead engines`);
  }

  /** Removes a container this engine does not hold, then its mount point (a key of ours is hex, never a path). */
  private async removeLeftover(c: ContainerSummary, call?: DockerCallOptions): Promise<void> {
    await this.docker.remove(c.id, call);
    const key = c.labels[POOLED_LABELS.mountKey];
    if (key && /^[0-9a-f]+$/.test(key)) await this.factory.release(key).catch(() => undefined);
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err: unknown) =>
      this.logger.warn(`pooled cleanup failed: ${(err as Error).message}`),
    );
    this.cleanups.add(tracked);
    void tracked.finally(() => this.cleanups.delete(tracked));
  }
}

/** True when `engineId` (`<hostname>:<pid>:<start ticks>`) names a process of this host that no longer exists. */
export function engineIsDead(engineId: string, hostname = os.hostname()): boolean {
  return engineOnThisHost(engineId, hostname) !== undefined && !engineAliveHere(engineId, hostname);
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

function sameId(a: HostWorkspace['id'], b: HostWorkspace['id']): boolean {
  return a[0] === b[0] && a[1] === b[1];
}

function emptyResult(durationMs: number): TierRunResult {
  return { timedOut: false, stdout: '', stderr: '', truncated: { stdout: false, stderr: false }, durationMs };
}

function formatBytes(n: number): string {
  return n % 2 ** 20 === 0 ? `${n / 2 ** 20} MiB` : `${n} bytes`;
}
