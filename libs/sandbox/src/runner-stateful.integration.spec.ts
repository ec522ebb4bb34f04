/**
 * The runner's stateful side (protocol 3) for real: kernels, cells, background processes, and their trees surviving
 * a fresh run's cleanup, driven through `RunnerConnection`. The runner runs as the main process of a bubblewrap
 * sandbox like the subprocess tier's (its own pid namespace: its cleanup kills every process there, so it never runs
 * on the host directly), with the engine's node 24 as the node kernel's interpreter; then, in a smaller suite, in
 * the real sandbox image through Docker, to prove the image's python and node 18 run the kernels.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Language } from '@switchyard/common';
import { TEST_IMAGE_SOURCE } from '../test/sandbox-image';
import { detectSystemLayout } from './backends/subprocess/bwrap-command';
import { RunnerConnection } from './core/runner/runner-connection';
import { type CellDone, RUNNER_PROTOCOL, type RunnerEvent } from './core/runner/runner-protocol';
import { RunnerRefusedError } from './core/runner/runner.errors';

const BWRAP = '/usr/bin/bwrap';
const RUNNER_DIR = path.resolve(__dirname, '../../../docker/sandbox/runner');
const NODE_INSIDE = '/run/interpreters/node/node';
const SANDBOX_UID = 65534;
const IMAGE_UID = 10001;
const ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/tmp' };
// Sleep lengths no other test on this host uses, to look for survivors on the host.
const UNIQUE = 70_000 + Math.floor(Math.random() * 9_999);

if (
  !fs.existsSync(BWRAP) ||
  spawnSync(BWRAP, ['--unshare-all', '--ro-bind', '/', '/', '--', '/bin/true'], { timeout: 10_000 })
    .status !== 0
) {
  // `npm test` installs bubblewrap first: a machine where it cannot sandbox is a failure, never a skip.
  throw new Error('bubblewrap cannot create namespaces here: the runner integration tests cannot run');
}

/** A runner in its sandbox, and what the tests need of it. */
interface Sandbox {
  connection: RunnerConnection;
  workspace: [string, string];
  dir: string;
  events: RunnerEvent[];
  /** Resolves with the sandbox process's exit once it is gone. */
  gone: Promise<number | null>;
  child: ChildProcess;
  stderr(): string;
}

function connect(child: ChildProcess, dir: string): Sandbox {
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-4000)));
  const gone = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const connection = new RunnerConnection({
    stdin: child.stdin!,
    stdout: child.stdout!,
    closed: gone.then(() => undefined),
    close: () => child.stdin!.end(),
  });
  const st = fs.statSync(dir, { bigint: true });
  const events: RunnerEvent[] = [];
  connection.onEvent((event) => events.push(event));
  return {
    connection,
    workspace: [String(st.dev), String(st.ino)],
    dir,
    events,
    gone,
    child,
    stderr: () => stderr,
  };
}

/** A fresh workspace; owned by `uid` for Docker (bubblewrap maps its sandbox user to the caller). */
function workspaceDir(uid?: number): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-runner-it-'));
  if (uid !== undefined) fs.chownSync(dir, uid, uid);
  return dir;
}

/** The runner as the main process of a bubblewrap sandbox, laid out like the subprocess tier's. */
function startBwrap(): Sandbox {
  const dir = workspaceDir();
  const args = [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_UID),
    ...detectSystemLayout().args,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run/switchyard',
    '--ro-bind',
    RUNNER_DIR,
    '/opt/switchyard/runner',
    '--ro-bind',
    process.execPath,
    NODE_INSIDE,
    '--bind',
    dir,
    '/workspace',
    '--chdir',
    '/workspace',
    '--clearenv',
    ...Object.entries(ENV).flatMap(([k, v]) => ['--setenv', k, v]),
    '--',
    '/usr/bin/python3',
    '-I',
    '/opt/switchyard/runner/runner.py',
  ];
  return connect(spawn(BWRAP, args, { stdio: ['pipe', 'pipe', 'pipe'] }), dir);
}

