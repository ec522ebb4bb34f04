import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { cgroupDirOf } from '../../libs/sandbox/src/backends/subprocess/cgroup-mounts';
import { ENGINE_MARK_ENV, ownPidNamespace } from '../../libs/sandbox/src/backends/subprocess/engine-mark';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';

/**
 * SECURITY.md #23 for the subprocess tier, with the built engine (`npx nest build engine`) as a real process: the
 * sandboxes it launched ahead of time (through its spawner), and one running an action, die with it when it is
 * SIGKILLed; and the next
 * engine's start-up removes what a crash of an older engine left behind (marked launchers, cgroups with processes).
 */

/** `/proc/<pid>/stat` fields from the state on (field 3), or undefined once the process is gone. */
function stat(pid: number): { comm: string; fields: string[] } | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    return { comm: text.slice(text.indexOf('(') + 1, close), fields: text.slice(close + 2).split(' ') };
  } catch {
    return undefined;
  }
}

/** Running: it exists and is not a zombie (a killed process waits there until this machine's init reaps it). */
const running = (pid: number): boolean => {
  const s = stat(pid);
  return s !== undefined && s.fields[0] !== 'Z';
};

const allPids = (): number[] =>
  fs
    .readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number);

/**
 * In a Docker or Kubernetes container: another suite's pooled sandbox (a session's kernels and processes start there
 * when Docker is up), still on its way out, is on this host's process table too.
 */
