import * as fs from 'node:fs';
import { Logger } from '@nestjs/common';
import type { LaunchedProcess, LaunchSpec } from './process-launcher';
import { Spawner } from '@switchyard/common';
import { SpawnerProcessLauncher } from './spawner-launcher';

const SH = '/bin/sh';

/** Field 4 of /proc/<pid>/stat: the parent pid. */
function parentOf(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function eventually(check: () => boolean, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** Collects a readable stream's text. */
function text(stream: NodeJS.ReadableStream): Promise<string> {
  let out = '';
  stream.on('data', (c: Buffer) => (out += c.toString()));
  return new Promise((resolve) => stream.on('end', () => resolve(out)));
}

describe('SpawnerProcessLauncher (real processes)', () => {
  jest.setTimeout(20_000);
  let launcher: SpawnerProcessLauncher;
  const sh = (script: string, extra: Partial<LaunchSpec> = {}): LaunchedProcess =>
    launcher.launch({
      command: SH,
      args: ['-c', script],
      env: { PATH: '/usr/bin:/bin' },
      cwd: '/',
      ...extra,
    });

  beforeAll(() => Logger.overrideLogger(['error']));
  // A spawner of their own: the tests kill and release it.
  beforeEach(() => (launcher = new SpawnerProcessLauncher(new Spawner())));
  afterEach(() => launcher.onApplicationShutdown());

  it('starts the process from the spawner, not the engine, with pipes on fds 0-4, its env and cwd', async () => {
    const proc = sh(
      'read line; echo "in=$line ctl=$(cat <&4) env=$ONLY cwd=$(pwd)"; echo status >&3; echo err >&2; exit 7',
      {
        env: { PATH: '/usr/bin:/bin', ONLY: 'this' },
        cwd: '/tmp',
      },
    );
    const [out, err, status] = [text(proc.stdout), text(proc.stderr), text(proc.status)];
    proc.stdin.end('hello\n');
    proc.control.end('args');
    const pid = await proc.started;
    expect(pid).toBe(proc.pid);
    expect(launcher.spawnerPid).toBeDefined();
    // The fork was the spawner's: the engine's event loop never waited on one.
    expect(parentOf(pid!)).toBe(launcher.spawnerPid);
    expect(parentOf(pid!)).not.toBe(process.pid);
    expect(await proc.closed).toEqual({ code: 7, signal: null });
    expect(await out).toBe('in=hello ctl=args env=this cwd=/tmp\n');
    expect(await err).toBe('err\n');
    expect(await status).toBe('status\n');
  });

  it('delivers output written before the process runs and output of a process that exits at once', async () => {
    const quick = sh('echo quick');
    const out = text(quick.stdout);
    for (const s of [quick.stderr, quick.status]) s.resume();
    quick.stdin.end();
    quick.control.end();
    expect(await quick.closed).toEqual({ code: 0, signal: null });
    expect(await out).toBe('quick\n');
    // Many at once, all through the one spawner.
    const many = Array.from({ length: 20 }, (_, i) => sh(`echo ${i}`));
    const outs = many.map((p) => text(p.stdout));
    for (const p of many) {
      for (const s of [p.stderr, p.status]) s.resume();
      p.stdin.end();
      p.control.end();
    }
    expect(await Promise.all(outs)).toEqual(many.map((_, i) => `${i}\n`));
    expect((await Promise.all(many.map((p) => p.closed))).every((e) => e.code === 0)).toBe(true);
  });

  it('kills the whole process group, also when asked before the pid is known', async () => {
    const proc = sh('sleep 30 & echo $!; wait');
    proc.killGroup(); // before `started`: done as soon as it is
    for (const s of [proc.stderr, proc.status, proc.stdout]) s.resume();
    expect(await proc.closed).toEqual({ code: null, signal: 'SIGKILL' });

    const group = sh('sleep 30 & echo $!; wait');
    const line = new Promise<number>((resolve) =>
      group.stdout.once('data', (c: Buffer) => resolve(Number(c.toString()))),
    );
    for (const s of [group.stderr, group.status]) s.resume();
    const sleeper = await line;
    expect(alive(sleeper)).toBe(true);
    group.killGroup();
    expect(await group.closed).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await eventually(() => !alive(sleeper), 5000)).toBe(true);
    group.killGroup(); // again, after the exit: no error
  });

  it('reports a command that cannot start: no pid, and closed with the error', async () => {
    const proc = launcher.launch({ command: '/nonexistent/program', args: [], env: {}, cwd: '/' });
    expect(await proc.started).toBeUndefined();
    const exit = await proc.closed;
    expect(exit).toMatchObject({ code: null, signal: null });
    expect((exit.error as NodeJS.ErrnoException).code).toBe('ENOENT');
    expect(proc.pid).toBeUndefined();
  });

  it('does not hold closed on a stream nobody reads', async () => {
    const proc = sh('echo unread; echo unread >&2; echo unread >&3');
    proc.stdin.end();
    proc.control.end();
    expect(await proc.closed).toEqual({ code: 0, signal: null });
  });

  it('runs as the uid and gid asked for', async () => {
    if (process.getuid?.() !== 0) throw new Error('the integration tests run as root');
    const proc = sh('id -u; id -g', { uid: 65534, gid: 65534 });
    const out = text(proc.stdout);
    for (const s of [proc.stderr, proc.status]) s.resume();
    proc.stdin.end();
    proc.control.end();
    expect(await proc.closed).toEqual({ code: 0, signal: null });
    expect(await out).toBe('65534\n65534\n');
  });

  it('a spawner that dies takes what it started with it, says so, and is replaced at the next launch', async () => {
    const running = sh('echo up; sleep 30');
    const up = new Promise((resolve) => running.stdout.once('data', resolve));
    for (const s of [running.stderr, running.status]) s.resume();
    await up;
    const pid = running.pid!;
    const first = launcher.spawnerPid!;
    process.kill(first, 'SIGKILL');
    const exit = await running.closed;
    expect(exit).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(exit.error?.message).toMatch(/the process spawner ended \(SIGKILL\) before the process did/);
    expect(await eventually(() => !alive(pid), 5000)).toBe(true);

    const next = sh('echo again');
    const out = text(next.stdout);
    for (const s of [next.stderr, next.status]) s.resume();
    next.stdin.end();
    next.control.end();
    expect(await next.closed).toEqual({ code: 0, signal: null });
    expect(await out).toBe('again\n');
    expect(launcher.spawnerPid).not.toBe(first);
  });

  it('at shutdown refuses new launches and lets the spawner go once the last process closes', async () => {
    const last = sh('sleep 0.3');
    for (const s of [last.stdout, last.stderr, last.status]) s.resume();
    await last.started;
    const spawner = launcher.spawnerPid!;
    launcher.onApplicationShutdown();
    const refused = sh('echo no');
    expect(await refused.started).toBeUndefined();
    expect((await refused.closed).error?.message).toMatch(/shut down/);
    expect(alive(spawner)).toBe(true);
    expect(await last.closed).toEqual({ code: 0, signal: null });
    expect(await eventually(() => !alive(spawner), 5000)).toBe(true);
  });
});
