import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Language } from '@switchyard/common';
import { SANDBOX_OPTIONS } from '../sandbox.constants';
import { SandboxInternalError, SandboxUnavailableError } from '../sandbox.errors';
import type { ResolvedSandboxOptions } from '../sandbox.options';
import { SandboxTier } from '../sandbox-tier.port';
import type { TierAvailability, TierJob, TierRunResult } from '../sandbox.types';
import {
  buildLauncherCommand,
  buildRunArgs,
  CODE_TARGET,
  detectSystemLayout,
  encodeArgs,
  interpreterBind,
  type ReadOnlyBind,
  SANDBOX_UID,
  type RlimitSettings,
  type SystemLayout,
} from './bwrap-command';
import { OutputCollector } from '../output-collector';
import { ProcessLauncher, type LaunchedProcess } from './process-launcher';
import { ProcessLimiter, type LimitGroup } from './process-limiter';

const GiB = 1024 ** 3;
/** V8 reserves this much address space up front; a smaller RLIMIT_AS stops Node from starting. */
const NODE_MIN_ADDRESS_SPACE = 4 * GiB;
/** After a kill, give the kernel this long to close the pipes before the streams are torn down by force. */
const FORCE_CLOSE_MS = 1500;
const PROBE_TIMEOUT_MS = 10_000;

const EXTENSION: Record<Language, string> = { python: 'py', node: 'js', bash: 'sh' };
/** Runs the code file as `__main__`, with its real name in tracebacks. */
const PYTHON_BOOTSTRAP =
  `__file__ = ${JSON.stringify(CODE_TARGET.python)}; import sys; sys.argv[0] = __file__; del sys; ` +
  `exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))`;
const SIGNAL_NAMES = new Map(Object.entries(os.constants.signals).map(([name, num]) => [num, name]));
const SIGXCPU = os.constants.signals.SIGXCPU;
const SIGXFSZ = os.constants.signals.SIGXFSZ;

type LaunchCommand = ReturnType<typeof buildLauncherCommand>;

interface Executable {
  /** Resolved host path, also valid inside the sandbox. */
  path?: string;
  /** Why it cannot be used. */
  problem?: string;
}

interface Prepared {
  tempDir: string;
  codeDir: string;
  etc: { passwd: string; group: string };
  layout: SystemLayout;
  interpreters: Record<Language, Executable>;
  /** Per language: extra binds plus the interpreter's own directory when it lives outside the system dirs. */
  readOnlyBinds: Record<Language, ReadOnlyBind[]>;
  /** Interpreter paths as seen inside the sandbox. */
  sandboxInterpreters: Record<Language, string | undefined>;
  shell?: string;
}

/**
 * A launched bubblewrap that is still reading its options, already inside its own cgroup. Slots are made ahead
 * of time (`warmSlots`) because spawning from a large Node process and moving a task between cgroups (which
 * waits for an RCU grace period) each cost milliseconds that would otherwise be paid by every run.
 */
interface Slot {
  /** The launch command (interpreter, rlimits, confinement) is fixed at spawn; a slot fits runs with the same. */
  readonly key: string;
  readonly proc: LaunchedProcess;
  readonly group?: LimitGroup;
  /** Resolves once bubblewrap is in its cgroup; rejects if it could not be moved. */
  readonly ready: Promise<void>;
  exited: boolean;
}

