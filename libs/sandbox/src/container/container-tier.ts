import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { OutputCollector } from '../output-collector';
import { SandboxInternalError, SandboxUnavailableError } from '../sandbox.errors';
import { SandboxTier } from '../sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../sandbox.types';
import {
  CONTAINER_CLOCK,
  CONTAINER_OPTIONS,
  CONTAINER_TIER_LABEL,
  LABEL_ENGINE,
  LABEL_SESSION,
  LABEL_TIER,
  type Clock,
} from './container.constants';
import { currentImage, engineAliveHere, type ResolvedContainerOptions } from './container.options';
import { buildContainerSpec, containerStdin } from './container-spec';
import { DOCKER_CLIENT, DockerClient, type ContainerExit } from './docker-client';
import { dockerUnreachable, SANDBOX_IMAGE_MISSING } from './docker-availability';
import {
  DockerApiError,
  DockerError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
} from './docker.errors';

/** After a kill, how long `wait` may take before the tier stops waiting and removes the container by force. */
const KILL_GRACE_MS = 2000;
/** After the exit, how long output still in flight may take to arrive before the connection is dropped. */
const DRAIN_MS = 1000;
/** Deadline of the Docker calls made while shutting down or reaping. */
const CLEANUP_TIMEOUT_MS = 10_000;
/** A 137 exit the tier did not cause is checked twice for the OOM flag: the daemon may record it just after the exit. */
const OOM_RECHECK_MS = 100;

const SIGNAL_NAMES = new Map(Object.entries(os.constants.signals).map(([name, num]) => [num, name]));
const SIGKILL_EXIT = 128 + os.constants.signals.SIGKILL;
const SIGXFSZ_EXIT = 128 + os.constants.signals.SIGXFSZ;

interface ActiveRun {
  readonly sessionId: string;
  readonly controller: AbortController;
  containerId?: string;
  /** Settles once the run has returned and its container is removed (or its removal failed). */
  readonly done: Promise<void>;
}

interface CachedAvailability {
  at: number;
  value: TierAvailability;
  image?: string;
}

/**
 * The one-off container tier: every run is a fresh container of the sandbox image (non-root, no capabilities,
 * no network, read-only root, size-capped tmpfs, cgroup limits; see `buildContainerSpec`), created, attached,
 * started, waited for and always removed, so nothing of a run outlives it.
 *
 * Code reaches the container on stdin ahead of the job's stdin (see `CODE_LOADER`); stdout and stderr come back
 * over the attach connection into the shared `OutputCollector`s, since the containers log nowhere.
 */
