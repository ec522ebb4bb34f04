/**
 * Integration tests: real bubblewrap, real processes, real cgroups where the host has them. Each run uses short
 * timeouts. Skipped (with a note) on machines where bubblewrap cannot create a sandbox.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { InvalidInputError, type Language } from '@switchyard/common';
import { buildChildEnv } from '../../core/env-policy';
import { RiskPolicy } from '../../risk/risk-policy';
import { resolveSandboxOptions } from '../../core/sandbox.options';
import { SandboxManager } from '../../sandbox-manager.service';
import type { TierJob, TierRunResult } from '../../core/sandbox.types';
import { BubblewrapTier } from './bubblewrap-tier';
import { detectSystemLayout } from './bwrap-command';
import { detectProcessLimiter } from './cgroup-limiter';
import { cgroupDirOf } from './cgroup-mounts';
import { SpawnerProcessLauncher } from './spawner-launcher';
import type { ProcessLimiter } from './process-limiter';
import { kernelsOf, prepareAndRun } from '../../sandbox-manager.testing';

const BWRAP = '/usr/bin/bwrap';
const canSandbox =
  fs.existsSync(BWRAP) &&
  spawnSync(BWRAP, ['--unshare-all', '--ro-bind', '/', '/', '--', '/bin/true'], { timeout: 10_000 })
    .status === 0;
// `npm test` installs bubblewrap first: a machine where it cannot sandbox is a failure, never a skip.
if (!canSandbox)
  throw new Error('bubblewrap cannot create namespaces here: subprocess integration tests cannot run');
const describeSandbox = describe;

const TIMEOUT = 1500;
const CANARY = `SWITCHYARD_CANARY_${randomBytes(6).toString('hex')}`;
// A secret-looking engine variable present when the options are resolved: its value must never show in output.
const ENGINE_SECRET = `engine-${randomBytes(12).toString('hex')}`;
process.env.SY_INTEGRATION_API_KEY = ENGINE_SECRET;
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : undefined;

/** Host pids whose command line contains `marker`, other than idle bubblewrap launchers. */
function survivors(marker: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let argv: string[];
    try {
      argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // exited while we looked
    }
    if (path.basename(argv[0]) === 'bwrap' || path.basename(argv[0]) === 'prlimit') continue;
    if (argv.join(' ').includes(marker)) found.push(Number(entry));
  }
  return found;
}

async function eventually(check: () => boolean, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    if (check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const hostProcessCount = () => fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e)).length;

/** Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat`; the command name may contain spaces. */
function statField(pid: number, n: number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3];
}

