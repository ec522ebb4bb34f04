import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { CLOCK, type Clock, type Language, systemClock } from '@switchyard/common';
import {
  CALL_DIR_TARGET,
  CALL_SOCKET_TARGET,
  checkCallSocketDir,
  withCallSocket,
} from '../../core/call-channel';
import { SANDBOX_OPTIONS } from '../../core/sandbox.constants';
import { SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { ResolvedSandboxOptions } from '../../core/sandbox.options';
import { SandboxTier } from '../../core/sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../../core/sandbox.types';
import { SYSTEM_ROOT, type SystemRoot } from '../../core/system-root.port';
import { signalExit, signalOfExit } from '../../core/supervision/exit-status';
import { emptyResult, enforcedLimit, formatBytes } from '../../core/supervision/limit-messages';
import { PendingCleanups } from '../../core/supervision/pending-cleanups';
import { RunSupervisor } from '../../core/supervision/run-supervisor';
import {
  buildLauncherCommand,
  buildRunArgs,
  CODE_TARGET,
  encodeArgs,
  type ReadOnlyBind,
  SANDBOX_UID,
  type RlimitSettings,
} from './bwrap-command';
import { ProcessLauncher } from './process-launcher';
import { ProcessLimiter } from './process-limiter';
import { resolveExecutable, type Scaffold, writeCodeFile } from './sandbox-scaffold';
import { SystemScaffolds } from './system-scaffolds';
import { SessionGroups } from './session-groups';
import { RUNNER_TARGET, SubprocessBoxes } from './subprocess-boxes';
import { BoxRuns } from './box-runs';
import { type Slot, WarmSlots } from './warm-slots';

const GiB = 1024 ** 3;
/** V8 reserves this much address space up front; a smaller RLIMIT_AS stops Node from starting. */
const NODE_MIN_ADDRESS_SPACE = 4 * GiB;
/** After a kill, give the kernel this long to close the pipes before the streams are torn down by force. */
const FORCE_CLOSE_MS = 1500;
const PROBE_TIMEOUT_MS = 10_000;

/** Runs the code file as `__main__`, with its real name in tracebacks. */
const PYTHON_BOOTSTRAP =
  `__file__ = ${JSON.stringify(CODE_TARGET.python)}; import sys; sys.argv[0] = __file__; del sys; ` +
  `exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))`;
const SIGXCPU_EXIT = signalExit('SIGXCPU');
const SIGXFSZ_EXIT = signalExit('SIGXFSZ');

/**
 * The subprocess tier: each run is a fresh bubblewrap sandbox (all namespaces unshared, no network, the image's sandbox uid 10001,
 * no capabilities, read-only system dirs, only /workspace and size-capped tmpfs writable), at niceness 19, under
 * rlimits and, where the host allows, a per-run cgroup for memory, pids and CPU, under a group per session whose CPU
 * quota all the session's runs, kernels and processes share (`SessionGroups`). Killing the outer bubblewrap kills
 * the sandbox's pid namespace, so nothing a run started outlives it, whether it ends normally, times out or is
 * aborted; and the engine's death kills the outer bubblewrap (SECURITY.md #23). At start-up the tier removes what
 * dead engines left behind: marked launchers and their cgroups.
 */
@Injectable()
export class BubblewrapTier extends SandboxTier implements OnModuleInit, OnApplicationShutdown {
  readonly name = 'subprocess' as const;
  private readonly logger = new Logger(BubblewrapTier.name);
  private readonly clock: Clock;
  private readonly cleanups = new PendingCleanups(this.logger);
  private readonly slots: WarmSlots;
  private readonly sessions: SessionGroups;
  /** Sessions' long-lived sandboxes for kernels and background processes. */
  override readonly stateful: SubprocessBoxes;
  /** Fresh runs of sessions whose box holds running kernels or processes, in that box. */
  private readonly boxRuns: BoxRuns;
  /** Per system (`host`, or an image root's directory), what its sandboxes are built from. */
  private readonly scaffolds: SystemScaffolds;
  private probed?: Promise<TierAvailability>;
  private reaped?: Promise<void>;
  private readonly running = new Set<AbortController>();
  private shuttingDown = false;

  constructor(
    @Inject(SANDBOX_OPTIONS) private readonly options: ResolvedSandboxOptions,
    private readonly launcher: ProcessLauncher,
    private readonly limiter: ProcessLimiter,
    @Optional() @Inject(CLOCK) clock?: Clock,
    /** The sandbox images' roots; without it every sandbox runs the host's system directories. */
    @Optional() @Inject(SYSTEM_ROOT) systemRoot?: SystemRoot,
  ) {
    super();
    this.clock = clock ?? systemClock;
    this.scaffolds = new SystemScaffolds(options, this.logger, systemRoot);
    this.sessions = new SessionGroups(limiter, options.subprocess.sessionCpus, this.cleanups);
    this.slots = new WarmSlots(options, launcher, limiter, this.sessions, this.cleanups, this.logger);
    this.stateful = new SubprocessBoxes(
      options,
      launcher,
      limiter,
      this.sessions,
      (image) => this.scaffolds.scaffold(image),
      this.cleanups,
      this.logger,
    );
    this.boxRuns = new BoxRuns(
      options,
      this.clock,
      (box, why) => this.stateful.discard(box, why),
      this.logger,
    );
  }

  /** Reaps leftovers of dead engines before the first sandbox starts. */
  async onModuleInit(): Promise<void> {
    await this.reapLeftovers();
  }

  /**
   * Probes once by starting a real sandbox, and caches the answer; its details say which system the sandboxes run
   * now (`system`: the image's root, or the host's and why). Never throws.
   */
  async availability(): Promise<TierAvailability> {
    if (this.shuttingDown) return { available: false, reason: 'the engine is shutting down' };
    this.probed ??= this.probe();
    const probed = await this.probed;
    return { ...probed, details: { ...probed.details, system: this.scaffolds.system } };
  }

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const availability = await this.availability();
    if (!availability.available) throw new SandboxUnavailableError(`subprocess tier: ${availability.reason}`);
    const scaffold = await this.scaffolds.scaffold(job.image);
    const interpreter = scaffold.interpreters[job.language];
    if (!interpreter.path) {
      return { ...emptyResult(0), spawnError: `no ${job.language} interpreter (${interpreter.problem})` };
    }
    try {
      if (!fs.statSync(job.workspaceDir).isDirectory()) throw new Error('not a directory');
    } catch (err) {
      throw new SandboxInternalError(
        'WORKSPACE_MISSING',
        `workspace ${job.workspaceDir}: ${(err as Error).message}`,
      );
    }
    if (job.channel) checkCallSocketDir(job.channel);
    // With the session's running servers, in their network namespace (a call channel needs a sandbox of its own).
    const box = job.channel ? undefined : await this.stateful.live(job.sessionId);
    if (box) return this.boxRuns.run(box, job, signal);
    const inside = scaffold.sandboxInterpreters[job.language] ?? interpreter.path;
    // A run with a call channel binds the action's own directory, so no slot launched ahead fits it: it starts cold,
    // and no slot is made ahead for a command no other run will have.
    return this.execute(scaffold, job, this.argv(job.language, inside), signal, !job.channel, job.sessionId);
  }

  /**
   * Every run is a fresh sandbox; what a session holds is its stateful sandbox (kernels, processes) and sandboxes
   * launched ahead for it. Its session cgroup goes with the last of them (and of its runs).
   */
  async releaseSession(sessionId: string): Promise<void> {
    this.slots.forget(sessionId);
    await this.stateful.release(sessionId);
  }

  async onApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    for (const controller of this.running) controller.abort(new Error('engine shutting down'));
    this.slots.close();
    await this.stateful.close();
    this.sessions.close();
    await this.cleanups.drain();
    await this.limiter.dispose();
    this.scaffolds.dispose();
  }

  private argv(language: Language, interpreter: string): string[] {
    switch (language) {
      case 'python':
        // The user site is on: it is the session's home (HOME), where what the session installed with pip lives,
        // as in the pooled and one-off tiers (its .pth files are the session's own code, run in this sandbox). -c
        // gives the code `python -c` semantics: cwd (/workspace) first on sys.path for its own modules, yet no
        // sitecustomize from there.
        return [interpreter, '-c', PYTHON_BOOTSTRAP];
      case 'node':
        // Without a cgroup, V8's heap cap is the only memory bound besides the (large) address-space limit.
        return this.limiter.mode === 'none'
          ? [
              interpreter,
              `--max-old-space-size=${Math.floor(this.options.subprocess.memoryBytes / 2 ** 20)}`,
              CODE_TARGET.node,
            ]
          : [interpreter, CODE_TARGET.node];
      case 'bash':
        return [interpreter, '--noprofile', '--norc', CODE_TARGET.bash];
    }
  }

  /**
   * Kills the launchers of engines that are no longer running, then removes their cgroups with whatever is still
   * in them (SECURITY.md #23). Once per tier; never throws.
   */
  private reapLeftovers(): Promise<void> {
    this.reaped ??= (async () => {
      try {
        const killed = this.launcher.reapOrphans();
        const groups = await this.limiter.reapOrphans();
        if (killed.length > 0 || groups.length > 0) {
          this.logger.warn(
            `removed what dead engines left behind: ${killed.length} sandbox processes, ${groups.length} cgroups`,
          );
        }
      } catch (err) {
        this.logger.warn(`could not reap leftovers of dead engines: ${(err as Error).message}`);
      }
    })();
    return this.reaped;
  }

  private async probe(): Promise<TierAvailability> {
    await this.reapLeftovers();
    const o = this.options;
    for (const [what, p, hint] of [
      ['bubblewrap', o.bwrapPath, 'install the bubblewrap package'],
      ['prlimit', o.prlimitPath, 'install util-linux'],
      ['setpriv', o.setprivPath, 'install util-linux'],
      ['nice', o.nicePath, 'install coreutils'],
      ['shell', o.shellPath, 'set shellPath'],
    ]) {
      const found = resolveExecutable(p);
      if (!found.path) return { available: false, reason: `${what} not usable (${found.problem}); ${hint}` };
    }
    let scaffold: Scaffold;
    try {
      scaffold = await this.scaffolds.scaffold();
    } catch (err) {
      return { available: false, reason: `cannot prepare the temp dir: ${(err as Error).message}` };
    }
    const details = {
      stateful: this.stateful.problem ?? 'available',
      limits: this.limiter.mode,
      cgroup: this.limiter.description,
      interpreters: Object.fromEntries(
        Object.entries(scaffold.interpreters).map(([lang, i]) => [lang, i.path ?? `missing (${i.problem})`]),
      ),
    };
    const workspaceDir = path.join(scaffold.tempDir, 'probe-workspace');
    try {
      fs.mkdirSync(workspaceDir, { recursive: true });
      if (o.runAs) fs.chownSync(workspaceDir, o.runAs.uid, o.runAs.gid);
      const result = await this.execute(
        scaffold,
        {
          actionId: 'probe',
          sessionId: 'probe',
          language: 'bash',
          code: '',
          env: { PATH: '/usr/bin:/bin' },
          timeoutMs: PROBE_TIMEOUT_MS,
          workspaceDir,
          output: { maxBytes: 64 * 1024, maxLines: 100 },
        },
        [scaffold.shell!, '-c', `test -w /workspace && test ! -w /usr && test "$(id -u)" = ${SANDBOX_UID}`],
      );
      if (result.exitCode === 0) {
        this.logger.log(`subprocess tier available; limits: ${this.limiter.description}`);
        return { available: true, details };
      }
      const why =
        result.spawnError ??
        (result.stderr.trim() || `probe exited with ${result.exitCode ?? result.signal}`);
      this.logger.warn(`subprocess tier unavailable: ${why}`);
      return { available: false, reason: `bubblewrap cannot create the sandbox: ${why}`, details };
    } catch (err) {
      return { available: false, reason: `bubblewrap probe failed: ${(err as Error).message}`, details };
    } finally {
      fs.rmSync(workspaceDir, { recursive: true, force: true });
    }
  }

  private async execute(
    scaffold: Scaffold,
    job: TierJob,
    argv: string[],
    signal?: AbortSignal,
    warm = false,
    /** The session whose group the run goes in; none for the probe. */
    session?: string,
  ): Promise<TierRunResult> {
    const started = this.clock.monotonic();
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const codeFile = writeCodeFile(scaffold, job, this.options.runAs);
    // Everything fixed at spawn (interpreter, rlimits, confinement) decides which warm slot fits.
    const launch = buildLauncherCommand({
      setprivPath: this.options.setprivPath,
      nicePath: this.options.nicePath,
      prlimitPath: this.options.prlimitPath,
      bwrapPath: this.options.bwrapPath,
      rlimits: this.rlimits(job),
      sandbox: {
        layout: scaffold.layout,
        etc: scaffold.etc,
        readOnlyBinds: [...scaffold.readOnlyBinds[job.language], ...this.channelBinds(job)],
        tmpfsBytes: this.options.subprocess.tmpfsBytes,
      },
      argv,
    });
    const key = JSON.stringify(launch);
    const controller = new AbortController();
    this.running.add(controller);
    let slot: Slot | undefined;
    try {
      slot = this.slots.take(key, launch, session);
      try {
        await slot.ready;
        // Lets the sandbox start: until now its launcher could not fork (see WarmSlots).
        slot.group?.open();
      } catch (err) {
        throw new SandboxInternalError(
          'CGROUP_JOIN',
          `cannot put the sandbox into its cgroup: ${(err as Error).message}`,
          {
            retriable: true,
            cause: err,
          },
        );
      }
      const args = buildRunArgs({
        workspaceDir: job.workspaceDir,
        codeFile,
        codeTarget: CODE_TARGET[job.language],
        env: withCallSocket(job.env, job.channel && CALL_SOCKET_TARGET),
      });
      this.logger.debug(`run ${job.actionId} (${job.language}) in pid ${slot.proc.pid ?? '?'}`);
      const abort = AbortSignal.any(signal ? [signal, controller.signal] : [controller.signal]);
      const supervised = this.supervise(slot, job, args, abort, started);
      // Spawning blocks the event loop for a few ms, so the next slot is made once this run has its options.
      if (warm) setImmediate(() => this.slots.refill(key, launch, session));
      const result = await supervised;
      this.logger.debug(`run ${job.actionId} ended: exit=${result.exitCode} timedOut=${result.timedOut}`);
      return result;
    } finally {
      this.running.delete(controller);
      if (slot) this.slots.release(slot);
      this.cleanups.track(fs.promises.rm(codeFile, { force: true }));
    }
  }

  /**
   * A run with a call channel sees the channel's directory read-only at CALL_DIR_TARGET (a filesystem socket: it
   * reaches the engine although the network namespace stays unshared; a read-only bind still lets the code connect)
   * and the runner directory at RUNNER_TARGET, where the skill SDK lives, as in the container image.
   */
  private channelBinds(job: TierJob): ReadOnlyBind[] {
    if (!job.channel) return [];
    const runnerDir = this.options.stateful.runnerDir;
    return [
      { source: job.channel.socketDir, target: CALL_DIR_TARGET },
      ...(runnerDir ? [{ source: runnerDir, target: RUNNER_TARGET }] : []),
    ];
  }

  private rlimits(job: TierJob): RlimitSettings {
    const s = this.options.subprocess;
    let addressSpaceBytes = s.addressSpaceBytes ?? (this.limiter.mode === 'none' ? s.memoryBytes : undefined);
    if (addressSpaceBytes !== undefined && job.language === 'node') {
      addressSpaceBytes = Math.max(addressSpaceBytes, NODE_MIN_ADDRESS_SPACE);
    }
    return {
      addressSpaceBytes,
      fileSizeBytes: s.fileSizeBytes,
      openFiles: s.openFiles,
      cpuSeconds: s.cpuSeconds ?? Math.ceil(job.timeoutMs / 1000) + 1,
    };
  }

  /** Hands bubblewrap its options, streams output within caps, enforces timeout and abort, reads the outcome. */
  private async supervise(
    slot: Slot,
    job: TierJob,
    args: string[],
    signal: AbortSignal,
    started: number,
  ): Promise<TierRunResult> {
    const { proc, group } = slot;
    const supervisor = new RunSupervisor({
      job,
      clock: this.clock,
      startedAt: started,
      kill: () => {
        if (!slot.exited) proc.killGroup();
        void group?.kill();
      },
      forceClose: {
        afterMs: FORCE_CLOSE_MS,
        close: () => {
          for (const s of [proc.stdout, proc.stderr, proc.status]) s.destroy();
        },
      },
    });
    for (const [stream, name] of [
      [proc.stdout, 'stdout'],
      [proc.stderr, 'stderr'],
    ] as const) {
      stream.on('data', (chunk: Buffer) => {
        // Past the cap: stop reading so nothing more is buffered (the supervisor ends the run).
        if (!supervisor.push(name, chunk)) stream.destroy();
      });
      stream.on('error', () => undefined);
    }
    let status = '';
    proc.status.on('data', (chunk: Buffer) => {
      if (status.length < 4096) status += chunk.toString('utf8');
    });
    proc.status.on('error', () => undefined);
    for (const w of [proc.control, proc.stdin]) w.on('error', () => undefined); // EPIPE if it died early
    proc.control.end(encodeArgs(args));
    proc.stdin.end(job.stdin ?? '');

    supervisor.watch({ timeoutMs: job.timeoutMs, signal });
    const exit = await proc.closed.finally(() => supervisor.stop());
    // The pid namespace is normally gone already; this catches anything the kernel has not reaped yet.
    await group?.kill();
    const report = group?.report();

    const ended = supervisor.reason;
    const result = supervisor.result();
    if (exit.error) {
      result.spawnError = `cannot start ${this.options.prlimitPath}: ${exit.error.message}`;
      return result;
    }
    const childExit = /"exit-code"\s*:\s*(\d+)/.exec(status);
    if (childExit) {
      result.exitCode = Number(childExit[1]);
      if (result.exitCode > 128) result.signal = signalOfExit(result.exitCode);
    } else if (ended) {
      result.signal = exit.signal ?? 'SIGKILL';
    } else if (!report?.oomKilled) {
      // No exit-code: bubblewrap failed before the code started, an engine-side spawn failure.
      result.spawnError = `sandbox setup failed: ${result.stderr.trim() || `exit ${exit.code ?? exit.signal}`}`;
      return result;
    }

    const s = this.options.subprocess;
    const limit = enforcedLimit(
      result,
      {
        oomKilled: report?.oomKilled,
        outputCapped: ended === 'output',
        cpuTime: result.exitCode === SIGXCPU_EXIT,
        fileSize: result.exitCode === SIGXFSZ_EXIT,
        pidsLimitHit: report?.pidsLimitHit,
      },
      {
        memory: `its ${formatBytes(s.memoryBytes)} limit`,
        output: job.output,
        fileSizeBytes: s.fileSizeBytes,
        pids: s.pids,
      },
    );
    if (limit) result.limit = limit;
    return result;
  }
}