/** The runner of the real sandbox image, with the pooled tier's main settings. */
function startDocker(image: string, name: string): Sandbox {
  const dir = workspaceDir(IMAGE_UID);
  const user = `${IMAGE_UID}:${IMAGE_UID}`;
  const args = [
    'run',
    '--rm',
    '-i',
    '--name',
    name,
    '--init',
    '--network',
    'none',
    '--user',
    user,
    '--read-only',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--memory',
    '256m',
    '--memory-swap',
    '256m',
    '--pids-limit',
    '128',
    '--tmpfs',
    `/tmp:size=64m,uid=${IMAGE_UID},gid=${IMAGE_UID}`,
    '--tmpfs',
    `/run/switchyard:size=8m,uid=${IMAGE_UID},gid=${IMAGE_UID},mode=0700`,
    '-v',
    `${dir}:/workspace`,
    '-w',
    '/workspace',
    image,
    '/usr/bin/python3',
    '-I',
    '/opt/switchyard/runner/runner.py',
  ];
  return connect(spawn('docker', args, { stdio: ['pipe', 'pipe', 'pipe'] }), dir);
}

async function stop(box: Sandbox | undefined): Promise<void> {
  if (!box) return;
  box.connection.close();
  const timer = setTimeout(() => box.child.kill('SIGKILL'), 10_000);
  await box.gone;
  clearTimeout(timer);
  fs.rmSync(box.dir, { recursive: true, force: true });
}

interface CellOutcome {
  done: CellDone;
  stdout: string;
  stderr: string;
}

/** Runs a cell, collecting its output; refusals reject with the runner's `RunnerRefusedError`. */
function runCell(
  box: Sandbox,
  kernel: string,
  code: string,
  options: {
    timeoutMs?: number;
    graceMs?: number;
    capBytes?: number;
    capLines?: number;
    env?: Record<string, string>;
  } = {},
): { id: number; outcome: Promise<CellOutcome> } {
  const out = { 1: [] as Buffer[], 2: [] as Buffer[] };
  const { id, done } = box.connection.cell(
    {
      kernel,
      code,
      env: options.env ?? {},
      timeoutMs: options.timeoutMs ?? 10_000,
      // Generous: an interrupt that works ends the cell long before it; on a loaded machine one can take a second.
      graceMs: options.graceMs ?? 5000,
      capBytes: options.capBytes ?? 1 << 20,
      capLines: options.capLines ?? 10_000,
    },
    (fd, data) => out[fd].push(data),
  );
  const outcome = done.then((d) => ({
    done: d,
    stdout: Buffer.concat(out[1]).toString('utf8'),
    stderr: Buffer.concat(out[2]).toString('utf8'),
  }));
  return { id, outcome };
}

const cell = (box: Sandbox, kernel: string, code: string, options?: Parameters<typeof runCell>[3]) =>
  runCell(box, kernel, code, options).outcome;

function startKernel(box: Sandbox, kernel: string, language: Language, interpreter?: string) {
  return box.connection.kernelStart({
    kernel,
    language,
    env: ENV,
    workspace: box.workspace,
    ...(interpreter && { interpreter }),
  });
}

async function eventually<T>(check: () => T | undefined | false, withinMs: number): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const kernelExit = (box: Sandbox, kernel: string) =>
  eventually(() => box.events.find((e) => e.ev === 'kernel_exit' && e.kernel === kernel), 5000);
const procExit = (box: Sandbox, proc: string) =>
  eventually(() => box.events.find((e) => e.ev === 'pexit' && e.proc === proc), 5000);
const procOutput = (box: Sandbox, proc: string, fd?: 1 | 2) =>
  Buffer.concat(
    box.events.flatMap((e) => (e.ev === 'pout' && e.proc === proc && (!fd || e.fd === fd) ? [e.data] : [])),
  ).toString('utf8');

async function refusal(promise: Promise<unknown>): Promise<RunnerRefusedError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RunnerRefusedError);
  return err as RunnerRefusedError;
}

/** A python cell whose result is the sorted command lines of the sandbox's processes that match `pattern`. */
const PS = (pattern: string) => `import os, re
def _ps(pattern):
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                line = f.read().replace(b"\\0", b" ").decode().strip()
        except OSError:
            continue
        if re.search(pattern, line):
            found.append(line)
    return sorted(found)
_ps(${JSON.stringify(pattern)})`;