describeSandbox('BubblewrapTier (real bubblewrap)', () => {
  jest.setTimeout(30_000);
  let tier: BubblewrapTier;
  let limiter: ProcessLimiter;
  let root: string;
  let workspaceDir: string;
  const options = resolveSandboxOptions({
    interpreters: PYTHON ? { python: PYTHON } : {},
    subprocess: { memoryBytes: 256 * 2 ** 20, pids: 64 },
    // As the engine's configuration passes it: its secret values are redacted from output.
    output: { engineEnv: process.env },
  });

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    process.env[CANARY] = 'engine-secret-value';
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-tier-int-'));
    // The sandbox runs as `runAs` (when the engine is root): it must traverse the root to its workspace.
    fs.chmodSync(root, 0o711);
    limiter = detectProcessLimiter(options.subprocess.cgroup);
    tier = new BubblewrapTier(options, new SpawnerProcessLauncher(), limiter);
    const availability = await tier.availability();
    expect(availability).toMatchObject({ available: true });
  });

  afterAll(async () => {
    delete process.env[CANARY];
    delete process.env.SY_INTEGRATION_API_KEY;
    await tier?.onApplicationShutdown();
    fs.rmSync(root, { recursive: true, force: true });
  });

  beforeEach(() => {
    workspaceDir = fs.mkdtempSync(path.join(root, 'ws-'));
    if (options.runAs) fs.chownSync(workspaceDir, options.runAs.uid, options.runAs.gid);
  });

  function run(language: Language, code: string, extra: Partial<TierJob> = {}): Promise<TierRunResult> {
    return tier.run({
      actionId: `it-${randomBytes(3).toString('hex')}`,
      sessionId: 'it',
      language,
      code,
      env: buildChildEnv({}, language),
      timeoutMs: TIMEOUT,
      workspaceDir,
      output: options.output,
      ...extra,
    });
  }

  describe('runs code', () => {
    it('python: output, exit code, stdin, UTF-8', async () => {
      const r = await run(
        'python',
        'import sys\nprint("hi", sys.stdin.read().upper(), "€" * 3)\nsys.exit(3)',
        { stdin: 'abc' },
      );
      expect(r).toMatchObject({ exitCode: 3, stdout: 'hi ABC €€€\n', stderr: '', timedOut: false });
      expect(r.limit).toBeUndefined();
    });

    it('node: output, exit code, stdin', async () => {
      const r = await run(
        'node',
        'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{console.log("node",s);process.exit(4)})',
        {
          stdin: 'xyz',
        },
      );
      expect(r).toMatchObject({ exitCode: 4, stdout: 'node xyz\n' });
    });

    it('bash: output, exit code, stdin, stderr', async () => {
      const r = await run('bash', 'read -r line; echo "got $line"; echo oops >&2; exit 5', {
        stdin: 'line1\n',
      });
      expect(r).toMatchObject({ exitCode: 5, stdout: 'got line1\n', stderr: 'oops\n' });
    });

    it('succeeds with no stdin and closes it', async () => {
      expect(await run('python', 'import sys; print(repr(sys.stdin.read()))')).toMatchObject({
        exitCode: 0,
        stdout: "''\n",
      });
    });

    it('streams output as it arrives', async () => {
      const chunks: string[] = [];
      const r = await run('bash', 'echo one; sleep 0.2; echo two >&2', {
        onOutput: (s, c) => chunks.push(`${s}:${c}`),
      });
      expect(r.exitCode).toBe(0);
      expect(chunks).toEqual(['stdout:one\n', 'stderr:two\n']);
    });

    it('runs concurrent actions side by side', async () => {
      const results = await Promise.all([1, 2, 3, 4].map((n) => run('bash', `sleep 0.2; echo ${n}`)));
      expect(results.map((r) => r.stdout)).toEqual(['1\n', '2\n', '3\n', '4\n']);
    });

    it('reports its limits in availability details', async () => {
      const details = (await tier.availability()).details!;
      expect(details.limits).toBe(limiter.mode);
      expect(details.interpreters).toMatchObject({ bash: expect.stringMatching(/^\//) });
    });
  });

  describe('filesystem', () => {
    it('workspace is writable and shared with the host at /workspace', async () => {
      fs.writeFileSync(path.join(workspaceDir, 'in.txt'), 'from host');
      const r = await run(
        'python',
        'import os\nprint(os.getcwd(), open("in.txt").read())\nopen("/workspace/out.txt","w").write("from sandbox")',
      );
      expect(r).toMatchObject({ exitCode: 0, stdout: '/workspace from host\n' });
      expect(fs.readFileSync(path.join(workspaceDir, 'out.txt'), 'utf8')).toBe('from sandbox');
    });

    it('python imports its own modules from the workspace, but no sitecustomize from there', async () => {
      fs.writeFileSync(path.join(workspaceDir, 'helper.py'), 'VALUE = 42\n');
      fs.writeFileSync(path.join(workspaceDir, 'sitecustomize.py'), 'print("SITECUSTOMIZE RAN")\n');
      const r = await run(
        'python',
        'import helper, sys\nprint(helper.VALUE, __name__, sys.argv[0])\nraise SystemExit(1/0)',
      );
      expect(r.stdout).toBe('42 __main__ /run/switchyard/main.py\n');
      expect(r.stderr).toContain('File "/run/switchyard/main.py", line 3, in <module>');
      expect(r.stderr).toContain('ZeroDivisionError');
    });

    it('system dirs and the root are read-only', async () => {
      const r = await run(
        'bash',
        'for p in /usr/x /etc/x /x /bin/x /dev/x /run/switchyard/main.sh; do touch "$p" 2>/dev/null && echo "WROTE $p"; done; echo done',
      );
      expect(r).toMatchObject({ exitCode: 0, stdout: 'done\n' });
    });

    it('host secrets and engine files are not there', async () => {
      const engineFile = path.resolve('package.json');
      const r = await run(
        'bash',
        `for p in /etc/shadow /root /home ${engineFile} /var/run/docker.sock /sys; do ` +
          '[ -e "$p" ] && echo "VISIBLE $p"; done; ls -A /tmp /dev/shm; ls /etc; echo done',
      );
      expect(r.stdout).not.toContain('VISIBLE');
      // Only what interpreters need, never the host's whole /etc.
      const etc = ['alternatives', 'group', 'hosts', 'ld.so.cache', 'passwd'].filter(
        (f) => f === 'hosts' || fs.existsSync(`/etc/${f}`),
      );
      // /tmp and /dev/shm are fresh and empty: the engine's own temp dir is not in there.
      expect(r.stdout).toBe(`/dev/shm:\n\n/tmp:\n${etc.join('\n')}\ndone\n`);
      const nodeRun = await run(
        'node',
        `try { require("fs").readFileSync(${JSON.stringify(engineFile)}) ; console.log("READ") } catch (e) { console.log(e.code) }`,
      );
      expect(nodeRun.stdout).toBe('ENOENT\n');
    });

    it('caps /tmp and file sizes', async () => {
      const tmp = await run(
        'bash',
        'head -c 40M /dev/zero > /tmp/a; head -c 40M /dev/zero > /tmp/b; echo "rc=$?"',
      );
      expect(tmp.stdout).toBe('rc=1\n');
      expect(tmp.stderr).toMatch(/No space left on device/);
      const big = await run('bash', 'exec head -c 80M /dev/zero > /workspace/big');
      expect(big.limit).toMatchObject({ code: 'FILE_SIZE' });
      expect(fs.statSync(path.join(workspaceDir, 'big')).size).toBe(options.subprocess.fileSizeBytes);
    });
  });

  describe('identity and network', () => {
    it('runs as the image’s sandbox uid 10001, as the containers do, without capabilities', async () => {
      const r = await run(
        'bash',
        'id -u; id -g; grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status; hostname',
      );
      expect(r.stdout).toBe(
        '10001\n10001\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nsandbox\n',
      );
    });

    it('has no network, not even to the host loopback', async () => {
      const server = net.createServer((s) => s.end('hello from host\n'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as net.AddressInfo).port;
      try {
        const py = await run(
          'python',
          `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${port}), timeout=1)\n    print("CONNECTED")\nexcept OSError as e:\n    print("blocked", type(e).__name__)`,
        );
        expect(py.stdout).toMatch(/^blocked /);
        const sh = await run('bash', `exec 3<>/dev/tcp/127.0.0.1/${port} && echo CONNECTED || echo blocked`);
        expect(sh.stdout).toBe('blocked\n');
        const ext = await run(
          'bash',
          'exec 3<>/dev/tcp/1.1.1.1/80 && echo CONNECTED || echo blocked; ls /sys/class/net 2>/dev/null',
        );
        expect(ext.stdout).toBe('blocked\n');
      } finally {
        server.close();
      }
    });
  });

  describe('environment', () => {
    it('never shows the engine’s environment', async () => {
      const r = await run(
        'bash',
        'printenv; tr "\\0" "\\n" < /proc/self/environ; tr "\\0" "\\n" < /proc/1/environ; echo end',
      );
      expect(r.exitCode).toBe(0);
      expect(r.stdout).not.toContain(CANARY);
      expect(r.stdout).not.toContain('engine-secret-value');
      expect(r.stdout).toContain('HOME=/workspace/.home');
      const py = await run('python', 'import os; print(sorted(os.environ))');
      expect(py.stdout).not.toContain(CANARY);
    });

    it('redacts secrets, and the engine’s own secret values, from output', async () => {
      fs.writeFileSync(path.join(workspaceDir, 'leak.txt'), `token=${ENGINE_SECRET}\n`);
      const r = await run('bash', 'cat leak.txt; echo "aws AKIAABCDEFGHIJKLMNOP" >&2');
      expect(r).toMatchObject({
        exitCode: 0,
        stdout: 'token=***REDACTED***\n',
        stderr: 'aws ***REDACTED***\n',
      });
    });

    it('the manager rejects dangerous variables before anything runs', async () => {
      const manager = new SandboxManager(options, new RiskPolicy(), [tier], kernelsOf([tier]));
      const bad: Array<Record<string, string>> = [
        { LD_PRELOAD: '/w/x.so' },
        { NODE_OPTIONS: '--require /w/x.js' },
        { BASH_ENV: '/w/x' },
        { PATH: '/w' },
        { 'A B': '1' },
        { 'A\0B': '1' },
      ];
      for (const env of bad) {
        await expect(
          prepareAndRun(manager, {
            actionId: 'x',
            sessionId: 's',
            language: 'bash',
            code: 'echo',
            tier: 'auto',
            workspaceDir,
            env,
          }),
        ).rejects.toThrow(InvalidInputError);
      }
      const ok = await prepareAndRun(manager, {
        actionId: 'x',
        sessionId: 's',
        language: 'bash',
        code: 'echo "$GREETING"',
        tier: 'auto',
        workspaceDir,
        env: { GREETING: 'hello' },
      });
      expect(ok).toMatchObject({ status: 'succeeded', tier: 'subprocess', run: { stdout: 'hello\n' } });
    });
  });

  describe('confinement plumbing', () => {
    it('every process of a run is inside the run’s cgroup', async () => {
      if (limiter.mode === 'none') return;
      const marker = `9${randomBytes(4).readUInt32BE()}`;
      const running = run(
        'bash',
        `sleep ${marker} & sleep 0.2; echo "inside: $(cut -d: -f3 /proc/self/cgroup | sort -u)"; kill $!`,
        {
          timeoutMs: 1000,
        },
      );
      expect(await eventually(() => survivors(`sleep ${marker}`).length === 1, 1000)).toBe(true);
      const [pid] = survivors(`sleep ${marker}`);
      const cgroups = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
      const controllers = limiter.mode === 'cgroup-v1' ? ['memory', 'pids'] : [''];
      if (limiter.mode === 'cgroup-v1' && limiter.description.includes('cpu at')) controllers.push('cpu');
      for (const controller of controllers) {
        const line = cgroups.split('\n').find((l) => l.split(':')[1]?.split(',').includes(controller));
        // Named after the engine (pid and start ticks), so a successor can tell a dead engine's leftovers; under the
        // session's group (also so named) where there is a CPU quota to share.
        const named = `e${process.pid}-\\d+-[0-9a-f]+`;
        expect(line).toMatch(new RegExp(`/switchyard/(?:${named}/)?${named}$`));
      }
      const r = await running;
      // Its own cgroup namespace: the sandbox cannot even see where it sits on the host.
      expect(r.stdout).toBe('inside: /\n');
    });

    it('runs the code, and all it forks, at niceness 19 under the run’s CPU quota', async () => {
      const marker = `9${randomBytes(4).readUInt32BE()}`;
      const running = run('bash', `sleep ${marker} & sleep 0.3; cut -d" " -f19 /proc/self/stat; kill $!`, {
        timeoutMs: 1500,
      });
      expect(await eventually(() => survivors(`sleep ${marker}`).length === 1, 1000)).toBe(true);
      const [pid] = survivors(`sleep ${marker}`);
      expect(statField(pid, 19)).toBe('19');
      if (limiter.mode === 'cgroup-v2' && !limiter.description.includes('no CPU quota')) {
        expect(fs.readFileSync(`${cgroupDirOf(pid, '')}/cpu.max`, 'utf8').trim()).toBe('100000 100000');
      } else if (limiter.mode === 'cgroup-v1' && limiter.description.includes('cpu at')) {
        const dir = cgroupDirOf(pid, 'cpu')!;
        expect(dir).toMatch(/\/switchyard\/e\d+-\d+-[0-9a-f]+\/e\d+-\d+-[0-9a-f]+$/);
        // One CPU (the default): the whole run gets 100 ms of CPU time per 100 ms, however many processes.
        expect(fs.readFileSync(`${dir}/cpu.cfs_quota_us`, 'utf8').trim()).toBe('100000');
        expect(fs.readFileSync(`${dir}/cpu.cfs_period_us`, 'utf8').trim()).toBe('100000');
      }
      const r = await running;
      // The code sees it too, and cannot raise it: RLIMIT_NICE is 0.
      expect(r.stdout).toBe('19\n');
    });

    it('a launcher whose options never arrive stays confined and fails', async () => {
      const launched = new SpawnerProcessLauncher().launch({
        command: '/usr/bin/prlimit',
        args: [
          '--',
          BWRAP,
          '--unshare-all',
          ...detectSystemLayout().args,
          '--args',
          '4',
          '--chdir',
          '/workspace',
          '--',
          '/bin/bash',
          '-c',
          'echo RAN',
        ],
        env: {},
        cwd: '/',
      });
      let out = '';
      launched.stdout.on('data', (c: Buffer) => (out += c.toString()));
      launched.stderr.resume();
      launched.status.resume();
      launched.stdin.end();
      launched.control.end(); // the engine "died" before writing the run's options
      const exit = await launched.closed;
      expect(exit.code).not.toBe(0);
      expect(out).toBe('');
    });
  });

  describe('attacks', () => {
    it.each([
      ['bash', ':(){ :|:& };:\nwait'],
      ['python', 'import os\nwhile 1:\n    os.fork()'],
    ] as const)('%s fork bomb ends in time and leaves the host as it was', async (language, code) => {
      const before = hostProcessCount();
      const started = Date.now();
      const r = await run(language, code);
      expect(Date.now() - started).toBeLessThan(TIMEOUT + 2000);
      if (limiter.mode !== 'none' && r.timedOut) expect(r.limit?.code ?? 'PIDS').toBe('PIDS');
      const target = language === 'bash' ? '/run/switchyard/main.sh' : '/run/switchyard/main.py';
      expect(await eventually(() => survivors(target).length === 0, 2000)).toBe(true);
      // Other work on the host may start processes meanwhile; a fork bomb would leave dozens.
      expect(await eventually(() => hostProcessCount() <= before + 8, 2000)).toBe(true);
    });

    it('memory bomb is stopped and reported', async () => {
      const r = await run('python', 'x = bytearray(8 << 30)\nprint("allocated")', { timeoutMs: 10_000 });
      expect(r.stdout).toBe('');
      if (limiter.mode === 'none') {
        expect(r.exitCode).toBe(1);
        expect(r.stderr).toContain('MemoryError');
      } else {
        expect(r.limit).toMatchObject({ code: 'OUT_OF_MEMORY' });
      }
    });

    it.each([
      ['python', 'while True:\n    pass'],
      ['bash', 'sleep 1e6'],
      ['bash', "trap '' TERM INT HUP; sleep 1e6"],
      ['node', 'for (;;) {}'],
    ] as const)('%s %j is killed at the timeout', async (language, code) => {
      const started = Date.now();
      const r = await run(language, code);
      expect(r).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
      expect(Date.now() - started).toBeLessThan(TIMEOUT + 1500);
    });

    it.each([
      ['background job', (m: string) => `sleep ${m} &\necho started`],
      ['double fork', (m: string) => `( setsid sleep ${m} & ) ; echo started`],
      ['nohup', (m: string) => `nohup sleep ${m} > /dev/null 2>&1 &\necho started`],
      ['disowned job', (m: string) => `sleep ${m} & disown; echo started`],
    ])('%s leaves nothing behind after a normal exit', async (_, code) => {
      const marker = `9${randomBytes(4).readUInt32BE()}`;
      const r = await run('bash', code(marker));
      expect(r).toMatchObject({ exitCode: 0, stdout: 'started\n' });
      expect(await eventually(() => survivors(`sleep ${marker}`).length === 0, 2000)).toBe(true);
    });

    it('python double fork with setsid leaves nothing behind', async () => {
      const marker = `9${randomBytes(4).readUInt32BE()}`;
      const code = `import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execv("/bin/sleep", ["sleep", "${marker}"])\n    os._exit(0)\nprint("parent done")`;
      const r = await run('python', code);
      expect(r).toMatchObject({ exitCode: 0, stdout: 'parent done\n' });
      expect(await eventually(() => survivors(`sleep ${marker}`).length === 0, 2000)).toBe(true);
    });

    it('background children die with a timed-out run too', async () => {
      const marker = `9${randomBytes(4).readUInt32BE()}`;
      const r = await run('bash', `nohup sleep ${marker} >/dev/null 2>&1 &\ntrap '' TERM\nsleep 1e6`);
      expect(r.timedOut).toBe(true);
      expect(await eventually(() => survivors(`sleep ${marker}`).length === 0, 2000)).toBe(true);
    });

    it.each([
      ['stdout, lines', 'yes', 'stdout'],
      ['stdout, no newlines', 'head -c 50M /dev/zero | tr "\\0" x', 'stdout'],
      ['stderr', 'yes >&2', 'stderr'],
    ] as const)('output flood (%s) is capped and the engine heap barely moves', async (_, code, stream) => {
      const heapBefore = process.memoryUsage().heapUsed;
      const r = await run('bash', code);
      const heapAfter = process.memoryUsage().heapUsed;
      expect(r.truncated[stream]).toBe(true);
      expect(r.limit).toMatchObject({ code: 'OUTPUT_CAP' });
      expect(Buffer.byteLength(r[stream])).toBeLessThanOrEqual(options.output.maxBytes);
      expect(r[stream].split('\n').length - 1).toBeLessThanOrEqual(options.output.maxLines);
      expect(r.timedOut).toBe(false);
      expect(heapAfter - heapBefore).toBeLessThan(32 * 2 ** 20);
    });
  });
});
