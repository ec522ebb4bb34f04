import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { Logger } from '@nestjs/common';
import { FakeOutput } from '../../../test/fake-output';
import { SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import { resolveSandboxOptions, type SandboxModuleOptions } from '../../core/sandbox.options';
import { CALL_SOCKET_ENV, type TierJob } from '../../core/sandbox.types';
import { SystemRoot, type SystemRootAnswer } from '../../core/system-root.port';
import { BubblewrapTier } from './bubblewrap-tier';
import { NoCgroupLimiter } from './cgroup-limiter';
import { ENGINE_MARK_ENV, formatEngineMark } from './engine-mark';
import { ProcessLauncher, type LaunchedProcess, type LaunchSpec, type ProcessExit } from './process-launcher';
import {
  ProcessLimiter,
  type GroupLimits,
  type GroupOptions,
  type LimitGroup,
  type LimitGroupReport,
  type LimiterMode,
} from './process-limiter';

/** What a fake process does once it has its options, like a program would. */
type Program = (p: FakeProcess) => void;

class FakeProcess extends FakeOutput implements LaunchedProcess {
  readonly stdin = new PassThrough();
  readonly status = new PassThrough();
  readonly control = new PassThrough();
  readonly closed: Promise<ProcessExit>;
  readonly started: Promise<number>;
  options: string[] = [];
  stdinText = '';
  kills = 0;
  private finish!: (exit: ProcessExit) => void;
  private done = false;

  constructor(
    readonly pid: number,
    readonly spec: LaunchSpec,
    program: Program,
  ) {
    super();
    this.started = Promise.resolve(pid);
    this.closed = new Promise((resolve) => (this.finish = resolve));
    this.stdin.on('data', (c: Buffer) => (this.stdinText += c.toString()));
    const chunks: Buffer[] = [];
    this.control.on('data', (c: Buffer) => chunks.push(c));
    this.control.on('end', () => {
      this.options = Buffer.concat(chunks).toString().split('\0').slice(0, -1);
      this.status.write(`{ "child-pid": ${pid + 1} }\n`);
      program(this);
    });
  }

  /** The code exited: bubblewrap reports the code, then everything closes. */
  exit(code: number): void {
    this.status.write(`{ "exit-code": ${code} }\n`);
    this.close({ code, signal: null });
  }
  /** bubblewrap failed before the code ran: no exit-code. */
  fail(message: string): void {
    this.stderr.write(message);
    this.close({ code: 1, signal: null });
  }
  killGroup(): void {
    this.kills++;
    this.close({ code: null, signal: 'SIGKILL' });
  }
  private close(exit: ProcessExit): void {
    if (this.done) return;
    this.done = true;
    for (const s of [this.stdout, this.stderr, this.status]) s.end();
    setImmediate(() => this.finish(exit));
  }
}

class FakeLauncher extends ProcessLauncher {
  readonly launched: FakeProcess[] = [];
  /** How many had been launched at each reap. */
  readonly reaps: number[] = [];
  program: Program = (p) => p.exit(0);
  launch(spec: LaunchSpec): FakeProcess {
    const proc = new FakeProcess(1000 + this.launched.length * 10, spec, (p) => this.program(p));
    this.launched.push(proc);
    return proc;
  }
  override reapOrphans(): number[] {
    this.reaps.push(this.launched.length);
    return [];
  }
}

class FakeGroup implements LimitGroup {
  readonly joined: number[] = [];
  destroyed = false;
  report_: LimitGroupReport = { oomKilled: false, oomKills: 0, pidsLimitHit: false };
  joinError?: Error;
  opened = false;
  constructor(
    readonly name: string,
    readonly limits: GroupLimits,
    readonly options: GroupOptions,
  ) {}
  open(): void {
    this.opened = true;
  }
  async join(pid: number): Promise<void> {
    if (this.joinError) throw this.joinError;
    this.joined.push(pid);
  }
  async kill(): Promise<void> {}
  report(): LimitGroupReport {
    return this.report_;
  }
  async destroy(): Promise<void> {
    this.destroyed = true;
  }
}

class FakeLimiter extends ProcessLimiter {
  readonly mode: LimiterMode = 'cgroup-v2';
  readonly description = 'fake cgroups';
  readonly groups: FakeGroup[] = [];
  reaps = 0;
  next?: (g: FakeGroup) => void;
  create(name: string, limits: GroupLimits, options: GroupOptions = {}): FakeGroup {
    const group = new FakeGroup(name, limits, options);
    this.next?.(group);
    this.groups.push(group);
    return group;
  }
  async dispose(): Promise<void> {}
  override async reapOrphans(): Promise<string[]> {
    this.reaps++;
    return [];
  }
}

let root: string;
let workspaceDir: string;

beforeAll(() => {
  Logger.overrideLogger(false);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-tier-unit-'));
  workspaceDir = path.join(root, 'ws');
  fs.mkdirSync(workspaceDir);
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function setup(
  options: SandboxModuleOptions = {},
  limiter: ProcessLimiter = new FakeLimiter(),
  systemRoot?: SystemRoot,
) {
  // Any existing executable will do: the fake launcher never runs them.
  const exe = process.execPath;
  const resolved = resolveSandboxOptions({
    bwrapPath: exe,
    prlimitPath: exe,
    setprivPath: exe,
    nicePath: exe,
    interpreters: { python: exe, node: exe, bash: exe },
    tempDir: root,
    ...options,
  });
  const launcher = new FakeLauncher();
  const tier = new BubblewrapTier(resolved, launcher, limiter, undefined, systemRoot);
  return { tier, launcher, limiter: limiter as FakeLimiter };
}

function job(overrides: Partial<TierJob> = {}): TierJob {
  return {
    actionId: 'a1',
    sessionId: 's1',
    language: 'python',
    code: 'print(1)',
    env: { PATH: '/usr/bin:/bin', FOO: 'bar' },
    timeoutMs: 2000,
    workspaceDir,
    output: { maxBytes: 1000, maxLines: 100 },
    ...overrides,
  };
}

describe('BubblewrapTier (fake processes)', () => {
  it('probes once, then hands bubblewrap its options, env and stdin and reports the exit', async () => {
    const { tier, launcher, limiter } = setup();
    await tier.availability();
    launcher.program = (p) => p.out(`got ${p.stdinText}\n`).exit(3);
    const result = await tier.run(job({ stdin: 'input' }));
    expect(result).toMatchObject({ exitCode: 3, stdout: 'got input\n', stderr: '', timedOut: false });
    expect(result.limit).toBeUndefined();

    const [probe, run] = launcher.launched;
    expect(probe.spec.args).toContain('--unshare-all');
    expect(run.spec.env).toEqual({ [ENGINE_MARK_ENV]: formatEngineMark() });
    const exe = fs.realpathSync(process.execPath);
    expect(run.spec.args).toContain('--unshare-all');
    // Outside the system dirs, so it is bound at a fixed path inside the sandbox.
    expect(run.spec.args.slice(-4, -1)).toEqual([
      '--',
      `/run/interpreters/python/${path.basename(exe)}`,
      '-c',
    ]);
    expect(run.spec.args.at(-1)).toContain('"/run/switchyard/main.py"');
    const opts = run.options;
    expect(opts.slice(0, 3)).toEqual(['--bind', workspaceDir, '/workspace']);
    expect(opts.slice(6)).toEqual(['--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'FOO', 'bar']);
    // The code file was bound read-only and removed afterwards.
    const codeFile = opts[opts.indexOf('/run/switchyard/main.py') - 1];
    expect(path.basename(codeFile)).toMatch(/^a1-[0-9a-f]+\.py$/);
    for (let i = 0; i < 100 && fs.existsSync(codeFile); i++) await new Promise((r) => setTimeout(r, 10));
    expect(fs.existsSync(codeFile)).toBe(false);
    await tier.onApplicationShutdown();
    // Joined its cgroup before receiving the options, and the group was removed.
    expect(limiter.groups[1].joined).toEqual([run.pid]);
    expect(limiter.groups.every((g) => g.destroyed)).toBe(true);
  });

  it('launches each sandbox at low priority, tied to the engine, in a closed group with a CPU quota', async () => {
    const { tier, launcher, limiter } = setup({ subprocess: { cpus: 0.5 } });
    // Groups and launches pair up in order; record whether the group was open when the options arrived.
    const openAtRun: boolean[] = [];
    launcher.program = (p) => {
      openAtRun.push(limiter.groups[launcher.launched.indexOf(p)].opened);
      p.exit(0);
    };
    await tier.availability();
    await tier.run(job());
    await new Promise((r) => setImmediate(r));
    expect(launcher.launched).toHaveLength(3); // probe, run, warm slot
    expect(openAtRun).toEqual([true, true]);
    expect(limiter.groups[2].opened).toBe(false); // the warm slot waits, unable to fork
    for (const g of limiter.groups) {
      expect(g.options).toEqual({ closed: true });
      expect(g.limits).toEqual({ memoryBytes: 512 * 2 ** 20, pids: 128, cpus: 0.5 });
      expect(g.name).toMatch(new RegExp(`^e${process.pid}-\\d+-[0-9a-f]{12}$`));
    }
    const args = launcher.launched[1].spec.args;
    expect(args.slice(0, 3)).toEqual(['--pdeathsig', 'KILL', '--']);
    expect(args.slice(4, 7)).toEqual(['-n', '19', '--']);
    await tier.onApplicationShutdown();
  });

  it('reaps what dead engines left behind once, before its first sandbox', async () => {
    const { tier, launcher, limiter } = setup();
    await tier.onModuleInit();
    await tier.availability();
    await tier.run(job());
    expect(launcher.reaps).toEqual([0]);
    expect(limiter.reaps).toBe(1);
    await tier.onApplicationShutdown();
    // Also when used without Nest's lifecycle: the first probe reaps.
    const other = setup();
    await other.tier.availability();
    expect(other.launcher.reaps).toEqual([0]);
    expect(other.limiter.reaps).toBe(1);
    await other.tier.onApplicationShutdown();
  });

  it('kills the process group at the timeout', async () => {
    const { tier, launcher } = setup();
    await tier.availability();
    launcher.program = (p) => void p.out('started\n');
    const started = Date.now();
    const result = await tier.run(job({ timeoutMs: 100 }));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL', stdout: 'started\n' });
    expect(result.exitCode).toBeUndefined();
    expect(launcher.launched[1].kills).toBeGreaterThan(0);
    await tier.onApplicationShutdown();
  });

  it('stops reading at the output cap, kills the run and streams only what fits', async () => {
    const { tier, launcher } = setup();
    const seen: string[] = [];
    await tier.availability();
    launcher.program = (p) => {
      p.out('x'.repeat(600));
      p.out('y'.repeat(600));
    };
    const result = await tier.run(
      job({ onOutput: (stream, chunk) => seen.push(`${stream}:${chunk.length}`) }),
    );
    expect(result.stdout).toHaveLength(1000);
    expect(result).toMatchObject({
      truncated: { stdout: true, stderr: false },
      limit: { code: 'OUTPUT_CAP' },
    });
    expect(seen).toEqual(['stdout:600', 'stdout:400']);
    expect(launcher.launched[1].kills).toBeGreaterThan(0);
    await tier.onApplicationShutdown();
  });

  it('reports a sandbox that failed before the code ran as a spawn error', async () => {
    const { tier, launcher } = setup();
    await tier.availability();
    launcher.program = (p) => p.fail("bwrap: Can't find source path /nope: No such file or directory\n");
    const result = await tier.run(job());
    expect(result.spawnError).toBe(
      "sandbox setup failed: bwrap: Can't find source path /nope: No such file or directory",
    );
    expect(result.exitCode).toBeUndefined();
    await tier.onApplicationShutdown();
  });

  it('reports out-of-memory from the cgroup', async () => {
    const { tier, launcher, limiter } = setup();
    await tier.availability();
    limiter.next = (g) => (g.report_ = { oomKilled: true, oomKills: 1, pidsLimitHit: false });
    launcher.program = (p) => p.exit(137);
    expect(await tier.run(job())).toMatchObject({
      exitCode: 137,
      signal: 'SIGKILL',
      limit: { code: 'OUT_OF_MEMORY' },
    });
    await tier.onApplicationShutdown();
  });

  it('maps SIGXCPU and SIGXFSZ exits to limits', async () => {
    const { tier, launcher } = setup();
    await tier.availability();
    launcher.program = (p) => p.exit(128 + os.constants.signals.SIGXCPU);
    expect(await tier.run(job())).toMatchObject({ signal: 'SIGXCPU', limit: { code: 'CPU_TIME' } });
    launcher.program = (p) => p.exit(128 + os.constants.signals.SIGXFSZ);
    expect(await tier.run(job())).toMatchObject({ signal: 'SIGXFSZ', limit: { code: 'FILE_SIZE' } });
    await tier.onApplicationShutdown();
  });

  it('kills the run when the caller aborts', async () => {
    const { tier, launcher } = setup();
    await tier.availability();
    launcher.program = () => undefined;
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    expect(await tier.run(job(), controller.signal)).toMatchObject({ aborted: true, timedOut: false });
    expect(launcher.launched[1].kills).toBeGreaterThan(0);
    await tier.onApplicationShutdown();
  });

  it('refuses to run when the sandbox could not join its cgroup', async () => {
    const { tier, launcher, limiter } = setup();
    await tier.availability();
    limiter.next = (g) => (g.joinError = new Error('ESRCH'));
    await expect(tier.run(job())).rejects.toThrow(expect.objectContaining({ code: 'CGROUP_JOIN' }));
    expect(launcher.launched.at(-1)!.options).toEqual([]); // never received its options
    expect(launcher.launched.at(-1)!.kills).toBe(1);
    await tier.onApplicationShutdown();
  });

  it('keeps a warm sandbox per interpreter and limits, and reuses it', async () => {
    const { tier, launcher } = setup({ subprocess: { warmSlots: 1 } });
    await tier.availability(); // 1 launch
    await tier.run(job()); // cold: 1 launch, then 1 warm
    await new Promise((r) => setImmediate(r));
    expect(launcher.launched).toHaveLength(3);
    await tier.run(job()); // takes the warm one, makes another
    await new Promise((r) => setImmediate(r));
    expect(launcher.launched).toHaveLength(4);
    expect(launcher.launched[2].options).toContain('--bind');
    await tier.run(job({ language: 'bash' })); // different key: cold, and its warm one evicts python's
    await new Promise((r) => setImmediate(r));
    expect(launcher.launched).toHaveLength(6);
    expect(launcher.launched[3].kills).toBe(1);
    await tier.onApplicationShutdown();
    expect(launcher.launched[5].kills).toBe(1);
  });

  it('starts a run with a call channel cold, binding its directory and the runner, and names its socket', async () => {
    const socketDir = fs.mkdtempSync(path.join(root, 'call-'));
    const runnerDir = fs.mkdtempSync(path.join(root, 'runner-'));
    const { tier, launcher } = setup({ subprocess: { warmSlots: 1 }, stateful: { runnerDir } });
    await tier.availability();
    await tier.run(job()); // cold, then a warm one for the same command
    await new Promise((r) => setImmediate(r));
    expect(launcher.launched).toHaveLength(3);
    const channel = { socketDir, listen: () => Promise.reject(new Error('not pooled')) };
    await tier.run(job({ channel, env: { PATH: '/usr/bin', [CALL_SOCKET_ENV]: '/tmp/forged.sock' } }));
    await new Promise((r) => setImmediate(r));
    // Its own launch, not the warm slot (kept for the next plain run), and no slot made ahead for its command.
    expect(launcher.launched).toHaveLength(4);
    const run = launcher.launched[3];
    expect(launcher.launched[2].kills).toBe(0);
    const args = run.spec.args.join(' ');
    expect(args).toContain(`--ro-bind ${socketDir} /run/switchyard-call`);
    expect(args).toContain(`--ro-bind ${runnerDir} /opt/switchyard/runner`);
    expect(args).toContain('--unshare-all');
    expect(run.options.slice(-6)).toEqual([
      '--setenv',
      'PATH',
      '/usr/bin',
      '--setenv',
      CALL_SOCKET_ENV,
      '/run/switchyard-call/call.sock',
    ]);
    // A plain run still finds the warm slot, with neither bind nor variable.
    await tier.run(job());
    expect(launcher.launched[2].options.join(' ')).not.toContain(CALL_SOCKET_ENV);
    expect(launcher.launched[2].spec.args.join(' ')).not.toContain('/run/switchyard-call');
    await tier.onApplicationShutdown();
  });

  it('without cgroups runs ungrouped and caps memory with rlimits', async () => {
    const { tier, launcher } = setup({}, new NoCgroupLimiter('test'));
    await tier.run(job());
    await tier.run(job({ language: 'node' }));
    const [, py, , node] = launcher.launched;
    expect(py.spec.args).toContain(`--as=${512 * 2 ** 20}`);
    expect(node.spec.args).toContain(`--as=${4 * 2 ** 30}`);
    expect(node.spec.args).toContain('--max-old-space-size=512');
    expect((await tier.availability()).details).toMatchObject({ limits: 'none', cgroup: 'test' });
    await tier.onApplicationShutdown();
  });

  it('is unavailable, with the reason, when the probe sandbox fails; and then never runs', async () => {
    const { tier, launcher } = setup();
    launcher.program = (p) => p.fail('bwrap: No permissions to create new namespace\n');
    const availability = await tier.availability();
    expect(availability).toMatchObject({ available: false });
    expect(availability.reason).toContain('No permissions to create new namespace');
    await expect(tier.run(job())).rejects.toThrow(SandboxUnavailableError);
    expect(launcher.launched).toHaveLength(1);
    await tier.onApplicationShutdown();
  });

  it('is unavailable when bubblewrap is missing', async () => {
    const { tier } = setup({ bwrapPath: '/nonexistent/bwrap' });
    expect(await tier.availability()).toMatchObject({
      available: false,
      reason: expect.stringMatching(/bubblewrap not usable/),
    });
    await tier.onApplicationShutdown();
  });

  it('rejects a missing workspace as an engine fault', async () => {
    const { tier } = setup();
    await expect(tier.run(job({ workspaceDir: path.join(root, 'missing') }))).rejects.toThrow(
      SandboxInternalError,
    );
    await tier.onApplicationShutdown();
  });
});

/** Image roots by reference: `undefined` is the default image. */
class FakeRoots extends SystemRoot {
  readonly asked: Array<string | undefined> = [];
  constructor(public answers: Map<string | undefined, SystemRootAnswer>) {
    super();
  }
  async root(image?: string): Promise<SystemRootAnswer> {
    this.asked.push(image);
    return this.answers.get(image) ?? { problem: `no root for ${image}` };
  }
}

/** An image root with python, node, bash and sh where the container tiers have them. */
function imageRoot(name: string): string {
  const dir = path.join(root, name);
  for (const d of ['usr/bin', 'usr/lib', 'etc', 'opt/switchyard'])
    fs.mkdirSync(path.join(dir, d), { recursive: true });
  for (const exe of ['python3.11', 'node', 'bash', 'dash']) {
    fs.writeFileSync(path.join(dir, 'usr/bin', exe), '', { mode: 0o755 });
  }
  fs.symlinkSync('python3.11', path.join(dir, 'usr/bin/python3'));
  fs.symlinkSync('usr/bin', path.join(dir, 'bin'));
  fs.symlinkSync('dash', path.join(dir, 'usr/bin/sh'));
  return dir;
}

/** `--ro-bind` sources of a launch. */
const bindSources = (args: string[]) => args.flatMap((a, i) => (a === '--ro-bind' ? [args[i + 1]] : []));

describe('BubblewrapTier on an image root', () => {
  let dir: string;
  let image: SystemRootAnswer;
  beforeAll(() => {
    dir = imageRoot('image-a');
    image = { image: 'sandbox:a', imageId: `sha256:${'a'.repeat(64)}`, dir };
  });

  it('runs the image’s system and interpreter, with nothing of the host’s system bound', async () => {
    const roots = new FakeRoots(new Map([[undefined, image]]));
    const { tier, launcher } = setup({}, new FakeLimiter(), roots);
    const availability = await tier.availability();
    expect(availability.details?.system).toEqual({
      root: 'image',
      image: 'sandbox:a',
      imageId: image.imageId,
    });
    await tier.run(job());
    const [probe, run] = launcher.launched;
    // The probe ran the image's shell; the run its python (the configured host interpreters are not used).
    expect(probe.spec.args.slice(-3, -1)).toEqual(['/usr/bin/dash', '-c']);
    expect(run.spec.args.slice(-3, -1)).toEqual(['/usr/bin/python3.11', '-c']);
    const args = run.spec.args;
    expect(args).toEqual(expect.arrayContaining(['--ro-bind', path.join(dir, 'usr'), '/usr']));
    expect(args).toEqual(expect.arrayContaining(['--ro-bind', path.join(dir, 'etc'), '/etc']));
    for (const source of bindSources(args)) {
      expect(source.startsWith(`${dir}/`) || source.startsWith(`${root}/`)).toBe(true);
    }
    expect(args).not.toContain('/etc/ld.so.cache');
    await tier.onApplicationShutdown();
  });

  it('falls back to the host’s system only for the default image, and says why', async () => {
    const roots = new FakeRoots(new Map([[undefined, { problem: 'no sandbox image is built yet' }]]));
    const { tier, launcher } = setup({}, new FakeLimiter(), roots);
    expect((await tier.availability()).details?.system).toEqual({
      root: 'host',
      reason: 'no sandbox image is built yet',
    });
    await tier.run(job());
    expect(launcher.launched[1].spec.args).toEqual(expect.arrayContaining(['--ro-bind', '/usr', '/usr']));
    // A session's own image never runs on the host's system instead.
    await expect(tier.run(job({ image: 'template:x' }))).rejects.toThrow(SandboxUnavailableError);
    expect(roots.asked.at(-1)).toBe('template:x');
    await tier.onApplicationShutdown();
  });

  it('moves to the image once it is built, and runs a session’s own image on that image’s root', async () => {
    const answers = new Map<string | undefined, SystemRootAnswer>([[undefined, { problem: 'not built' }]]);
    const roots = new FakeRoots(answers);
    const { tier, launcher } = setup({}, new FakeLimiter(), roots);
    await tier.availability();
    const other = imageRoot('image-b');
    answers.set(undefined, image).set('template:b', { image: 'template:b', imageId: 'sha256:b', dir: other });
    await tier.run(job());
    expect((await tier.availability()).details?.system).toMatchObject({ root: 'image', image: 'sandbox:a' });
    await tier.run(job({ image: 'template:b' }));
    const [, onDefault, onTemplate] = launcher.launched.filter((p) => p.options.length > 0);
    expect(bindSources(onDefault.spec.args)).toContain(path.join(dir, 'usr'));
    expect(bindSources(onTemplate.spec.args)).toContain(path.join(other, 'usr'));
    await tier.onApplicationShutdown();
  });
});
