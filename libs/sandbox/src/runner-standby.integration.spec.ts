/**
 * The runner's python started ahead (docker/sandbox/runner/runner_standby.py) for real, in a bubblewrap box like the
 * subprocess tier's: after a run that asks for it (`standby`), the next python interpreter starts at once, and the
 * box's next run with the same environment takes it. Each interpreter still runs one run; the pooled tier through the
 * API: test/e2e/container-tiers.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Language } from '@switchyard/common';
import type { RunnerExit } from './core/runner/runner-protocol';
import {
  BOX_ENV,
  eventually,
  requireBubblewrap,
  type RunnerBox,
  startRunnerBox,
  stopRunnerBox,
} from '../test/runner-box';

requireBubblewrap();

interface Ran {
  done: RunnerExit;
  stdout: string;
  stderr: string;
}

describe('the runner’s python started ahead, in a bubblewrap box', () => {
  jest.setTimeout(30_000);
  let box: RunnerBox;

  beforeEach(() => {
    box = startRunnerBox();
  });
  afterEach(() => stopRunnerBox(box));

  async function run(
    code: string,
    options: {
      language?: Language;
      env?: Record<string, string>;
      stdin?: string;
      standby?: boolean;
      cpuSeconds?: number;
    } = {},
  ): Promise<Ran> {
    let stdout = '';
    let stderr = '';
    const { exit } = box.connection.run(
      {
        language: options.language ?? 'python',
        code,
        ...(options.stdin !== undefined && { stdin: options.stdin }),
        env: options.env ?? BOX_ENV,
        timeoutMs: 20_000,
        cpuSeconds: options.cpuSeconds ?? 0,
        capBytes: 1 << 20,
        capLines: 10_000,
        workspace: box.workspace,
        ...(options.standby !== false && { standby: true }),
      },
      (fd, data) => {
        if (fd === 1) stdout += data.toString('utf8');
        else stderr += data.toString('utf8');
      },
    );
    return { done: await exit, stdout, stderr };
  }

  /** Until the interpreter started ahead is up and has read the user site (its program holds `_seen = _site()`). */
  async function waiting(): Promise<void> {
    await eventually(async () => {
      const r = await run(
        [
          'import os',
          'for p in os.listdir("/proc"):',
          '    try: cmd = open("/proc/%s/cmdline" % p, "rb").read() if p.isdigit() else b""',
          '    except OSError: continue',
          '    if b"_seen = _site()" in cmd: print(open("/proc/%s/wchan" % p).read())',
        ].join('\n'),
        { standby: false },
      );
      // Blocked reading its go pipe.
      return /pipe_read|wait_woken|^$/.test(r.stdout) && r.stdout !== '' ? true : undefined;
    });
  }

  it('runs the next python run in the interpreter started after the last one: a fresh process each time', async () => {
    const first = await run('import os\nprint(os.getpid())');
    expect(first.done).toMatchObject({ exitCode: 0 });
    expect(first.done.ahead).toBeUndefined();
    const second = await run(
      'import os, sys\nprint(os.getpid(), sys.argv, __file__, __name__, sys.stdin.read())\nsys.exit(3)',
      { stdin: 'in' },
    );
    expect(second.done).toMatchObject({ exitCode: 3, ahead: true });
    const [pid, ...rest] = second.stdout.trim().split(' ');
    expect(pid).not.toBe(first.stdout.trim());
    // What `python -c <bootstrap>` gives a fresh run: argv, __file__, __main__, the rest of stdin.
    expect(rest.join(' ')).toBe("['/run/switchyard/main.py'] /run/switchyard/main.py __main__ in");
    // A traceback names the code file, as in a fresh interpreter.
    const third = await run('x = 1\nraise ValueError("boom")');
    expect(third.done).toMatchObject({ exitCode: 1, ahead: true });
    expect(third.stderr).toContain('File "/run/switchyard/main.py", line 2');
    expect(third.stderr).toContain('ValueError: boom');
  });

  it('takes it only with the same environment; a run with another one starts its own, then waits with it', async () => {
    await run('pass');
    const other = { ...BOX_ENV, GREETING: 'hi' };
    const cold = await run('import os\nprint(os.environ.get("GREETING"))', { env: other });
    expect(cold).toMatchObject({ stdout: 'hi\n' });
    expect(cold.done.ahead).toBeUndefined();
    const warm = await run('import os\nprint(os.environ.get("GREETING"))', { env: other });
    expect(warm).toMatchObject({ stdout: 'hi\n', done: { ahead: true } });
  });

  it('survives other runs, a health check and a run that asks for none, for the next python run', async () => {
    await run('pass');
    expect(await run('echo bash', { language: 'bash', standby: false })).toMatchObject({ stdout: 'bash\n' });
    expect((await box.connection.ping(10_000)).ok).toBe(true);
    const raw = await run('print("raw")', { standby: false });
    expect(raw.done.ahead).toBeUndefined();
    expect(await run('print("warm")')).toMatchObject({ stdout: 'warm\n', done: { ahead: true } });
  });

  it("applies the run's own CPU limit", async () => {
    await run('pass');
    const burn = await run('while True: pass', { cpuSeconds: 1 });
    expect(burn.done).toMatchObject({ ahead: true, signal: 'SIGXCPU' });
  });

  it('sees what was installed in the user site since it started: a fresh interpreter then', async () => {
    const env = { ...BOX_ENV, HOME: '/workspace/.home' };
    const site = await run('import site\nprint(site.getusersitepackages())', { env });
    const userSite = site.stdout.trim();
    expect(userSite).toMatch(/^\/workspace\/\.home\/\.local\/lib\/python3\.\d+\/site-packages$/);
    await waiting();
    const onHost = path.join(box.dir, userSite.slice('/workspace/'.length));
    fs.mkdirSync(path.join(onHost, 'extra'), { recursive: true });
    fs.writeFileSync(path.join(onHost, 'installed_mod.py'), 'VALUE = "installed"\n');
    fs.writeFileSync(path.join(onHost, 'extra', 'from_pth.py'), 'VALUE = "from a .pth"\n');
    fs.writeFileSync(path.join(onHost, 'paths.pth'), `${userSite}/extra\n`);
    const r = await run(
      'import installed_mod, from_pth, sys\n' +
        `print(installed_mod.VALUE, from_pth.VALUE, sys.path.index('${userSite}') < sys.path.index('/usr/lib/python3/dist-packages'), sys.flags.no_site, sys.stdin.read())`,
      { env, stdin: 'in' },
    );
    expect(r).toMatchObject({
      stdout: 'installed from a .pth True 0 in\n',
      done: { exitCode: 0, ahead: true },
    });
  });

  it('starts a fresh one when the code of a run killed the one waiting', async () => {
    await run('pass');
    const killer = await run(
      [
        'import os, signal',
        'me = os.getpid()',
        'for p in os.listdir("/proc"):',
        '    if not p.isdigit() or int(p) in (1, me): continue',
        '    try: cmd = open("/proc/%s/cmdline" % p, "rb").read()',
        '    except OSError: continue',
        '    if b"runner_standby" in cmd or (b"-c" in cmd and b"_seen = _site()" in cmd):',
        '        os.kill(int(p), signal.SIGKILL); print("killed")',
      ].join('\n'),
      { standby: false },
    );
    expect(killer.stdout).toBe('killed\n');
    const next = await run('print("fine")');
    expect(next).toMatchObject({ stdout: 'fine\n' });
    expect(next.done.ahead).toBeUndefined();
  });
});
