import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import type { ContainerCreateOptions } from 'dockerode';
import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import { checkCallSocketDir } from '../../core/call-channel';
import { SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import { SandboxTier } from '../../core/sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../../core/sandbox.types';
import { signalExit, signalOfExit } from '../../core/supervision/exit-status';
import { emptyResult, enforcedLimit, formatBytes } from '../../core/supervision/limit-messages';
import { PendingCleanups } from '../../core/supervision/pending-cleanups';
import { RunSupervisor } from '../../core/supervision/run-supervisor';
import { AheadContainers } from './ahead-containers';
import { ContainerAvailability } from './container-availability';
import { ContainerReaper, type ReapOptions } from './container-reaper';
import { CONTAINER_OPTIONS } from './container.constants';
import type { ResolvedContainerOptions } from './container.options';
import { buildContainerSpec, containerStdin } from './container-spec';
import { DOCKER_CLIENT, DockerClient, type ContainerExit, type ContainerStreams } from './docker-client';
import { DockerApiError, DockerError, DockerNotFoundError, DockerTimeoutError } from './docker.errors';
import { GvisorSeccompProbe } from './gvisor-seccomp-probe';
import { SandboxHostsFile } from './sandbox-hosts';

/** After a kill, how long `wait` may take before the tier stops waiting and removes the container by force. */
const KILL_GRACE_MS = 2000;
/** After the exit, how long output still in flight may take to arrive before the connection is dropped. */
const DRAIN_MS = 1000;
/**
 * After start-up, leftovers of dead engines are looked for again this often: a container the daemon finished creating
 * for a dead engine after the first pass listed, or one whose removal failed (a daemon slow under load), would
 * otherwise stay until the next start.
 */
const REAP_AGAIN_MS = 60_000;
/**
 * A 137 exit the tier did not cause is checked again for the OOM flag, which the daemon may record after the exit (under
 * gVisor on a loaded machine, hundreds of ms after): first after this long, then twice as long each time, in all
 * about 1.5 s at most.
 */
const OOM_RECHECK_MS = 100;
const OOM_RECHECKS = 4;

const SIGKILL_EXIT = signalExit('SIGKILL');
const SIGXFSZ_EXIT = signalExit('SIGXFSZ');

interface ActiveRun {
  readonly sessionId: string;
  readonly controller: AbortController;
  containerId?: string;
  /** The container is known to have stopped (its exit was read) or never started: removal need not hold the result. */
  stopped?: boolean;
  /** Settles once the run has returned and its container is removed (or its removal failed). */
  readonly done: Promise<void>;
}

/**
 * The one-off container tier: every run is a fresh container of the sandbox image (non-root, no capabilities,
 * no network, read-only root, size-capped tmpfs, cgroup limits; see `buildContainerSpec`), created, attached,
 * started, waited for and always removed, so nothing of a run outlives it. The removal of a container whose exit was
 * read runs after the result is returned (nothing of the run is left in it but its stopped filesystem); the run stays
 * tracked until it is done, so releasing the session and shutting down wait for it.
 *
 * Code reaches the container on stdin ahead of the job's stdin (see `PYTHON_LOADER`, `CODE_LOADER`); stdout and stderr come back
 * over the attach connection into the run's `RunSupervisor`, since the containers log nowhere.
 */
@Injectable()
export class ContainerTier extends SandboxTier implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly name = 'container' as const;
  private readonly logger = new Logger(ContainerTier.name);
  private readonly clock: Clock;
  private readonly probe: ContainerAvailability;
  private readonly runs = new Set<ActiveRun>();
  private readonly reaper: ContainerReaper;
  private readonly cleanups = new PendingCleanups(this.logger);
  private readonly hosts: SandboxHostsFile;
  private readonly gvisorSeccomp: GvisorSeccompProbe;
  private readonly ahead: AheadContainers;
  /** One-off runs each session has had here; from its second, its next container is started ahead. */
  private readonly runsOf = new Map<string, number>();
  private reapTimer?: NodeJS.Timeout;

  constructor(
    @Inject(DOCKER_CLIENT) private readonly docker: DockerClient,
    @Inject(CONTAINER_OPTIONS) private readonly options: ResolvedContainerOptions,
    @Optional() @Inject(CLOCK) clock?: Clock,
  ) {
    super();
    this.clock = clock ?? systemClock;
    this.probe = new ContainerAvailability(docker, options, this.clock, this.logger);
    this.reaper = new ContainerReaper(docker, options, this.logger);
    this.hosts = new SandboxHostsFile(options.hostsDir);
    this.gvisorSeccomp = new GvisorSeccompProbe(docker, options, this.logger);
    this.ahead = new AheadContainers(docker, this.reaper, options.ahead, this.logger);
  }

  /**
   * Docker ping plus "the image exists", each answer reused for `availabilityCacheMs`, so the tier notices by itself
   * when Docker comes back or the image gets built. Never throws.
   */
  async availability(): Promise<TierAvailability> {
    return (await this.probe.current()).value;
  }

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = this.clock.monotonic();
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const { value: availability, image, runtime } = await this.probe.current();
    if (!availability.available || !image) {
      throw new SandboxUnavailableError(`container tier: ${availability.reason ?? 'not available'}`);
    }
    checkWorkspace(job.workspaceDir);
    if (job.channel) checkCallSocketDir(job.channel);

    let finish!: () => void;
    const active: ActiveRun = {
      sessionId: job.sessionId,
      controller: new AbortController(),
      done: new Promise<void>((resolve) => (finish = resolve)),
    };
    this.runs.add(active);
    const abort = signal ? AbortSignal.any([signal, active.controller.signal]) : active.controller.signal;
    let removal: Promise<unknown> | undefined;
    let next: ContainerCreateOptions | undefined;
    try {
      // A session's own image (a template's) replaces the default one; the engine checked that Docker has it.
      const runImage = job.image ?? image;
      // Found once with the default image (its python): the answer is the runsc's, whatever the image.
      const gvisorClone3 = await this.gvisorSeccomp.clone3For(image, runtime);
      // Cancelled (or the engine stopping) while that was found: no container is made.
      if (abort.aborted) return { ...emptyResult(this.clock.monotonic() - started), aborted: true };
      const spec = buildContainerSpec({
        job,
        image: runImage,
        options: this.options,
        name: containerName(job.actionId),
        runtime,
        hostsFile: this.hostsFile(),
        gvisorClone3,
      });
      // The session's container started ahead with these very settings, else a new one.
      const ahead = await this.ahead.take(job.sessionId, spec);
      const id = ahead?.id ?? (await this.create(spec, runImage));
      active.containerId = id;
      try {
        const result = {
          ...(await this.supervise(id, job, abort, started, active, ahead?.streams)),
          containerId: id,
          runtime,
          startedAhead: ahead !== undefined,
        };
        this.logger.debug(
          `run ${job.actionId} in ${id.slice(0, 12)} ended: exit=${result.exitCode} timedOut=${result.timedOut}`,
        );
        // A run with a call channel has one of its own, never known ahead. A session's first one-off run starts none:
        // high-risk actions are often one-offs in a session, and a container started for nothing costs a start.
        const runs = (this.runsOf.get(job.sessionId) ?? 0) + 1;
        this.runsOf.set(job.sessionId, runs);
        if (!abort.aborted && !job.channel && runs > 1) next = spec;
        return result;
      } finally {
        removal = this.reaper.remove(id, job.sessionId);
        // A container that may still be running (a kill that did not take, a Docker error) is gone before the run
        // returns; a stopped one is removed off the result's path.
        if (!active.stopped) await removal;
      }
    } catch (err) {
      // Whatever Docker did wrong, the next availability check asks it again instead of trusting the cache.
      if (err instanceof DockerError) this.probe.forget();
      throw err;
    } finally {
      const untrack = () => {
        this.runs.delete(active);
        finish();
      };
      // The session's next container starts now, off the result's path; the run stays tracked until it has, so a
      // release or the shutdown that waits for the run finds it.
      const after: Promise<unknown>[] = [];
      if (removal) after.push(removal);
      if (next) after.push(this.ahead.prepare(job.sessionId, next));
      if (after.length > 0) void Promise.allSettled(after).finally(untrack);
      else untrack();
    }
  }

  /** Creates the run's container; a missing image is the tier unavailable, naming the build command. */
  private create(spec: ContainerCreateOptions, image: string): Promise<string> {
    return this.docker.createContainer(spec).catch((err: unknown) => {
      if (!(err instanceof DockerNotFoundError)) throw err;
      this.probe.forget();
      throw new SandboxUnavailableError(
        `container tier: sandbox image ${image} is gone from the Docker engine; build it with \`npm run sandbox:image\``,
        {},
        { cause: err },
      );
    });
  }

  /**
   * Holds nothing between runs; kills any run of the session still going (the run reports `aborted`), then removes
   * every one-off container labelled with the session, whichever engine started it.
   */
  async releaseSession(sessionId: string): Promise<void> {
    const runs = [...this.runs].filter((r) => r.sessionId === sessionId);
    for (const r of runs) r.controller.abort(new Error(`session ${sessionId} released`));
    await Promise.all(runs.map((r) => r.done));
    this.runsOf.delete(sessionId);
    await this.ahead.releaseSession(sessionId);
    // A daemon the probe cannot reach is not asked: the session's end must not wait on it (the reaper's later
    // passes remove what a dead engine left of it).
    if (this.probe.lastAvailable || (await this.probe.current()).value.available) {
      await this.reaper.removeSession(sessionId);
    }
  }

  /**
   * Removes leftovers of engines that died, in the background (start-up must not wait for Docker), and again every
   * `REAP_AGAIN_MS`.
   */
  onApplicationBootstrap(): void {
    // On gVisor, which seccomp profile its runsc needs is found in the background, ahead of the first run.
    void this.probe
      .current()
      .then(({ image, runtime }) =>
        image ? this.cleanups.track(this.gvisorSeccomp.clone3For(image, runtime)) : undefined,
      );
    if (!this.options.reapOnStart) return;
    const reap = () =>
      this.cleanups.track(
        this.reapLeftovers().then((removed) => {
          if (removed.length > 0)
            this.logger.log(`removed ${removed.length} leftover container(s) of other engines`);
        }),
      );
    reap();
    this.reapTimer = setInterval(reap, REAP_AGAIN_MS).unref();
  }

  /**
   * Removes one-off containers left behind (SECURITY.md #17; see `ContainerReaper.reapLeftovers`): every container
   * of an engine dead on this host, whatever its session, and those of unknown engines whose session `isLive`
   * (default: the `isSessionLive` option) says is not live. This engine's running containers are never touched.
   * Resolves with the removed ids.
   */
  reapLeftovers(options: ReapOptions = {}): Promise<string[]> {
    return this.reaper.reapLeftovers(new Set([...this.runs].map((r) => r.containerId)), options);
  }

  /** Kills every run, then removes every container carrying this engine's label. */
  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.reapTimer);
    this.probe.close();
    this.gvisorSeccomp.close();
    const runs = [...this.runs];
    for (const r of runs) r.controller.abort(new Error('engine shutting down'));
    await Promise.all(runs.map((r) => r.done));
    await this.ahead.close();
    await this.cleanups.drain();
    if (runs.length === 0 && this.reaper.pending === 0 && !this.probe.lastAvailable) {
      this.hosts.close();
      return; // never reached Docker
    }
    await this.reaper.removeAtShutdown();
    this.hosts.close();
  }

  /** The containers' /etc/hosts on the host; a file that cannot be written makes the run fail, naming it. */
  private hostsFile(): string {
    try {
      return this.hosts.path();
    } catch (err) {
      throw new SandboxInternalError(
        'HOSTS_FILE',
        `container tier: cannot write the sandbox /etc/hosts: ${(err as Error).message}`,
      );
    }
  }

  /**
   * Attaches, feeds stdin, starts, enforces timeout, abort and output caps, and reads the outcome. A container started
   * ahead comes with its `attached` streams and is running already.
   */
  private async supervise(
    id: string,
    job: TierJob,
    signal: AbortSignal,
    started: number,
    active: ActiveRun,
    attached?: ContainerStreams,
  ): Promise<TierRunResult> {
    const streams = attached ?? (await this.docker.attach(id));
    const stopWaiting = new AbortController();
    const supervisor = new RunSupervisor({
      job,
      clock: this.clock,
      startedAt: started,
      kill: (why) => {
        // Past the cap nothing more is wanted: stop reading so nothing more is buffered.
        if (why === 'output') streams.destroy();
        this.docker
          .kill(id)
          .catch((err: Error) => this.logger.warn(`kill ${id.slice(0, 12)}: ${err.message}`));
      },
      // A kill that does not take (a daemon hiccup) must not hang the run: stop waiting; removal kills by force.
      forceClose: { afterMs: KILL_GRACE_MS, close: () => stopWaiting.abort() },
    });
    try {
      for (const [stream, name] of [
        [streams.stdout, 'stdout'],
        [streams.stderr, 'stderr'],
      ] as const) {
        stream.on('data', (chunk: Buffer) => supervisor.push(name, chunk));
        stream.on('error', () => undefined);
      }
      streams.stdin.on('error', () => undefined); // EPIPE when the code exits without reading its stdin
      streams.stdin.end(containerStdin(job));

      if (signal.aborted) {
        active.stopped = !attached;
        return { ...supervisor.collected(), aborted: true };
      }
      try {
        if (!attached) await this.docker.start(id);
      } catch (err) {
        // The daemon refused to run the command (bad interpreter path, runtime error): the run could not start.
        if (err instanceof DockerApiError && !(err instanceof DockerNotFoundError)) {
          active.stopped = true;
          return { ...supervisor.collected(), spawnError: `cannot start the container: ${err.message}` };
        }
        throw err;
      }

      supervisor.watch({ timeoutMs: job.timeoutMs, signal });
      let exit: ContainerExit | undefined;
      try {
        exit = await this.docker.wait(id, { signal: stopWaiting.signal });
      } catch (err) {
        if (!(stopWaiting.signal.aborted && err instanceof DockerTimeoutError)) throw err;
        this.logger.warn(`container ${id.slice(0, 12)} did not stop within ${KILL_GRACE_MS} ms of a kill`);
      }
      supervisor.stop();
      if (exit) active.stopped = true;
      // Output still in flight after the exit arrives on the same connection: let it drain briefly.
      if (exit) await settleWithin(streams.closed, DRAIN_MS);
      streams.destroy();

      const ended = supervisor.reason;
      const result = supervisor.result();
      if (exit) {
        result.exitCode = exit.statusCode;
        if (exit.statusCode > 128) result.signal = signalOfExit(exit.statusCode);
      } else {
        result.signal = 'SIGKILL';
      }
      const limits = this.options.limits;
      const limit = enforcedLimit(
        result,
        {
          oomKilled: exit?.statusCode === SIGKILL_EXIT && (await this.oomKilled(id, ended !== undefined)),
          outputCapped: ended === 'output',
          fileSize: exit?.statusCode === SIGXFSZ_EXIT,
        },
        {
          memory: `its ${formatBytes(limits.memoryBytes)} memory limit`,
          output: job.output,
          fileSizeBytes: limits.fsizeBytes,
        },
      );
      if (limit) result.limit = limit;
      return result;
    } finally {
      supervisor.stop();
      streams.destroy();
    }
  }

  /** Docker's OOM flag; an exit the tier did not cause gets more looks, as the flag may trail the exit. */
  private async oomKilled(id: string, killedByTier: boolean): Promise<boolean> {
    try {
      if ((await this.docker.inspect(id)).oomKilled) return true;
      if (killedByTier) return false;
      for (let i = 0; i < OOM_RECHECKS; i++) {
        await new Promise((resolve) => setTimeout(resolve, OOM_RECHECK_MS * 2 ** i));
        if ((await this.docker.inspect(id)).oomKilled) return true;
      }
      return false;
    } catch (err) {
      this.logger.warn(`inspect ${id.slice(0, 12)}: ${(err as Error).message}`);
      return false;
    }
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