describe('the runner’s kernels and processes in a bubblewrap sandbox', () => {
  let box: Sandbox;

  beforeAll(async () => {
    box = startBwrap();
    await box.connection.hello.catch((err: Error) => {
      throw new Error(`${err.message}: ${box.stderr()}`);
    });
    await expect(box.connection.hello).resolves.toMatchObject({
      protocol: RUNNER_PROTOCOL,
      stateful: true,
      oomCounter: false,
    });
    await Promise.all([
      startKernel(box, 'krn_py', 'python'),
      startKernel(box, 'krn_js', 'node', NODE_INSIDE),
      startKernel(box, 'krn_sh', 'bash'),
    ]);
  });

  afterAll(async () => {
    await stop(box);
  });

  it('keeps python state across cells and answers like a notebook', async () => {
    const first = await cell(
      box,
      'krn_py',
      'import json\nx = 41\ndef twice(v):\n    return v * 2\nprint("hi")\nx + 1',
      {
        env: { GREETING: 'hello' },
      },
    );
    expect(first.done).toMatchObject({ ok: true, result: '42', exitCode: 0, error: null, stateLost: false });
    expect(first.stdout).toBe('hi\n');
    const second = await cell(
      box,
      'krn_py',
      'import os\njson.dumps({"v": twice(x), "g": os.environ["GREETING"]})',
    );
    expect(second.done.result).toBe(`'{"v": 82, "g": "hello"}'`);
    expect(second.done.count).toBe(first.done.count + 1);
    expect((await cell(box, 'krn_py', 'y = None\ny')).done.result).toBeNull();

    const raised = await cell(box, 'krn_py', 'def f():\n    return 1 / 0\nf()');
    expect(raised.done).toMatchObject({ ok: false, exitCode: 1, error: { name: 'ZeroDivisionError' } });
    expect(raised.stderr).toContain('File "<cell');
    expect(raised.stderr).toContain('ZeroDivisionError: division by zero');
    expect(raised.stderr).not.toContain('kernel_python');

    const exited = await cell(box, 'krn_py', 'import sys\nprint("bye")\nsys.exit()\nprint("never")');
    expect(exited.done).toMatchObject({ ok: true, stateLost: false });
    expect(exited.stdout).toBe('bye\n');
    expect((await cell(box, 'krn_py', 'x')).done.result).toBe('41');
  });

  it('keeps node state across cells: redeclarations, top-level await, inspected results', async () => {
    const first = await cell(
      box,
      'krn_js',
      'const base = 40; let list = [1, 2]; class Point { constructor(x) { this.x = x } }\n' +
        'function add(a, b) { return a + b }\nconsole.log("hi"); add(base, 2)',
    );
    expect(first.done).toMatchObject({ ok: true, result: '42', exitCode: 0 });
    expect(first.stdout).toBe('hi\n');
    const again = await cell(box, 'krn_js', 'const base = 1; let list = [3]; class Point {}; base + list[0]');
    expect(again.done).toMatchObject({ ok: true, result: '4' });
    const awaited = await cell(
      box,
      'krn_js',
      'const v = await new Promise((r) => setTimeout(() => r({ a: add(base, 1) }), 50));\nv',
      {
        env: { GREETING: 'hello' },
      },
    );
    expect(awaited.done).toMatchObject({ ok: true, result: '{ a: 2 }' });
    expect((await cell(box, 'krn_js', 'process.env.GREETING')).done.result).toBe("'hello'");
    expect((await cell(box, 'krn_js', 'let nothing; nothing')).done.result).toBeNull();
    const thrown = await cell(box, 'krn_js', 'function boom() { throw new TypeError("no") }\nboom()');
    expect(thrown.done).toMatchObject({
      ok: false,
      exitCode: 1,
      error: { name: 'TypeError', message: 'no' },
    });
    expect(thrown.stderr).toContain('<cell');
    expect(thrown.stderr).not.toContain('kernel_node');
  });

  it('keeps bash state across cells: cwd, variables, exports, functions, aliases', async () => {
    const first = await cell(
      box,
      'krn_sh',
      'mkdir -p sub && cd sub; plain=1; export EXPORTED=2; greet() { echo "hello $1"; }; alias ll="echo aliased"; false',
      { env: { GREETING: "it's\nme" } },
    );
    expect(first.done).toMatchObject({ ok: false, exitCode: 1, result: null, stateLost: false });
    const second = await cell(
      box,
      'krn_sh',
      'pwd; echo "$plain $EXPORTED"; greet you; ll; printenv GREETING; (exit 3)',
    );
    expect(second.stdout).toBe("/workspace/sub\n1 2\nhello you\naliased\nit's\nme\n");
    expect(second.done).toMatchObject({ exitCode: 3, ok: false });
    expect((await cell(box, 'krn_sh', 'cd /workspace; bash -c "echo \\$EXPORTED"')).stdout).toBe('2\n');
  });

  it('interrupts a running cell and keeps the state, in every kernel', async () => {
    const cases: Array<[string, string, string, string]> = [
      ['krn_py', 'kept = "py"\nimport time\nwhile True:\n    time.sleep(0.05)', 'kept', "'py'"],
      ['krn_js', 'var kept = "js"; for (;;) {}', 'kept', "'js'"],
      ['krn_js', 'var kept2 = "await"; await new Promise(() => {})', 'kept2', "'await'"],
      ['krn_sh', 'kept=sh; cd /tmp; while true; do sleep 1; done; echo never', 'echo "$kept $PWD"', ''],
    ];
    for (const [kernel, code, check, expected] of cases) {
      const running = runCell(box, kernel, code);
      await new Promise((r) => setTimeout(r, 300));
      await expect(box.connection.kernelInterrupt(kernel)).resolves.toEqual({ found: true, running: true });
      const { done, stdout } = await running.outcome;
      expect(done).toMatchObject({
        interrupted: true,
        ended: 'interrupt',
        stateLost: false,
        ok: false,
        timedOut: false,
      });
      expect(stdout).not.toContain('never');
      const after = await cell(box, kernel, check);
      if (kernel === 'krn_sh') expect(after.stdout).toBe('sh /tmp\n');
      else expect(after.done.result).toBe(expected);
    }
    await expect(box.connection.kernelInterrupt('krn_py')).resolves.toEqual({ found: true, running: false });
    await expect(box.connection.kernelInterrupt('krn_none')).resolves.toEqual({
      found: false,
      running: false,
    });
  });

  it('interrupts a cell asked to stop before it even began, deterministically', async () => {
    for (const [kernel, code] of [
      ['krn_py', 'import time\ntime.sleep(30)'],
      ['krn_js', 'for (;;) {}'],
      ['krn_js', 'await new Promise(() => {})'],
      ['krn_sh', 'sleep 30'],
    ]) {
      for (let i = 0; i < 5; i++) {
        const running = runCell(box, kernel, code);
        await expect(box.connection.kernelInterrupt(kernel)).resolves.toMatchObject({ running: true });
        const { done } = await running.outcome;
        expect(done).toMatchObject({ interrupted: true, ended: 'interrupt', stateLost: false });
        expect(done.durationMs).toBeLessThan(1000);
      }
    }
  });

  it('signals an interrupt again while a bash cell waits on a command that absorbed the first', async () => {
    // The child swallows its first SIGINT and sleeps on: only the runner's second signal ends it (and the cell).
    const absorbing =
      'python3 -c "import signal, time; signal.signal(signal.SIGINT, ' +
      'lambda *a: signal.signal(signal.SIGINT, signal.SIG_DFL)); time.sleep(30)"; echo never';
    const running = runCell(box, 'krn_sh', absorbing);
    await new Promise((r) => setTimeout(r, 500));
    const asked = Date.now();
    await expect(box.connection.kernelInterrupt('krn_sh')).resolves.toEqual({ found: true, running: true });
    const { done, stdout } = await running.outcome;
    expect(done).toMatchObject({ interrupted: true, ended: 'interrupt', timedOut: false, stateLost: false });
    expect(Date.now() - asked).toBeLessThan(5000); // the cell's 10 s timeout did not end it
    expect(stdout).not.toContain('never');
    expect((await cell(box, 'krn_sh', 'echo still')).stdout).toBe('still\n');
  });

  it('never interrupts twice a python cell that handles the interrupt (its kernel acknowledged the first)', async () => {
    // The handler outlives the runner's resend delay (400 ms): a second SIGINT would cut it short.
    const handling =
      'import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    time.sleep(1.5)\n    print("cleaned up")\n' +
      'handled = True';
    const running = runCell(box, 'krn_py', handling);
    await new Promise((r) => setTimeout(r, 300));
    await expect(box.connection.kernelInterrupt('krn_py')).resolves.toEqual({ found: true, running: true });
    const { done, stdout } = await running.outcome;
    expect(stdout).toBe('cleaned up\n');
    expect(done).toMatchObject({ ok: true, interrupted: false, ended: 'interrupt', stateLost: false });
    expect((await cell(box, 'krn_py', 'handled')).done.result).toBe('True');
  });

  it('keeps a cell’s boundaries when bash redirects its output for good', async () => {
    await startKernel(box, 'krn_sh_quiet', 'bash');
    const quiet = await cell(box, 'krn_sh_quiet', 'exec >/tmp/quiet.log 2>&1; echo hidden; x=5');
    expect(quiet.done).toMatchObject({ ok: true, stateLost: false });
    expect(quiet.stdout + quiet.stderr).toBe('');
    // `exec` ends what the shell was: the next cell's end is still found (and `builtin exit` still ends the shell).
    const next = await cell(
      box,
      'krn_sh_quiet',
      'echo "$x" >/dev/stderr; cat /tmp/quiet.log >&2; builtin exit 0',
    );
    expect(next.done).toMatchObject({ stateLost: true, kernelExit: { exitCode: 0 } });
  });

  it('interrupts a cell at its timeout, keeping the state when that stops it', async () => {
    for (const [kernel, code] of [
      ['krn_py', 'import time\ntime.sleep(30)'],
      ['krn_js', 'while (true) {}'],
      ['krn_sh', 'for i in 1 2 3; do sleep 10; done'],
    ]) {
      const { done } = await cell(box, kernel, code, { timeoutMs: 300, graceMs: 5000 });
      expect(done).toMatchObject({ timedOut: true, interrupted: true, ended: 'timeout', stateLost: false });
      expect(done.durationMs).toBeLessThan(5000);
    }
  });

  it('kills a kernel whose cell ignores the interrupt, and reports it gone', async () => {
    for (const [kernel, language, code] of [
      [
        'krn_py_deaf',
        'python',
        'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)',
      ],
      ['krn_sh_deaf', 'bash', "trap '' INT; sleep 30"],
    ] as const) {
      await startKernel(box, kernel, language);
      const { done } = await cell(box, kernel, code, { timeoutMs: 300, graceMs: 300 });
      expect(done).toMatchObject({
        timedOut: true,
        interrupted: false,
        stateLost: true,
        ended: 'timeout',
        kernelExit: { exitCode: null, signal: 'SIGKILL' },
        oomKilled: null,
      });
      await expect(kernelExit(box, kernel)).resolves.toMatchObject({ signal: 'SIGKILL', oomKilled: null });
      expect((await refusal(cell(box, kernel, '1'))).code).toBe('no_kernel');
    }
  });

  it('caps a cell’s output, then interrupts it and keeps the kernel', async () => {
    const { done, stdout } = await cell(box, 'krn_py', 'while True:\n    print("x" * 99)', {
      capBytes: 10_000,
      capLines: 50,
    });
    expect(done).toMatchObject({
      ended: 'output',
      capped: { stdout: true, stderr: false },
      stateLost: false,
    });
    expect(stdout.split('\n').length).toBeLessThanOrEqual(52);
    expect((await cell(box, 'krn_py', 'x')).done.result).toBe('41');
  });

  it('gives output printed between cells to the next cell, ahead of its own', async () => {
    await cell(
      box,
      'krn_py',
      'import subprocess\nsubprocess.Popen(["bash", "-c", "sleep 0.3; echo late; echo late >&2"])',
    );
    await new Promise((r) => setTimeout(r, 600));
    const next = await cell(box, 'krn_py', 'print("now")');
    expect(next.stdout).toBe('late\nnow\n');
    expect(next.stderr).toBe('late\n');
  });

  it('reports kernels that die: killed from outside, `builtin exit` in bash, process.exit in node', async () => {
    await startKernel(box, 'krn_victim', 'python');
    const pid = (await cell(box, 'krn_victim', 'import os\nos.getpid()')).done.result;
    await cell(box, 'krn_sh', `kill -9 ${pid}`);
    await expect(kernelExit(box, 'krn_victim')).resolves.toMatchObject({ exitCode: null, signal: 'SIGKILL' });

    await startKernel(box, 'krn_sh_exit', 'bash');
    // `exit` ends only the cell (the next test); `builtin exit` is the shell's own and ends it.
    const exited = await cell(box, 'krn_sh_exit', 'echo bye; builtin exit 4');
    expect(exited.done).toMatchObject({ stateLost: true, kernelExit: { exitCode: 4, signal: null } });
    expect(exited.stdout).toBe('bye\n');
    await expect(kernelExit(box, 'krn_sh_exit')).resolves.toMatchObject({ exitCode: 4 });

    await startKernel(box, 'krn_js_exit', 'node', NODE_INSIDE);
    const ended = await cell(box, 'krn_js_exit', 'process.exit(3)');
    expect(ended.done).toMatchObject({ stateLost: true, kernelExit: { exitCode: 3, signal: null } });
    expect((await refusal(cell(box, 'krn_js_exit', '1'))).code).toBe('no_kernel');
  });

  it('refuses what it cannot do, with codes', async () => {
    expect((await refusal(startKernel(box, 'krn_py', 'python'))).code).toBe('exists');
    const wrong = await refusal(
      box.connection.kernelStart({ kernel: 'krn_w', language: 'python', env: ENV, workspace: ['1', '2'] }),
    );
    expect(wrong).toMatchObject({ code: 'workspace', workspace: box.workspace });
    const missing = await refusal(startKernel(box, 'krn_bad', 'python', '/usr/bin/no-such-python'));
    expect(missing.code).toBe('kernel_start');
    const broken = await refusal(startKernel(box, 'krn_bad', 'python', '/bin/false'));
    expect(broken).toMatchObject({
      code: 'kernel_start',
      message: expect.stringContaining('before it was ready'),
    });
    const slow = runCell(box, 'krn_sh', 'sleep 0.5');
    expect((await refusal(cell(box, 'krn_sh', 'echo 1'))).code).toBe('busy');
    await slow.outcome;
    expect((await refusal(cell(box, 'krn_sh', 'true', { env: { 'NOT-A-NAME': '1' } }))).code).toBe('env');
    await expect(box.connection.kernelStop('krn_none')).resolves.toEqual({ found: false });
  });

  it('stops a kernel during a cell: the cell ends with its state lost', async () => {
    await startKernel(box, 'krn_stopped', 'node', NODE_INSIDE);
    const running = runCell(box, 'krn_stopped', 'await new Promise(() => {})');
    await new Promise((r) => setTimeout(r, 200));
    await expect(box.connection.kernelStop('krn_stopped')).resolves.toEqual({ found: true });
    await expect(running.outcome).resolves.toMatchObject({ done: { stateLost: true, ended: 'kill' } });
    await expect(kernelExit(box, 'krn_stopped')).resolves.toMatchObject({ signal: 'SIGKILL' });
  });

  it('runs background processes beside the kernels: a server both kernels reach, stdin, signals, exits', async () => {
    fs.mkdirSync(path.join(box.dir, 'site'));
    fs.writeFileSync(path.join(box.dir, 'site', 'index.html'), 'served\n');
    const env = { ...ENV, PYTHONUNBUFFERED: '1' };
    const server = await box.connection.procStart({
      proc: 'prc_srv',
      command: 'exec python3 -m http.server 8765 --bind 127.0.0.1',
      cwd: 'site',
      env,
      workspace: box.workspace,
    });
    expect(server.pid).toBeGreaterThan(1);
    await eventually(() => procOutput(box, 'prc_srv').includes('Serving HTTP'), 5000);

    const fromPython = await cell(
      box,
      'krn_py',
      'import urllib.request\nurllib.request.urlopen("http://127.0.0.1:8765/index.html").read().decode()',
    );
    expect(fromPython.done.result).toBe("'served\\n'");
    const fromBash = await cell(
      box,
      'krn_sh',
      'exec 7<>/dev/tcp/127.0.0.1/8765; printf "GET /index.html HTTP/1.0\\r\\n\\r\\n" >&7; tail -n 1 <&7; exec 7<&-',
    );
    expect(fromBash.stdout).toBe('served\n');
    await eventually(() => procOutput(box, 'prc_srv', 2).includes('GET /index.html HTTP/1.0'), 5000);

    await box.connection.procStart({
      proc: 'prc_cat',
      // It lives on a moment after its stdin closed, so a write then meets a closed stdin, not a gone process.
      command: 'cat; echo done >&2; sleep 1; exit 7',
      cwd: '.',
      env,
      workspace: box.workspace,
    });
    await expect(box.connection.procWrite('prc_cat', 'one\n')).resolves.toEqual({ found: true });
    await expect(box.connection.procWrite('prc_cat', 'two\n', true)).resolves.toEqual({ found: true });
    expect((await refusal(box.connection.procWrite('prc_cat', 'three\n'))).code).toBe('closed');
    await expect(procExit(box, 'prc_cat')).resolves.toMatchObject({ exitCode: 7, signal: null });
    expect(procOutput(box, 'prc_cat', 1)).toBe('one\ntwo\n');
    expect(procOutput(box, 'prc_cat', 2)).toBe('done\n');
    await expect(box.connection.procWrite('prc_cat', 'x')).resolves.toEqual({ found: false });

    await expect(box.connection.procSignal('prc_srv', 'TERM')).resolves.toEqual({ found: true });
    await expect(procExit(box, 'prc_srv')).resolves.toMatchObject({ exitCode: null, signal: 'SIGTERM' });
    await expect(box.connection.procSignal('prc_srv', 'KILL')).resolves.toEqual({ found: false });

    for (const cwd of ['../..', 'missing', 'site/index.html']) {
      const refused = await refusal(
        box.connection.procStart({
          proc: `prc_${cwd.length}`,
          command: 'true',
          cwd,
          env,
          workspace: box.workspace,
        }),
      );
      expect(refused.code).toBe('cwd');
    }
  });

  it('kills what a process leaves running when its command ends', async () => {
    await box.connection.procStart({
      proc: 'prc_left',
      command: 'sleep 301 & setsid sleep 302 & (sleep 303 &); sleep 0.2; exit 5',
      cwd: '.',
      env: ENV,
      workspace: box.workspace,
    });
    await expect(procExit(box, 'prc_left')).resolves.toMatchObject({ exitCode: 5 });
    expect((await cell(box, 'krn_py', PS('^sleep 30[123]'))).done.result).toBe('[]');
  });

  it('lets a fresh run clean up after itself while kernels and processes survive it', async () => {
    await box.connection.procStart({
      proc: 'prc_keep',
      command: 'sleep 600',
      cwd: '.',
      env: ENV,
      workspace: box.workspace,
    });
    await cell(box, 'krn_sh', 'sleep 610 & setsid sleep 611 & nohup sleep 612 >/dev/null 2>&1 &');
    const out: Buffer[] = [];
    const run = box.connection.run(
      {
        language: 'bash',
        code: 'sleep 999 & (sleep 998 &); setsid sleep 997 & nohup sleep 996 >/dev/null 2>&1 & echo started',
        env: ENV,
        timeoutMs: 5000,
        cpuSeconds: 6,
        capBytes: 10_000,
        capLines: 100,
        workspace: box.workspace,
      },
      (_fd, data) => out.push(data),
    );
    await expect(run.exit).resolves.toMatchObject({ exitCode: 0, leftovers: 4 });
    expect(Buffer.concat(out).toString()).toBe('started\n');
    expect((await cell(box, 'krn_py', PS('^sleep 99'))).done.result).toBe('[]');
    const alive = (await cell(box, 'krn_py', PS('^sleep 6'))).done.result;
    for (const s of ['sleep 600', 'sleep 610', 'sleep 611', 'sleep 612']) expect(alive).toContain(s);
    await expect(box.connection.ping(2000)).resolves.toMatchObject({ ok: true, busy: false });
    expect((await cell(box, 'krn_py', PS('^sleep 6'))).done.result).toBe(alive);
    expect((await cell(box, 'krn_js', 'kept')).done.result).toBe("'js'");
    await box.connection.procSignal('prc_keep', 'KILL');
    await expect(procExit(box, 'prc_keep')).resolves.toMatchObject({ signal: 'SIGKILL' });
  });

  it('runs cells of different kernels, a process and a fresh run at the same time', async () => {
    const t0 = Date.now();
    await box.connection.procStart({
      proc: 'prc_tick',
      command: 'for i in 1 2 3 4 5; do echo tick $i; sleep 0.1; done',
      cwd: '.',
      env: ENV,
      workspace: box.workspace,
    });
    const cells = [
      cell(box, 'krn_py', 'import time\ntime.sleep(0.6)\n"py"'),
      cell(box, 'krn_js', 'await new Promise((r) => setTimeout(r, 600)); "js"'),
      cell(box, 'krn_sh', 'sleep 0.6; echo sh'),
    ];
    const run = box.connection.run(
      {
        language: 'python',
        code: 'import time\ntime.sleep(0.6)\nprint("run")',
        env: ENV,
        timeoutMs: 5000,
        cpuSeconds: 6,
        capBytes: 10_000,
        capLines: 100,
        workspace: box.workspace,
      },
      () => undefined,
    );
    const [py, js, sh] = await Promise.all(cells);
    await expect(run.exit).resolves.toMatchObject({ exitCode: 0 });
    expect([py.done.result, js.done.result, sh.stdout]).toEqual(["'py'", "'js'", 'sh\n']);
    await expect(procExit(box, 'prc_tick')).resolves.toMatchObject({ exitCode: 0 });
    expect(procOutput(box, 'prc_tick')).toBe('tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n');
    expect(Date.now() - t0).toBeLessThan(2500);
  });

  it('kills everything, kernels and processes included, when its stdin closes', async () => {
    await box.connection.procStart({
      proc: 'prc_last',
      command: `exec sleep ${UNIQUE}`,
      cwd: '.',
      env: ENV,
      workspace: box.workspace,
    });
    await cell(box, 'krn_sh', `sleep ${UNIQUE + 1} &`);
    box.connection.close();
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      box.gone,
      new Promise((r) => (timer = setTimeout(() => r('hung'), 5000))),
    ]);
    clearTimeout(timer);
    expect(code).toBe(0);
    const leftovers = spawnSync('pgrep', ['-f', `^sleep (${UNIQUE}|${UNIQUE + 1})$`]);
    expect(leftovers.stdout.toString()).toBe('');
  });
});