const resolveExecutable = (p: string): Executable => {
  try {
    const real = fs.realpathSync(p);
    fs.accessSync(real, fs.constants.X_OK);
    return { path: real };
  } catch (err) {
    return { problem: `${p}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
};

/**
 * The subprocess tier: each run is a fresh bubblewrap sandbox (all namespaces unshared, no network, uid 65534,
 * no capabilities, read-only system dirs, only /workspace and size-capped tmpfs writable), under rlimits and,
 * where the host allows, a per-run cgroup for memory and pids. Killing the outer bubblewrap kills the sandbox's
 * pid namespace, so nothing a run started outlives it, whether it ends normally, times out or is aborted.
 */
@Injectable()
export class BubblewrapTier extends SandboxTier implements OnApplicationShutdown {
  readonly name = 'subprocess' as const;
  private readonly logger = new Logger(BubblewrapTier.name);
  private prepared?: Prepared;
  private probed?: Promise<TierAvailability>;
  private readonly idle: Slot[] = [];
  private readonly running = new Set<AbortController>();
  private readonly cleanups = new Set<Promise<unknown>>();
  private shuttingDown = false;

  constructor(
    @Inject(SANDBOX_OPTIONS) private readonly options: ResolvedSandboxOptions,
    private readonly launcher: ProcessLauncher,
    private readonly limiter: ProcessLimiter,
  ) {
    super();
  }

  /** Probes once by starting a real sandbox, and caches the answer. Never throws. */
  availability(): Promise<TierAvailability> {
    if (this.shuttingDown)
      return Promise.resolve({ available: false, reason: 'the engine is shutting down' });
    this.probed ??= this.probe();
    return this.probed;
  }

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const availability = await this.availability();
    if (!availability.available) throw new SandboxUnavailableError(`subprocess tier: ${availability.reason}`);
    const prepared = this.prepare();
    const interpreter = prepared.interpreters[job.language];
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
    const inside = prepared.sandboxInterpreters[job.language] ?? interpreter.path;
    return this.execute(job, this.argv(job.language, inside), signal, true);
  }

  /** Holds nothing per session: every run is a fresh sandbox. */
  async releaseSession(): Promise<void> {}

  async onApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    for (const controller of this.running) controller.abort(new Error('engine shutting down'));
    for (const slot of this.idle.splice(0)) this.discard(slot);
    while (this.cleanups.size > 0) await Promise.allSettled([...this.cleanups]);
    await this.limiter.dispose();
    if (this.prepared) fs.rmSync(this.prepared.tempDir, { recursive: true, force: true });
  }

  private argv(language: Language, interpreter: string): string[] {
    switch (language) {
      case 'python':
        // -s: no user site-packages (their .pth files would run before the code). -c gives the code `python -c`
        // semantics: cwd (/workspace) first on sys.path for its own modules, yet no sitecustomize from there.
        return [interpreter, '-s', '-c', PYTHON_BOOTSTRAP];
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

  /** Engine-owned temp dir, synthetic /etc files and the resolved host layout; done once. */
  private prepare(): Prepared {
    if (this.prepared) return this.prepared;
    const base = this.options.tempDir ?? os.tmpdir();
    fs.mkdirSync(base, { recursive: true });
    const tempDir = fs.mkdtempSync(path.join(base, 'switchyard-sandbox-'));
    const layout = detectSystemLayout();
    const i = this.options.interpreters;
    const interpreters = {
      python: resolveExecutable(i.python),
      node: resolveExecutable(i.node),
      bash: resolveExecutable(i.bash),
    };
    const extra = [...new Set(this.options.extraReadOnlyBinds)].map((d) => ({ source: d, target: d }));
    const placed = (language: Language, interp: Executable) =>
      interp.path ? interpreterBind(interp.path, layout.boundDirs, language) : undefined;
    const inSandbox = {
      python: placed('python', interpreters.python),
      node: placed('node', interpreters.node),
      bash: placed('bash', interpreters.bash),
    };
    const binds = (language: Language) => {
      const own = inSandbox[language]?.bind;
      return own ? [...extra, own] : extra;
    };
    this.prepared = {
      tempDir,
      codeDir: path.join(tempDir, 'code'),
      etc: { passwd: path.join(tempDir, 'passwd'), group: path.join(tempDir, 'group') },
      layout,
      interpreters,
      readOnlyBinds: { python: binds('python'), node: binds('node'), bash: binds('bash') },
      sandboxInterpreters: {
        python: inSandbox.python?.path,
        node: inSandbox.node?.path,
        bash: inSandbox.bash?.path,
      },
      shell: resolveExecutable(this.options.shellPath).path,
    };
    this.writeScaffold(this.prepared);
    return this.prepared;
  }

  /** The code dir and a synthetic passwd/group that know only the sandbox user (not all of the host's /etc). */
  private writeScaffold(p: Prepared): void {
    fs.mkdirSync(p.codeDir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(p.etc.passwd, `nobody:x:${SANDBOX_UID}:${SANDBOX_UID}:nobody:/tmp:/usr/sbin/nologin\n`, {
      mode: 0o644,
    });
    fs.writeFileSync(p.etc.group, `nogroup:x:${SANDBOX_UID}:\n`, { mode: 0o644 });
    // bubblewrap runs as `runAs` and must reach the code files and synthetic /etc it binds.
    const runAs = this.options.runAs;
    if (runAs) for (const dir of [p.tempDir, p.codeDir]) fs.chownSync(dir, runAs.uid, runAs.gid);
  }

  private async probe(): Promise<TierAvailability> {
    const o = this.options;
    for (const [what, p, hint] of [
      ['bubblewrap', o.bwrapPath, 'install the bubblewrap package'],
      ['prlimit', o.prlimitPath, 'install util-linux'],
      ['shell', o.shellPath, 'set shellPath'],
    ]) {
      const found = resolveExecutable(p);
      if (!found.path) return { available: false, reason: `${what} not usable (${found.problem}); ${hint}` };
    }
    let prepared: Prepared;
    try {
      prepared = this.prepare();
    } catch (err) {
      return { available: false, reason: `cannot prepare the temp dir: ${(err as Error).message}` };
    }
    const details = {
      limits: this.limiter.mode,
      cgroup: this.limiter.description,
      interpreters: Object.fromEntries(
        Object.entries(prepared.interpreters).map(([lang, i]) => [lang, i.path ?? `missing (${i.problem})`]),
      ),
    };
    const workspaceDir = path.join(prepared.tempDir, 'probe-workspace');
    try {
      fs.mkdirSync(workspaceDir, { recursive: true });
      if (o.runAs) fs.chownSync(workspaceDir, o.runAs.uid, o.runAs.gid);
      const result = await this.execute(
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
        [prepared.shell!, '-c', `test -w /workspace && test ! -w /usr && test "$(id -u)" = ${SANDBOX_UID}`],
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
    job: TierJob,
    argv: string[],
    signal?: AbortSignal,
    warm = false,
  ): Promise<TierRunResult> {
    const started = performance.now();
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    const prepared = this.prepare();
    const codeFile = this.writeCode(prepared, job);
    // Everything fixed at spawn (interpreter, rlimits, confinement) decides which warm slot fits.
    const launch = buildLauncherCommand({
      prlimitPath: this.options.prlimitPath,
      bwrapPath: this.options.bwrapPath,
      rlimits: this.rlimits(job),
      sandbox: {
        layout: prepared.layout,
        etc: prepared.etc,
        readOnlyBinds: prepared.readOnlyBinds[job.language],
        tmpfsBytes: this.options.subprocess.tmpfsBytes,
      },
      argv,
    });
    const key = JSON.stringify(launch);
    const controller = new AbortController();
    this.running.add(controller);
    let slot: Slot | undefined;
    try {
      slot = this.takeSlot(key, launch);
      try {
        await slot.ready;
      } catch (err) {
        throw new SandboxInternalError(
          'CGROUP_JOIN',
          `cannot move the sandbox into its cgroup: ${(err as Error).message}`,
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
        env: job.env,
      });
      this.logger.debug(`run ${job.actionId} (${job.language}) in pid ${slot.proc.pid ?? '?'}`);
      const abort = AbortSignal.any(signal ? [signal, controller.signal] : [controller.signal]);
      const supervised = this.supervise(slot, job, args, abort, started);
      // Spawning blocks the event loop for a few ms, so the next slot is made once this run has its options.
      if (warm) setImmediate(() => this.refill(key, launch));
      const result = await supervised;
      this.logger.debug(`run ${job.actionId} ended: exit=${result.exitCode} timedOut=${result.timedOut}`);
      return result;
    } finally {
      this.running.delete(controller);
      if (slot && !slot.exited) slot.proc.killGroup();
      if (slot?.group) this.track(slot.group.destroy());
      this.track(fs.promises.rm(codeFile, { force: true }));
    }
  }

  /** Writes the code where only this run's sandbox will see it (read-only, at `CODE_TARGET`). */
  private writeCode(prepared: Prepared, job: TierJob): string {
    const safeId = job.actionId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40);
    const codeFile = path.join(
      prepared.codeDir,
      `${safeId}-${randomBytes(6).toString('hex')}.${EXTENSION[job.language]}`,
    );
    try {
      if (!fs.existsSync(prepared.etc.passwd)) this.writeScaffold(prepared); // someone cleaned the temp dir
      fs.writeFileSync(codeFile, job.code, { mode: 0o644, flag: 'wx' });
      return codeFile;
    } catch (err) {
      throw new SandboxInternalError('CODE_FILE', `cannot write the code file: ${(err as Error).message}`, {
        retriable: true,
        cause: err,
      });
    }
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

  private takeSlot(key: string, launch: LaunchCommand): Slot {
    for (;;) {
      const i = this.idle.findIndex((s) => s.key === key);
      if (i === -1) return this.createSlot(key, launch);
      const [slot] = this.idle.splice(i, 1);
      if (!slot.exited) return slot;
      this.discard(slot);
    }
  }

  /** Keeps one idle slot for `key`, evicting the oldest others beyond `warmSlots`. */
  private refill(key: string, launch: LaunchCommand): void {
    const max = this.options.subprocess.warmSlots;
    if (this.shuttingDown || max === 0 || this.idle.some((s) => s.key === key && !s.exited)) return;
    while (this.idle.length >= max) this.discard(this.idle.shift()!);
    try {
      this.idle.push(this.createSlot(key, launch));
    } catch (err) {
      this.logger.warn(`could not prepare a warm sandbox: ${(err as Error).message}`);
    }
  }

  /**
   * Launches bubblewrap in a fresh cgroup. It blocks reading the run's options, so it is moved into the cgroup
   * before it creates any process: everything in the sandbox is born inside it.
   */
  private createSlot(key: string, { command, args }: LaunchCommand): Slot {
    // The engine pid prefix lets a later engine tell leftovers of dead engines from live groups.
    const name = `e${process.pid}-${randomBytes(6).toString('hex')}`;
    const limits = { memoryBytes: this.options.subprocess.memoryBytes, pids: this.options.subprocess.pids };
    const group = this.limiter.create(name, limits);
    let proc: LaunchedProcess;
    try {
      // Empty environment: the child's comes only from `--setenv` in the options.
      const runAs = this.options.runAs;
      proc = this.launcher.launch({ command, args, env: {}, cwd: '/', uid: runAs?.uid, gid: runAs?.gid });
    } catch (err) {
      if (group) this.track(group.destroy());
      throw err;
    }
    const pid = proc.pid;
    const ready = group && pid !== undefined ? group.join(pid) : Promise.resolve();
    ready.catch(() => undefined); // reported when the slot is used
    const slot: Slot = { key, proc, group, ready, exited: false };
    void proc.closed.then(() => (slot.exited = true));
    return slot;
  }

  private discard(slot: Slot): void {
    if (!slot.exited) slot.proc.killGroup();
    this.track(slot.proc.closed);
    if (slot.group) this.track(slot.group.destroy());
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
    const stdout = new OutputCollector(job.output, (t) => job.onOutput?.('stdout', t));
    const stderr = new OutputCollector(job.output, (t) => job.onOutput?.('stderr', t));
    let ended: 'timeout' | 'output' | 'abort' | undefined;
    let forceClose: NodeJS.Timeout | undefined;
    const kill = (why: NonNullable<typeof ended>) => {
      ended ??= why;
      if (!slot.exited) proc.killGroup();
      void group?.kill();
      forceClose ??= setTimeout(() => {
        for (const s of [proc.stdout, proc.stderr, proc.status]) s.destroy();
      }, FORCE_CLOSE_MS);
    };
    for (const [stream, collector] of [
      [proc.stdout, stdout],
      [proc.stderr, stderr],
    ] as const) {
      stream.on('data', (chunk: Buffer) => {
        if (collector.push(chunk)) return;
        // Past the cap: stop reading so nothing more is buffered, and end the run.
        stream.destroy();
        kill('output');
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

    const timer = setTimeout(() => kill('timeout'), job.timeoutMs);
    const onAbort = () => kill('abort');
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });

    const exit = await proc.closed;
    clearTimeout(timer);
    clearTimeout(forceClose);
    signal.removeEventListener('abort', onAbort);
    // The pid namespace is normally gone already; this catches anything the kernel has not reaped yet.
    await group?.kill();
    const report = group?.report();

    const result: TierRunResult = {
      timedOut: ended === 'timeout',
      stdout: stdout.text(),
      stderr: stderr.text(),
      truncated: { stdout: stdout.truncated, stderr: stderr.truncated },
      redacted: stdout.redacted || stderr.redacted,
      durationMs: Math.round(performance.now() - started),
    };
    if (ended === 'abort') result.aborted = true;
    if (exit.error) {
      result.spawnError = `cannot start ${this.options.prlimitPath}: ${exit.error.message}`;
      return result;
    }
    const childExit = /"exit-code"\s*:\s*(\d+)/.exec(status);
    if (childExit) {
      result.exitCode = Number(childExit[1]);
      if (result.exitCode > 128) result.signal = SIGNAL_NAMES.get(result.exitCode - 128);
    } else if (ended) {
      result.signal = exit.signal ?? 'SIGKILL';
    } else if (!report?.oomKilled) {
      // No exit-code: bubblewrap failed before the code started, an engine-side spawn failure.
      result.spawnError = `sandbox setup failed: ${result.stderr.trim() || `exit ${exit.code ?? exit.signal}`}`;
      return result;
    }

    const s = this.options.subprocess;
    if (report?.oomKilled) {
      result.limit = {
        code: 'OUT_OF_MEMORY',
        message: `out of memory: the run went over its ${formatBytes(s.memoryBytes)} limit`,
      };
    } else if (ended === 'output') {
      result.limit = {
        code: 'OUTPUT_CAP',
        message: `output over ${formatBytes(job.output.maxBytes)} or ${job.output.maxLines} lines on a stream; the run was stopped`,
      };
    } else if (result.exitCode === 128 + SIGXCPU) {
      result.limit = { code: 'CPU_TIME', message: 'CPU time limit reached' };
    } else if (result.exitCode === 128 + SIGXFSZ) {
      result.limit = {
        code: 'FILE_SIZE',
        message: `file size limit of ${formatBytes(s.fileSizeBytes)} reached`,
      };
    } else if (report?.pidsLimitHit && (result.timedOut || result.exitCode !== 0)) {
      result.limit = { code: 'PIDS', message: `process limit of ${s.pids} reached` };
    }
    return result;
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err: unknown) => this.logger.warn(`cleanup failed: ${(err as Error).message}`));
    this.cleanups.add(tracked);
    void tracked.finally(() => this.cleanups.delete(tracked));
  }
}

function emptyResult(durationMs: number): TierRunResult {
  return { timedOut: false, stdout: '', stderr: '', truncated: { stdout: false, stderr: false }, durationMs };
}

function formatBytes(n: number): string {
  return n % 2 ** 20 === 0 ? `${n / 2 ** 20} MiB` : `${n} bytes`;
}