const inAContainer = (pid: number): boolean => {
  try {
    return /docker|kubepods|containerd/.test(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
  } catch {
    return false;
  }
};

/** Argv no other suite uses (GNU sleep takes fractions), findable in the host's process table. */
const UNIQUE = `${process.pid % 10_000}${Date.now() % 1000}`;
const SLEEP_ACTION = `sleep 30.${UNIQUE}`;
const SLEEP_PROCESS = `sleep 4321.${UNIQUE}`;

/** Running bubblewrap children of `parent`. */
const bwrapChildrenOf = (parent: number): number[] =>
  allPids().filter((pid) => {
    const s = stat(pid);
    return s?.comm === 'bwrap' && s.fields[1] === String(parent) && s.fields[0] !== 'Z';
  });

/** The engine's spawner: the child of the engine running `spawner-main.js`, through which it launches sandboxes. */
const spawnersOf = (enginePid: number): number[] =>
  allPids().filter(
    (pid) => stat(pid)?.fields[1] === String(enginePid) && /\/spawner-main\.js$/.test(cmdline(pid)),
  );

/** The checkpoint tree tool's jail (libs/workspace, not a sandbox): its Python source is on its command line. */
const isTreeTool = (pid: number): boolean => cmdline(pid).includes('def op_count(');

/** The engine's sandbox launchers: children of its spawner, never of the engine (whose fork would hold its loop). */
const launchersOf = (enginePid: number): number[] => spawnersOf(enginePid).flatMap(bwrapChildrenOf);

/** Running processes carrying the engine mark of `enginePid` (whatever the start ticks). */
const markedBy = (enginePid: number): number[] =>
  allPids().filter((pid) => {
    try {
      const environ = fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      return environ.some((e) => e.startsWith(`${ENGINE_MARK_ENV}=${enginePid}:`)) && running(pid);
    } catch {
      return false;
    }
  });

async function until(check: () => boolean, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

describe('subprocess tier: a killed engine leaves nothing behind (the built engine as a real process)', () => {
  jest.setTimeout(60_000);
  let dataDir: string;
  let engine: EngineProcess | undefined;
  /** The killed engine: pid, start ticks, and the directory its cgroups were made in (pids hierarchy). */
  let dead: { pid: number; ticks: string; groupParent?: string } | undefined;
  /** What the second test plants, removed in afterAll should the engine not have. */
  const planted: { procs: ChildProcess[]; dirs: string[] } = { procs: [], dirs: [] };

  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-leftovers-'));
  });
  afterAll(async () => {
    await engine?.stop('SIGKILL');
    for (const p of planted.procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    for (const d of planted.dirs) fs.rmSync(d, { recursive: true, force: true });
    removeDataDir(dataDir);
  });

  const code = (sid: string, language: string, src: string, timeoutMs = 10_000) =>
    engine!.request('POST', `/v1/sessions/${sid}/actions`, { type: 'code', language, code: src, timeoutMs });

  it('its pre-launched sandboxes, and the one running an action, die with it', async () => {
    engine = await EngineProcess.start(dataDir, await freePort());
    const pid = engine.pid;
    const sid = await engine.createSession();
    // A run per interpreter leaves a sandbox launched ahead for each.
    expect((await code(sid, 'python', 'print(1)')).body.stdout).toBe('1\n');
    expect((await code(sid, 'bash', 'echo 1')).body.stdout).toBe('1\n');
    expect(await until(() => launchersOf(pid).length >= 2, 5000)).toBe(true);
    // The session's stateful sandbox, with a kernel and a background process in it, dies with the engine too.
    const cell = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      code: 'kept = 1',
      state: 'session',
      tier: 'subprocess',
    });
    expect(cell.body.output.kernel).toMatchObject({ tier: 'subprocess', started: true });
    const bg = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'process',
      op: 'start',
      command: SLEEP_PROCESS,
      tier: 'subprocess',
    });
    expect(bg.body).toMatchObject({ status: 'succeeded', tier: 'subprocess' });
    expect(await until(() => allPids().some((p) => running(p) && cmdline(p) === SLEEP_PROCESS), 5000)).toBe(
      true,
    );
    // In a session of its own: a fresh action of this one would now run inside its stateful sandbox, with its
    // process.
    const pending = code(await engine.createSession(), 'bash', SLEEP_ACTION, 40_000).catch(() => undefined);
    expect(await until(() => launchersOf(pid).length >= 4, 5000)).toBe(true);
    const launchers = launchersOf(pid);
    const spawners = spawnersOf(pid);
    expect(spawners).toHaveLength(1);
    // The engine forks no sandbox itself: its only bubblewrap child is the tree tool's jail.
    const treeTool = bwrapChildrenOf(pid);
    expect(treeTool.filter(isTreeTool)).toEqual(treeTool);
    expect(treeTool).toHaveLength(1);
    const marked = markedBy(pid);
    expect(marked).toEqual(expect.arrayContaining(launchers));
    dead = { pid, ticks: stat(pid)!.fields[19], groupParent: dirOfGroups(launchers[0]) };
    // Where the host gives the tier cgroups, the launchers are in them: the reaper test below plants one there.
    const health = await engine.request('GET', '/health');
    if (health.body.tiers.subprocess.details.limits !== 'none') expect(dead.groupParent).toBeDefined();

    await engine.stop('SIGKILL');
    await pending;
    // The spawner exits with the engine (its channel closes); the launchers' parent-death signal kills them.
    expect(await until(() => spawners.every((p) => !running(p)), 2000)).toBe(true);
    expect(await until(() => launchers.every((p) => !running(p)), 2000)).toBe(true);
    // The tree tool's jail is not marked (it is no sandbox), but it dies with its parent all the same.
    expect(await until(() => treeTool.every((p) => !running(p)), 2000)).toBe(true);
    // Nothing of it runs: not the launchers, not bubblewrap's sandbox processes, not the sleeping code.
    expect(await until(() => markedBy(pid).length === 0, 2000)).toBe(true);
    // The code inside dies with its sandbox's pid namespace, which the kernel tears down after the launcher's death.
    const leftovers = (): number[] =>
      allPids().filter(
        (p) =>
          running(p) &&
          (cmdline(p) === SLEEP_ACTION ||
            cmdline(p) === SLEEP_PROCESS ||
            (!inAContainer(p) && cmdline(p).includes('kernel_python.py'))),
      );
    await until(() => leftovers().length === 0, 2000);
    expect(leftovers().map((p) => `${p} ${cmdline(p)}`)).toEqual([]);
  });

  it('the next engine’s start-up kills marked launchers and removes cgroups of dead engines', async () => {
    expect(dead).toBeDefined();
    const { pid, ticks, groupParent } = dead!;
    // What a crash of an older engine could leave: a marked bubblewrap still waiting for its options...
    const launcher = spawn(
      '/usr/bin/bwrap',
      ['--unshare-all', '--ro-bind', '/', '/', '--args', '4', '--', '/bin/true'],
      {
        detached: true,
        env: { [ENGINE_MARK_ENV]: `${pid}:${ticks}:${ownPidNamespace()}` },
        stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'],
      },
    );
    planted.procs.push(launcher);
    // ...and one of its cgroups with a process in it.
    let inGroup: ChildProcess | undefined;
    let group: string | undefined;
    if (groupParent) {
      group = path.join(groupParent, `e${pid}-${ticks}-leftover`);
      fs.mkdirSync(group);
      planted.dirs.push(group);
      inGroup = spawn('sleep', ['998'], { stdio: 'ignore' });
      planted.procs.push(inGroup);
      fs.writeFileSync(path.join(group, 'cgroup.procs'), String(inGroup.pid));
    }
    // A marked process of a running engine (this test process stands for one) is left alone.
    const live = spawn('sleep', ['997'], {
      env: { [ENGINE_MARK_ENV]: `${process.pid}:${stat(process.pid)!.fields[19]}:${ownPidNamespace()}` },
      stdio: 'ignore',
    });
    planted.procs.push(live);
    expect(await until(() => running(launcher.pid!) && running(live.pid!), 2000)).toBe(true);

    engine = await EngineProcess.start(dataDir, await freePort());
    expect(await until(() => !running(launcher.pid!), 2000)).toBe(true);
    if (group && inGroup) {
      expect(await until(() => !running(inGroup.pid!) && !fs.existsSync(group), 2000)).toBe(true);
    }
    expect(running(live.pid!)).toBe(true);
    live.kill('SIGKILL');
    // The engine works as before.
    const sid = await engine.createSession();
    expect((await code(sid, 'python', 'print(2)')).body.stdout).toBe('2\n');
    await engine.stop('SIGTERM');
    engine = undefined;
  });
});

/** Where the engine made the cgroup of `pid` (pids hierarchy on cgroup v1, the v2 one otherwise); none without. */
function dirOfGroups(pid: number): string | undefined {
  const dir = cgroupDirOf(pid, 'pids') ?? cgroupDirOf(pid, '');
  return dir && /\/switchyard\/e\d+-/.test(dir) ? path.dirname(dir) : undefined;
}

function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}