@Injectable()
export class ContainerTier extends SandboxTier implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly name = 'container' as const;
  private readonly logger = new Logger(ContainerTier.name);
  private readonly clock: Clock;
  private readonly runs = new Set<ActiveRun>();
  /** Containers whose removal failed, by id, with their session: retried on release, reaping and shutdown. */
  private readonly unremoved = new Map<string, string>();
  private readonly cleanups = new Set<Promise<unknown>>();
  private cached?: CachedAvailability;
  private probing?: Promise<CachedAvailability>;
  private wasAvailable?: boolean;
  private shuttingDown = false;

  constructor(
    @Inject(DOCKER_CLIENT) private readonly docker: DockerClient,
    @Inject(CONTAINER_OPTIONS) private readonly options: ResolvedContainerOptions,
    @Optional() @Inject(CONTAINER_CLOCK) clock?: Clock,
  ) {
    super();
    this.clock = clock ?? { now: () => performance.now() };
  }

  /**
   * Docker ping plus "the image exists", each answer reused for `availabilityCacheMs`, so the tier notices by itself
   * when Docker comes back or the image gets built. Never throws.
   */
  async availability(): Promise<TierAvailability> {
    return (await this.currentAvailability()).value;
  }

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = performance.now();
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const { value: availability, image } = await this.currentAvailability();
    if (!availability.available || !image) {
      throw new SandboxUnavailableError(`container tier: ${availability.reason ?? 'not available'}`);
    }
    checkWorkspace(job.workspaceDir);

    let finish!: () => void;
    const active: ActiveRun = {
      sessionId: job.sessionId,
      controller: new AbortController(),
      done: new Promise<void>((resolve) => (finish = resolve)),
    };
    this.runs.add(active);
    const abort = signal ? AbortSignal.any([signal, active.controller.signal]) : active.controller.signal;
    try {
      const spec = buildContainerSpec({
        job,
        image,
        options: this.options,
        name: containerName(job.actionId),
      });
      const id = await this.docker.createContainer(spec).catch((err: unknown) => {
        if (!(err instanceof DockerNotFoundError)) throw err;
        this.cached = undefined;
        throw new SandboxUnavailableError(
          `container tier: sandbox image ${image} is gone from the Docker engine; build it with \`npm run sandbox:image\``,
          {},
          { cause: err },
        );
      });
      active.containerId = id;
      try {
        const result = { ...(await this.supervise(id, job, abort, started)), containerId: id };
        this.logger.debug(
          `run ${job.actionId} in ${id.slice(0, 12)} ended: exit=${result.exitCode} timedOut=${result.timedOut}`,
        );
        return result;
      } finally {
        await this.removeContainer(id, job.sessionId);
      }
    } catch (err) {
      // Whatever Docker did wrong, the next availability check asks it again instead of trusting the cache.
      if (err instanceof DockerError) this.cached = undefined;
      throw err;
    } finally {
      this.runs.delete(active);
      finish();
    }
  }

  /**
   * Holds nothing between runs; kills any run of the session still going (the run reports `aborted`) and removes
   * whatever of the session's containers could not be removed before.
   */
  async releaseSession(sessionId: string): Promise<void> {
    const runs = [...this.runs].filter((r) => r.sessionId === sessionId);
    for (const r of runs) r.controller.abort(new Error(`session ${sessionId} released`));
    await Promise.all(runs.map((r) => r.done));
    const leftovers = [...this.unremoved].filter(([, s]) => s === sessionId).map(([id]) => id);
    await Promise.all(leftovers.map((id) => this.removeContainer(id, sessionId, true)));
  }

  /** Removes leftovers of engines that died, in the background: start-up must not wait for Docker. */
  onApplicationBootstrap(): void {
    if (!this.options.reapOnStart) return;
    this.track(
      this.reapLeftovers().then((removed) => {
        if (removed.length > 0)
          this.logger.log(`removed ${removed.length} leftover container(s) of other engines`);
      }),
    );
  }

  /**
   * Removes one-off containers left behind (SECURITY.md #17) whose session `isLive` (default: the `isSessionLive`
   * option) says is not live: those labelled with engine `engineInstanceId`, or by default those of any engine
   * other than this one that is not provably alive on this host (`engineAliveHere`). This engine's own running
   * containers are never touched. Resolves with the removed ids.
   */
  async reapLeftovers(
    options: { engineInstanceId?: string; isLive?: (sessionId: string) => boolean | Promise<boolean> } = {},
  ): Promise<string[]> {
    const isLive = options.isLive ?? this.options.isSessionLive;
    const own = this.options.engineInstanceId;
    const found = await this.docker.listByLabel(
      { [LABEL_TIER]: CONTAINER_TIER_LABEL, [LABEL_ENGINE]: options.engineInstanceId ?? true },
      { timeoutMs: CLEANUP_TIMEOUT_MS },
    );
    const running = new Set([...this.runs].map((r) => r.containerId));
    const removed: string[] = [];
    await Promise.all(
      found.map(async (c) => {
        const engine = c.labels[LABEL_ENGINE];
        if (running.has(c.id)) return;
        // By default, never this engine's containers nor those of another engine still running on this host.
        if (options.engineInstanceId === undefined && (engine === own || engineAliveHere(engine ?? '')))
          return;
        const session = c.labels[LABEL_SESSION];
        if (session !== undefined && (await isLive(session))) return;
        this.logger.log(
          `reaping leftover container ${c.id.slice(0, 12)} (engine ${engine}, session ${session})`,
        );
        await this.docker.remove(c.id, { timeoutMs: CLEANUP_TIMEOUT_MS });
        this.unremoved.delete(c.id);
        removed.push(c.id);
      }),
    );
    return removed;
  }

  /** Kills every run, then removes every container carrying this engine's label. */
  async onApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    const runs = [...this.runs];
    for (const r of runs) r.controller.abort(new Error('engine shutting down'));
    await Promise.all(runs.map((r) => r.done));
    while (this.cleanups.size > 0) await Promise.allSettled([...this.cleanups]);
    if (runs.length === 0 && this.unremoved.size === 0 && !this.wasAvailable) return; // never reached Docker
    try {
      const left = await this.docker.listByLabel(
        { [LABEL_TIER]: CONTAINER_TIER_LABEL, [LABEL_ENGINE]: this.options.engineInstanceId },
        { timeoutMs: CLEANUP_TIMEOUT_MS },
      );
      await Promise.all(left.map((c) => this.removeContainer(c.id, c.labels[LABEL_SESSION] ?? '', true)));
    } catch (err) {
      this.logger.warn(
        `could not remove this engine's containers at shutdown (the next start reaps them): ${(err as Error).message}`,
      );
    }
  }

  /** Attaches, feeds stdin, starts, enforces timeout, abort and output caps, and reads the outcome. */
  private async supervise(
    id: string,
    job: TierJob,
    signal: AbortSignal,
    started: number,
  ): Promise<TierRunResult> {
    const streams = await this.docker.attach(id);
    const stdout = new OutputCollector(job.output, (t) => job.onOutput?.('stdout', t));
    const stderr = new OutputCollector(job.output, (t) => job.onOutput?.('stderr', t));
    const stopWaiting = new AbortController();
    let ended: 'timeout' | 'output' | 'abort' | undefined;
    let timer: NodeJS.Timeout | undefined;
    let backstop: NodeJS.Timeout | undefined;
    const kill = (why: NonNullable<typeof ended>) => {
      if (ended) return;
      ended = why;
      // Past the cap nothing more is wanted: stop reading so nothing more is buffered.
      if (why === 'output') streams.destroy();
      this.docker.kill(id).catch((err: Error) => this.logger.warn(`kill ${id.slice(0, 12)}: ${err.message}`));
      // A kill that does not take (a daemon hiccup) must not hang the run: stop waiting; removal kills by force.
      backstop = setTimeout(() => stopWaiting.abort(), KILL_GRACE_MS);
    };
    const onAbort = () => kill('abort');
    try {
      for (const [stream, collector] of [
        [streams.stdout, stdout],
        [streams.stderr, stderr],
      ] as const) {
        stream.on('data', (chunk: Buffer) => {
          if (!collector.push(chunk)) kill('output');
        });
        stream.on('error', () => undefined);
      }
      streams.stdin.on('error', () => undefined); // EPIPE when the code exits without reading its stdin
      streams.stdin.end(containerStdin(job));

      if (signal.aborted) return { ...this.collect(stdout, stderr, started), aborted: true };
      try {
        await this.docker.start(id);
      } catch (err) {
        // The daemon refused to run the command (bad interpreter path, runtime error): the run could not start.
        if (err instanceof DockerApiError && !(err instanceof DockerNotFoundError)) {
          return {
            ...this.collect(stdout, stderr, started),
            spawnError: `cannot start the container: ${err.message}`,
          };
        }
        throw err;
      }

      timer = setTimeout(() => kill('timeout'), job.timeoutMs);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      let exit: ContainerExit | undefined;
      try {
        exit = await this.docker.wait(id, { signal: stopWaiting.signal });
      } catch (err) {
        if (!(stopWaiting.signal.aborted && err instanceof DockerTimeoutError)) throw err;
        this.logger.warn(`container ${id.slice(0, 12)} did not stop within ${KILL_GRACE_MS} ms of a kill`);
      }
      clearTimeout(timer);
      clearTimeout(backstop);
      // Output still in flight after the exit arrives on the same connection: let it drain briefly.
      if (exit) await settleWithin(streams.closed, DRAIN_MS);
      streams.destroy();

      const result = this.collect(stdout, stderr, started);
      result.timedOut = ended === 'timeout';
      if (ended === 'abort') result.aborted = true;
      if (exit) {
        result.exitCode = exit.statusCode;
        if (exit.statusCode > 128) result.signal = SIGNAL_NAMES.get(exit.statusCode - 128);
      } else {
        result.signal = 'SIGKILL';
      }
      if (exit?.statusCode === SIGKILL_EXIT && (await this.oomKilled(id, ended !== undefined))) {
        result.limit = {
          code: 'OUT_OF_MEMORY',
          message: `out of memory: the run went over its ${formatBytes(this.options.limits.memoryBytes)} memory limit`,
        };
      } else if (ended === 'output') {
        result.limit = {
          code: 'OUTPUT_CAP',
          message: `output over ${formatBytes(job.output.maxBytes)} or ${job.output.maxLines} lines on a stream; the run was stopped`,
        };
      } else if (exit?.statusCode === SIGXFSZ_EXIT) {
        result.limit = {
          code: 'FILE_SIZE',
          message: `file size limit of ${formatBytes(this.options.limits.fsizeBytes)} reached`,
        };
      }
      return result;
    } finally {
      clearTimeout(timer);
      clearTimeout(backstop);
      signal.removeEventListener('abort', onAbort);
      streams.destroy();
    }
  }

  private collect(stdout: OutputCollector, stderr: OutputCollector, started: number): TierRunResult {
    return {
      timedOut: false,
      stdout: stdout.text(),
      stderr: stderr.text(),
      truncated: { stdout: stdout.truncated, stderr: stderr.truncated },
      redacted: stdout.redacted || stderr.redacted,
      durationMs: Math.round(performance.now() - started),
    };
  }

  /** Docker's OOM flag; an exit the tier did not cause gets a second look, as the flag may trail the exit. */
  private async oomKilled(id: string, killedByTier: boolean): Promise<boolean> {
    try {
      if ((await this.docker.inspect(id)).oomKilled) return true;
      if (killedByTier) return false;
      await new Promise((resolve) => setTimeout(resolve, OOM_RECHECK_MS));
      return (await this.docker.inspect(id)).oomKilled;
    } catch (err) {
      this.logger.warn(`inspect ${id.slice(0, 12)}: ${(err as Error).message}`);
      return false;
    }
  }

  /** Never throws: a container that cannot be removed now is remembered and removed later. */
  private async removeContainer(id: string, sessionId: string, cleanup = false): Promise<void> {
    try {
      await this.docker.remove(id, cleanup ? { timeoutMs: CLEANUP_TIMEOUT_MS } : undefined);
      this.unremoved.delete(id);
    } catch (err) {
      this.unremoved.set(id, sessionId);
      this.logger.warn(
        `could not remove container ${id.slice(0, 12)} (retried later): ${(err as Error).message}`,
      );
    }
  }

  private currentAvailability(): Promise<CachedAvailability> {
    if (this.shuttingDown) {
      return Promise.resolve({ at: 0, value: { available: false, reason: 'the engine is shutting down' } });
    }
    const cached = this.cached;
    if (cached && this.clock.now() - cached.at < this.options.availabilityCacheMs)
      return Promise.resolve(cached);
    this.probing ??= this.probe()
      .then((entry) => {
        this.cached = entry;
        this.reportTransition(entry.value);
        return entry;
      })
      .finally(() => (this.probing = undefined));
    return this.probing;
  }

  private async probe(): Promise<CachedAvailability> {
    const call = { timeoutMs: this.options.probeTimeoutMs };
    const endpoint = this.docker.endpoint;
    const unavailable = (code: string, reason: string): CachedAvailability => ({
      at: this.clock.now(),
      value: { available: false, code, reason, details: { endpoint } },
    });
    try {
      await this.docker.ping(call);
    } catch (err) {
      const { code, reason } = dockerUnreachable(endpoint, err);
      return unavailable(code, reason);
    }
    const image = currentImage(this.options);
    if (!image) {
      return unavailable(
        SANDBOX_IMAGE_MISSING,
        `no sandbox image configured: ${this.options.imageTagFile} is missing; ` +
          'build the image with `npm run sandbox:image` (or set SWITCHYARD_SANDBOX_IMAGE)',
      );
    }
    try {
      if (!(await this.docker.imageExists(image, call))) {
        return unavailable(
          SANDBOX_IMAGE_MISSING,
          `sandbox image ${image} is not in the Docker engine at ${endpoint}; build it with \`npm run sandbox:image\``,
        );
      }
    } catch (err) {
      if (err instanceof DockerUnavailableError || err instanceof DockerTimeoutError) {
        const { code, reason } = dockerUnreachable(endpoint, err);
        return unavailable(code, reason);
      }
      return unavailable(
        'SANDBOX_IMAGE_UNCHECKED',
        `cannot check the sandbox image ${image}: ${(err as Error).message}`,
      );
    }
    return {
      at: this.clock.now(),
      image,
      value: {
        available: true,
        details: {
          endpoint,
          image,
          engineInstanceId: this.options.engineInstanceId,
          limits: this.options.limits,
        },
      },
    };
  }

  private reportTransition(value: TierAvailability): void {
    if (value.available === this.wasAvailable) return;
    if (value.available) this.logger.log(`container tier available (${String(value.details?.image)})`);
    else this.logger.warn(`container tier unavailable: ${value.reason}`);
    this.wasAvailable = value.available;
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err: unknown) => this.logger.warn(`cleanup failed: ${(err as Error).message}`));
    this.cleanups.add(tracked);
    void tracked.finally(() => this.cleanups.delete(tracked));
  }
}

/** The workspace is bind-mounted: it must exist (Docker would create a missing one, owned by root). */
function checkWorkspace(dir: string): void {
  if (!dir.startsWith('/') || dir.includes(':') || dir.includes('\0')) {
    throw new SandboxInternalError(
      'WORKSPACE_PATH',
      `workspace ${JSON.stringify(dir)} cannot be bind-mounted (absolute, without ":")`,
    );
  }
  try {
    if (!fs.statSync(dir).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new SandboxInternalError('WORKSPACE_MISSING', `workspace ${dir}: ${(err as Error).message}`);
  }
}

function containerName(actionId: string): string {
  const safe = actionId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
  return `switchyard-${safe}-${randomBytes(4).toString('hex')}`;
}

/** Waits for `p`, at most `ms`; the timer is always cleared. */
async function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([p, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

function emptyResult(durationMs: number): TierRunResult {
  return { timedOut: false, stdout: '', stderr: '', truncated: { stdout: false, stderr: false }, durationMs };
}

function formatBytes(n: number): string {
  return n % 2 ** 20 === 0 ? `${n / 2 ** 20} MiB` : `${n} bytes`;
}