const image =
  TEST_IMAGE_SOURCE.image ??
  (fs.existsSync(TEST_IMAGE_SOURCE.imageTagFile)
    ? fs.readFileSync(TEST_IMAGE_SOURCE.imageTagFile, 'utf8').trim()
    : undefined);

describe('the runner’s kernels and processes in the sandbox image', () => {
  let box: Sandbox;
  const name = `switchyard-runner-it-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    // `npm test` builds the image first: a missing one is a failure, never a skip.
    if (!image || spawnSync('docker', ['image', 'inspect', image], { timeout: 10_000 }).status !== 0) {
      throw new Error(`no sandbox image ${image ?? '(no tag; npm run sandbox:image)'}`);
    }
    box = startDocker(image, name);
    await expect(box.connection.hello).resolves.toMatchObject({
      protocol: RUNNER_PROTOCOL,
      stateful: true,
      oomCounter: true,
    });
    await Promise.all([
      startKernel(box, 'krn_py', 'python'),
      startKernel(box, 'krn_js', 'node'),
      startKernel(box, 'krn_sh', 'bash'),
    ]);
  }, 30_000);

  afterAll(async () => {
    await stop(box);
    spawnSync('docker', ['rm', '-f', name], { timeout: 30_000 });
  });

  it('runs the kernels on the image’s own interpreters', async () => {
    expect((await cell(box, 'krn_py', 'import sys\nv = sys.version_info[:2]\nv')).done.result).toBe(
      '(3, 11)',
    );
    const js = await cell(
      box,
      'krn_js',
      'const v = await Promise.resolve(process.versions.node.split(".")[0]); v',
    );
    expect(js.done.result).toBe("'18'");
    expect((await cell(box, 'krn_js', 'const v = 2; class A {}; v')).done.result).toBe('2');
    const sh = await cell(box, 'krn_sh', 'cd /tmp; python -c "print(6 * 7)"');
    expect(sh.stdout).toBe('42\n');
    expect((await cell(box, 'krn_sh', 'pwd')).stdout).toBe('/tmp\n');
  });

  it('interrupts node 18 in a loop and in an await, keeping its state', async () => {
    for (const code of ['for (;;) {}', 'await new Promise(() => {})']) {
      const { done } = await cell(box, 'krn_js', code, { timeoutMs: 300 });
      expect(done).toMatchObject({ interrupted: true, timedOut: true, stateLost: false });
    }
    expect((await cell(box, 'krn_js', 'v')).done.result).toBe('2');
  });

  it('protects kernels from a fresh run’s cleanup, and reports an OOM kill from the cgroup', async () => {
    await cell(box, 'krn_sh', 'sleep 600 &');
    const run = box.connection.run(
      {
        language: 'bash',
        code: 'sleep 999 & setsid sleep 998 &',
        env: ENV,
        timeoutMs: 5000,
        cpuSeconds: 6,
        capBytes: 1000,
        capLines: 10,
        workspace: box.workspace,
      },
      () => undefined,
    );
    await expect(run.exit).resolves.toMatchObject({ leftovers: 2 });
    expect((await cell(box, 'krn_py', PS('^sleep'))).done.result).toBe("['sleep 600']");

    const { done } = await cell(
      box,
      'krn_py',
      'hog = []\nwhile True:\n    hog.append(bytearray(32 * 2**20))',
    );
    expect(done).toMatchObject({ stateLost: true, oomKilled: true, kernelExit: { signal: 'SIGKILL' } });
    await expect(kernelExit(box, 'krn_py')).resolves.toMatchObject({ oomKilled: true });
    expect((await cell(box, 'krn_js', 'v')).done.result).toBe('2');
  });
});
