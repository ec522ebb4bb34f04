/**
 * Integration tests of the pooled tier against the real Docker engine and sandbox image. Skipped (with a note) when
 * Docker does not answer, the image is missing or the engine is not root (host bind mounts need it).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Language } from '@switchyard/common';
import Dockerode from 'dockerode';
import { TEST_IMAGE_SOURCE } from '../../../../test/sandbox-image';
import { DockerodeClient } from '../docker-client';
import { buildChildEnv } from '../../../core/env-policy';
import { SandboxManager } from '../../../sandbox-manager.service';
import { SandboxModule } from '../../../sandbox.module';
import type { TierJob, TierRunResult } from '../../../core/sandbox.types';
import { SANDBOX_UID } from '../../../core/sandbox-image';
import { POOLED_LABELS } from './container-config';
import { POOLED_OPTIONS } from './pooled.constants';
import { ChildProcessHostMounts, parseMountInfo } from './host-mounts';
import { RunnerLostError } from '../../../core/pooled.errors';
import { PooledTierModule } from './pooled.module';
import { resolvePooledOptions } from './pooled.options';
import { PooledTier } from './pooled-tier';
import { prepareAndRun } from '../../../sandbox-manager.testing';

const options = resolvePooledOptions({
  ...TEST_IMAGE_SOURCE,
  min: 2,
  max: 6,
  maxSessions: 32,
  acquireTimeoutMs: 8000,
  healthCheckTimeoutMs: 500,
  runnerGraceMs: 2000,
  mountRoot: path.join(os.tmpdir(), `sy-pooled-it-${randomBytes(4).toString('hex')}`),
  limits: { memoryBytes: 256 * 2 ** 20, pids: 128 },
});

function canRun(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root';
  if (!options.image) return 'no sandbox image tag (npm run sandbox:image)';
  const inspect = spawnSync('docker', ['image', 'inspect', options.image], { timeout: 10_000 });
  if (inspect.status !== 0) return `docker or image ${options.image} unavailable`;
  return undefined;
}
// `npm test` starts Docker and builds the image first: a missing one is a failure, never a skip.
const unavailable = canRun();
if (unavailable) throw new Error(`pooled tier integration tests cannot run: ${unavailable}`);
const describeDocker = describe;

const dockerode = new Dockerode();

/** Every pid in the container's pids cgroup (cgroup v1 with the cgroupfs driver; v2 fallback). */
function containerPids(id: string): number[] {
  for (const file of [
    `/sys/fs/cgroup/pids/docker/${id}/cgroup.procs`,
    `/sys/fs/cgroup/system.slice/docker-${id}.scope/cgroup.procs`,
  ]) {
    try {
      return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      continue;
    }
  }
  throw new Error(`no pids cgroup found for ${id}`);
}

/**
 * The container's processes but the python the runner started ahead for the session's next run (its program holds
 * `_seen = _site()`, docker/sandbox/runner/runner_standby.py): init, the runner, and whatever a run left.
 */
function pidsButStandby(id: string): number[] {
  return containerPids(id).filter((pid) => {
    try {
      return !fs.readFileSync(`/proc/${pid}/cmdline`).includes('_seen = _site()');
    } catch {
      return false; // gone
    }
  });
}

/** The host pid of the process that is `pid` in the container's own pid namespace. */
function hostPidOf(id: string, pid: number): number {
  for (const hostPid of containerPids(id)) {
    try {
      const nspid = /^NSpid:\s+(.*)$/m
        .exec(fs.readFileSync(`/proc/${hostPid}/status`, 'utf8'))?.[1]
        .trim()
        .split(/\s+/);
      if (nspid && Number(nspid[nspid.length - 1]) === pid) return hostPid;
    } catch {
      continue; // gone meanwhile
    }
  }
  throw new Error(`no process ${pid} in container ${id.slice(0, 12)}`);
}

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function exists(id: string): Promise<boolean> {
  try {
    await dockerode.getContainer(id).inspect();
    return true;
  } catch {
    return false;
  }
}

/** Runs `cmd` in the container; resolves with its exit code (null when Docker does not know it). */
async function dockerExec(id: string, cmd: string[]): Promise<number | null> {
  const exec = await dockerode.getContainer(id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  await new Promise((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.resume();
  });
  return (await exec.inspect()).ExitCode;
}

describeDocker('PooledTier (real Docker)', () => {
  jest.setTimeout(30_000);
  let tier: PooledTier;
  const workspaces: string[] = [];

  const newWorkspace = (): string => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-pooled-ws-'));
    fs.chownSync(dir, SANDBOX_UID, SANDBOX_UID);
    workspaces.push(dir);
    return dir;
  };
  const sessions = new Map<string, string>();
  const session = (name: string): { sessionId: string; workspaceDir: string } => {
    if (!sessions.has(name)) sessions.set(name, newWorkspace());
    return { sessionId: `it-${name}-${process.pid}`, workspaceDir: sessions.get(name)! };
  };
  const job = (name: string, language: Language, code: string, extra: Partial<TierJob> = {}): TierJob => ({
    actionId: `a-${randomBytes(4).toString('hex')}`,
    ...session(name),
    language,
    code,
    env: buildChildEnv({}, language),
    timeoutMs: 5000,
    output: { maxBytes: 64 * 1024, maxLines: 1000 },
    ...extra,
  });
  const run = (
    name: string,
    language: Language,
    code: string,
    extra: Partial<TierJob> = {},
  ): Promise<TierRunResult> => tier.run(job(name, language, code, extra));
  const containerOf = (name: string): string => {
    const found = tier.containers().find((c) => c.sessionId === session(name).sessionId);
    if (!found) throw new Error(`session ${name} holds no container`);
    return found.id;
  };
  const warmIds = () =>
    tier
      .containers()
      .filter((c) => c.state === 'warm' && c.alive)
      .map((c) => c.id);

  let leftover: string;
  const leftoverKey = 'dead00beef00';
  const mounts = new ChildProcessHostMounts();

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    // What a SIGKILLed engine of this host leaves: a running pooled container and its mounted workspace.
    await mounts.ensureSharedRoot(options.mountRoot);
    fs.mkdirSync(path.join(options.mountRoot, leftoverKey));
    await mounts.bind(newWorkspace(), path.join(options.mountRoot, leftoverKey));
    const created = await dockerode.createContainer({
      Image: options.image,
      Cmd: ['sleep', '300'],
      User: '10001:10001',
      Labels: {
        [POOLED_LABELS.tier]: 'pooled',
        [POOLED_LABELS.engine]: `${os.hostname()}:${2 ** 22 + 7}:1`,
        [POOLED_LABELS.mountKey]: leftoverKey,
      },
      HostConfig: { NetworkMode: 'none', Init: true },
    });
    await created.start();
    leftover = created.id;

    tier = new PooledTier(options, new DockerodeClient(dockerode), mounts);
    await tier.onModuleInit();
    expect(await eventually(() => tier.stats().available >= 2, 20_000)).toBe(true);
  });

  afterAll(async () => {
    await tier?.onApplicationShutdown();
    await mounts.close();
    Logger.overrideLogger(false);
    const left = await dockerode.listContainers({
      all: true,
      filters: { label: [`${POOLED_LABELS.engine}=${options.engineId}`] },
    });
    expect(left).toEqual([]);
    spawnSync('umount', [options.mountRoot]);
    fs.rmSync(options.mountRoot, { recursive: true, force: true });
    for (const dir of workspaces) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("reaps a dead engine's container and workspace mount at start-up (SECURITY #17)", async () => {
    expect(await exists(leftover)).toBe(false);
    const mountPoint = path.join(options.mountRoot, leftoverKey);
    expect(
      parseMountInfo(fs.readFileSync('/proc/self/mountinfo', 'utf8')).some((m) => m.target === mountPoint),
    ).toBe(false);
    expect(fs.existsSync(mountPoint)).toBe(false);
  });

  it('is available and reports its pool', async () => {
    const a = await tier.availability();
    expect(a).toMatchObject({ available: true });
    expect(a.details?.pool).toMatchObject({ min: 2, max: 6, claimed: 0 });
  });

  it('runs python, node and bash through one claimed container', async () => {
    const py = await run(
      'langs',
      'python',
      'import os, sys; print("py", sys.version_info[:2], os.getcwd(), os.getuid())',
    );
    expect(py).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'py (3, 11) /workspace 10001\n' });
    const js = await run('langs', 'node', 'console.log("js", process.version.split(".")[0], process.cwd())');
    expect(js).toMatchObject({ exitCode: 0, stdout: 'js v18 /workspace\n' });
    const sh = await run('langs', 'bash', 'echo "sh $BASH_VERSION" | cut -c1-5; echo err >&2; exit 3', {
      stdin: 'ignored',
    });
    expect(sh).toMatchObject({ exitCode: 3, stdout: 'sh 5.\n', stderr: 'err\n' });
    const stdin = await run('langs', 'python', 'import sys; print(sys.stdin.read()[::-1])', { stdin: 'abc' });
    expect(stdin.stdout).toBe('cba\n');
    expect(tier.stats().claimed).toBe(1);
  });

  it('shares the workspace live in both directions, as the sandbox user', async () => {
    const { workspaceDir } = session('share');
    fs.writeFileSync(path.join(workspaceDir, 'from-host.txt'), 'host data');
    const r = await run(
      'share',
      'bash',
      'cat /workspace/from-host.txt; echo -n pooled > /workspace/from-pool.txt',
    );
    expect(r).toMatchObject({ exitCode: 0, stdout: 'host data' });
    // Written by the container, visible on the host as soon as the run returns.
    const written = path.join(workspaceDir, 'from-pool.txt');
    expect(fs.readFileSync(written, 'utf8')).toBe('pooled');
    expect(fs.statSync(written).uid).toBe(SANDBOX_UID);
    // A host change between two runs is seen by the next one, no copy involved.
    fs.writeFileSync(path.join(workspaceDir, 'from-host.txt'), 'changed');
    expect((await run('share', 'bash', 'cat from-host.txt')).stdout).toBe('changed');
  });

  it('keeps sessions apart: files, /tmp and processes', async () => {
    fs.writeFileSync(path.join(session('alice').workspaceDir, 'alice-secret.txt'), 'a');
    fs.writeFileSync(path.join(session('bob').workspaceDir, 'bob-file.txt'), 'b');
    await run('alice', 'bash', 'echo alice > /tmp/alice-tmp');
    const marker = `77${randomBytes(3).readUIntBE(0, 3)}`;
    const aliceSleeps = run('alice', 'bash', `sleep ${marker}`, { timeoutMs: 1500 });
    // Alice's sleep is running in her container…
    const alice = containerOf('alice');
    expect(await eventually(() => containerPids(alice).length > 2, 1000)).toBe(true);
    // …and Bob sees neither it, nor her files, nor her /tmp.
    const bob = await run(
      'bob',
      'bash',
      `ls -A /workspace; ls -A /tmp; ps -eo args | grep -c "[s]leep ${marker}"; find / -xdev -name 'alice*' 2>/dev/null | head -3`,
    );
    // Bob's workspace: his file and his (empty) home.
    expect(bob.stdout).toBe('.home\nbob-file.txt\n0\n');
    expect(containerOf('alice')).not.toBe(containerOf('bob'));
    expect((await aliceSleeps).timedOut).toBe(true);
  });

  it('keeps /tmp between actions of a session, never for a new one', async () => {
    await run('tmp1', 'python', 'open("/tmp/state.txt", "w").write("kept")');
    expect((await run('tmp1', 'bash', 'cat /tmp/state.txt')).stdout).toBe('kept');
    const fresh = await run('tmp2', 'bash', 'cat /tmp/state.txt');
    expect(fresh.exitCode).not.toBe(0);
    expect(fresh.stderr).toContain('No such file');
  });

  it('removes the container and the mount on releaseSession, and the pool refills', async () => {
    await run('release', 'bash', 'true');
    const id = containerOf('release');
    await tier.releaseSession(session('release').sessionId);
    expect(await exists(id)).toBe(false);
    const mounts = parseMountInfo(fs.readFileSync('/proc/self/mountinfo', 'utf8'));
    expect(
      mounts.some((m) => m.target.startsWith(`${options.mountRoot}/`) && m.target.includes(id.slice(0, 4))),
    ).toBe(false);
    expect(tier.containers().some((c) => c.id === id)).toBe(false);
    await tier.releaseSession(session('release').sessionId); // idempotent
    expect(await eventually(() => tier.stats().available >= 2, 10_000)).toBe(true);
  });

  it('kills background children after a normal exit and everything on timeout', async () => {
    const bg = await run(
      'procs',
      'bash',
      'sleep 999 & setsid sleep 998 & nohup sleep 997 >/dev/null 2>&1 & echo started',
    );
    expect(bg).toMatchObject({ exitCode: 0, stdout: 'started\n' });
    const id = containerOf('procs');
    // docker-init and the runner only.
    expect(await eventually(() => pidsButStandby(id).length === 2, 2000)).toBe(true);

    const t0 = Date.now();
    const slow = await run('procs', 'bash', '(sleep 1e6 &) ; trap "" TERM; sleep 1e6', { timeoutMs: 800 });
    expect(slow).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(await eventually(() => pidsButStandby(id).length === 2, 2000)).toBe(true);
    // The container is still the session's and still works.
    expect((await run('procs', 'bash', 'echo ok')).stdout).toBe('ok\n');
    expect(containerOf('procs')).toBe(id);
  });

  it('ends fork bombs within timeout + 2 s, leaving nothing behind', async () => {
    await run('procs', 'bash', 'true');
    const id = containerOf('procs');
    // The bash bomb backgrounds itself and the shell exits at once (or, when the pids limit is already hit, bash
    // keeps retrying fork until the timeout): either way every process it made is killed with it.
    const t1 = Date.now();
    const bash = await run('procs', 'bash', ':(){ :|:& };:', { timeoutMs: 1500 });
    expect(Date.now() - t1).toBeLessThan(1500 + 2000);
    expect(bash.exitCode === 0 || bash.timedOut).toBe(true);
    expect(await eventually(() => pidsButStandby(id).length === 2, 2000)).toBe(true);
    const t0 = Date.now();
    const py = await run(
      'procs',
      'python',
      'import os\nwhile True:\n    try: os.fork()\n    except OSError: pass',
      {
        timeoutMs: 1500,
      },
    );
    expect(Date.now() - t0).toBeLessThan(1500 + 2000);
    expect(py.timedOut).toBe(true);
    expect(await eventually(() => pidsButStandby(id).length === 2, 2000)).toBe(true);
    expect((await run('procs', 'bash', 'echo still-here')).stdout).toBe('still-here\n');
  });

  it('runs user code, and all it forks, at niceness 19 while the runner keeps 0', async () => {
    const r = await run(
      'nice',
      'bash',
      'cut -d" " -f19 /proc/$$/stat; sh -c \'cut -d" " -f19 /proc/$$/stat\'; cut -d" " -f19 /proc/1/stat',
    );
    // The code, a child of it, and the container's init (docker-init, outside any run).
    expect(r.stdout.split('\n').filter(Boolean)).toEqual(['19', '19', '0']);
    const runnerPid = tier.containers().find((c) => c.sessionId === session('nice').sessionId)!.runnerPid;
    const runner = await run('nice', 'bash', `cut -d" " -f19 /proc/${runnerPid}/stat`);
    expect(runner.stdout).toBe('0\n');
  });

  it('caps output and stops the run', async () => {
    const t0 = Date.now();
    const r = await run('cap', 'bash', 'yes', { output: { maxBytes: 4096, maxLines: 100_000 } });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r.truncated.stdout).toBe(true);
    expect(r.stdout.length).toBe(4096);
    expect(r.limit?.code).toBe('OUTPUT_CAP');
    const lines = await run('cap', 'python', 'import sys\nfor i in range(10**6): print(i)', {
      output: { maxBytes: 1 << 20, maxLines: 10 },
    });
    expect(lines.stdout.split('\n').length - 1).toBe(10);
    expect(lines).toMatchObject({
      truncated: { stdout: true, stderr: false },
      limit: { code: 'OUTPUT_CAP' },
    });
  });

  it('reports a memory bomb as OUT_OF_MEMORY and keeps serving the session', async () => {
    const r = await run('oom', 'python', 'a = []\nwhile True: a.append(bytearray(16 << 20))', {
      timeoutMs: 10_000,
    });
    expect(r.limit?.code).toBe('OUT_OF_MEMORY');
    expect(r.timedOut).toBe(false);
    expect((await run('oom', 'bash', 'echo alive')).stdout).toBe('alive\n');
  });

  it('never hands out a warm container whose runner was killed', async () => {
    // The earlier tests' claims may still be refilling the pool.
    await eventually(() => warmIds().length >= 1, 10_000);
    const victims = tier.containers().filter((c) => c.state === 'warm' && c.alive);
    expect(victims.length).toBeGreaterThan(0);
    // SIGKILL to each runner itself, from the host (its host pid, found by its pid in the container, from its
    // greeting). Not by `docker exec kill`: the pool health-checks the other warm containers as soon as one runner's
    // connection closes, and a runner's health check kills every process in its container that nothing owns, an
    // exec'd `kill` on its way included (seen: the `kill` ended by SIGKILL, its runner alive 15 s later).
    for (const c of victims) process.kill(hostPidOf(c.id, c.runnerPid), 'SIGKILL');
    const ids = victims.map((c) => c.id);
    const dead = () => tier.containers().every((c) => !ids.includes(c.id) || !c.alive);
    expect(await eventually(dead, 5000)).toBe(true);
    const r = await run('after-kill', 'bash', 'echo fresh');
    expect(r.stdout).toBe('fresh\n');
    expect(ids).not.toContain(containerOf('after-kill'));
    expect(await eventually(async () => !(await Promise.all(ids.map(exists))).some(Boolean), 10_000)).toBe(
      true,
    );
  });

  it('replaces paused warm containers within the acquire timeout', async () => {
    await eventually(() => warmIds().length >= 2, 10_000);
    const paused = warmIds();
    await Promise.all(paused.map((id) => dockerode.getContainer(id).pause()));
    const t0 = Date.now();
    const r = await run('after-pause', 'bash', 'echo fresh');
    expect(Date.now() - t0).toBeLessThan(options.acquireTimeoutMs);
    expect(r.stdout).toBe('fresh\n');
    expect(paused).not.toContain(containerOf('after-pause'));
    expect(await eventually(async () => !(await Promise.all(paused.map(exists))).some(Boolean), 10_000)).toBe(
      true,
    );
  });

  it("detects a claimed container's runner dying mid-run and gives the session a fresh one", async () => {
    await run('lost', 'bash', 'echo hi > /workspace/kept.txt; echo tmp > /tmp/lost.txt');
    const id = containerOf('lost');
    const pending = run('lost', 'bash', 'sleep 20', { timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 300));
    await dockerExec(id, ['kill', '1']);
    await expect(pending).rejects.toBeInstanceOf(RunnerLostError);
    expect(await exists(id)).toBe(false);
    const next = await run(
      'lost',
      'bash',
      'cat /workspace/kept.txt; cat /tmp/lost.txt 2>/dev/null || echo no-tmp',
    );
    expect(next.stdout).toBe('hi\nno-tmp\n');
    expect(containerOf('lost')).not.toBe(id);
  });

  it('claims with the health check and one mount, and counts the claim as warm', async () => {
    expect(await eventually(() => tier.stats().available >= 2, 10_000)).toBe(true);
    const before = tier.stats();
    expect((await run('claim', 'bash', 'echo claimed')).stdout).toBe('claimed\n');
    const after = tier.stats();
    expect(after.warmClaims).toBe(before.warmClaims + 1);
    expect(after.coldClaims).toBe(before.coldClaims);
    expect(after.lastClaimMs).toBeGreaterThan(0);
  });

  it('never runs code when /workspace is not the session workspace: the runner checks every run', async () => {
    await run('verify', 'bash', 'true');
    const id = containerOf('verify');
    const info = await dockerode.getContainer(id).inspect();
    const mountPoint = info.Mounts.find((m) => m.Destination === '/workspace')!.Source;
    // The workspace disappears from the container behind the engine's back: it now sees the empty mount point.
    await mounts.unmount(mountPoint);
    await expect(run('verify', 'bash', 'echo RAN')).rejects.toMatchObject({ code: 'WORKSPACE_NOT_VISIBLE' });
    expect(await exists(id)).toBe(false);
    // The session goes on in a fresh container that sees its workspace again.
    fs.writeFileSync(path.join(session('verify').workspaceDir, 'still.txt'), 'here');
    expect((await run('verify', 'bash', 'cat still.txt')).stdout).toBe('here');
    expect(containerOf('verify')).not.toBe(id);
  });

  it('keeps running in a workspace the code made unreadable (the check needs no read permission)', async () => {
    expect((await run('noread', 'bash', 'chmod 0311 /workspace && echo locked')).stdout).toBe('locked\n');
    expect((await run('noread', 'bash', 'pwd; ls . 2>/dev/null || echo unreadable')).stdout).toBe(
      '/workspace\nunreadable\n',
    );
  });

  it('confines the code (SECURITY item 10, 12)', async () => {
    const r = await run(
      'sec',
      'bash',
      [
        'grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status | tr -s "\\t " " "',
        'id -u',
        'test -e /var/run/docker.sock && echo SOCKET || echo no-socket',
        'mount -t tmpfs none /tmp/x 2>/dev/null && echo MOUNTED || echo no-mount',
        'unshare -U true 2>/dev/null && echo UNSHARED || echo no-unshare',
        'ls /sys/class/net | tr "\\n" " "; echo',
        'touch /usr/x 2>/dev/null && echo ROOTFS-WRITABLE || echo ro-root',
      ].join('\n'),
    );
    expect(r.stdout).toBe(
      'CapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n10001\nno-socket\nno-mount\nno-unshare\nlo \nro-root\n',
    );
    const info = await dockerode.getContainer(containerOf('sec')).inspect();
    expect(info.HostConfig).toMatchObject({
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      ReadonlyRootfs: true,
      IpcMode: 'private',
      Init: true,
      PidsLimit: 128,
      Memory: 256 * 2 ** 20,
      MemorySwap: 256 * 2 ** 20,
      LogConfig: { Type: 'none' },
    });
    expect(info.Config.Labels).toMatchObject({
      [POOLED_LABELS.tier]: 'pooled',
      [POOLED_LABELS.engine]: options.engineId,
    });
    expect(JSON.stringify(info.Mounts)).not.toContain('docker.sock');
  });
});

describeDocker('ChildProcessHostMounts (real mounts)', () => {
  let dir: string;
  const mountCount = (target: string) =>
    parseMountInfo(fs.readFileSync('/proc/self/mountinfo', 'utf8')).filter((m) => m.target === target).length;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-host-mounts-'));
    fs.mkdirSync(path.join(dir, 'source'));
    fs.mkdirSync(path.join(dir, 'target'));
    fs.writeFileSync(path.join(dir, 'source', 'file.txt'), 'seen');
  });
  afterEach(() => {
    for (let i = 0; i < 4; i++) spawnSync('umount', ['-l', path.join(dir, 'target')]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['its helper', {}],
    ['the mount command when there is no helper', { python: '/nonexistent/python3' }],
  ])('binds and unmounts through %s, peeling stacked layers', async (_how, settings) => {
    const mounts = new ChildProcessHostMounts(settings);
    const [source, target] = [path.join(dir, 'source'), path.join(dir, 'target')];
    try {
      await mounts.bind(source, target);
      await mounts.bind(source, target);
      expect(mountCount(target)).toBe(2);
      expect(fs.readFileSync(path.join(target, 'file.txt'), 'utf8')).toBe('seen');
      await mounts.unmount(target);
      expect(mountCount(target)).toBe(0);
      expect(fs.readdirSync(target)).toEqual([]);
      await mounts.unmount(target); // nothing mounted: a no-op
      await expect(mounts.bind(source, path.join(dir, 'missing'))).rejects.toMatchObject({
        code: 'HOST_MOUNT',
      });
    } finally {
      await mounts.close();
    }
  });

  it('releases the shared root it made once nothing is in it, never a mount someone else made there', async () => {
    const mounts = new ChildProcessHostMounts();
    const [root, source, target] = ['root', 'source', 'target'].map((d) => path.join(dir, d));
    fs.mkdirSync(root);
    try {
      await mounts.ensureSharedRoot(root);
      expect(mountCount(root)).toBe(1);
      fs.mkdirSync(path.join(root, 'abc123')); // a container's mount point: the root is in use
      expect(await mounts.releaseSharedRoot(root)).toBe(false);
      expect(mountCount(root)).toBe(1);
      fs.rmdirSync(path.join(root, 'abc123'));
      expect(await mounts.releaseSharedRoot(root)).toBe(true);
      expect(mountCount(root)).toBe(0);

      // Another directory bound there (an operator's volume) is not a self-bind: it stays.
      await mounts.bind(source, target);
      fs.rmSync(path.join(source, 'file.txt'));
      expect(await mounts.releaseSharedRoot(target)).toBe(false);
      expect(mountCount(target)).toBe(1);
    } finally {
      for (let i = 0; i < 4; i++) spawnSync('umount', ['-l', root]);
      await mounts.close();
    }
  });

  it('keeps working after close, through the mount command', async () => {
    const mounts = new ChildProcessHostMounts();
    await mounts.bind(path.join(dir, 'source'), path.join(dir, 'target'));
    await mounts.close();
    await mounts.unmount(path.join(dir, 'target'));
    expect(mountCount(path.join(dir, 'target'))).toBe(0);
  });
});

describeDocker('PooledTier through SandboxModule and the manager (real Docker)', () => {
  jest.setTimeout(30_000);

  it('routes a pooled request, runs it, releases the session and cleans up at shutdown', async () => {
    Logger.overrideLogger(['error']);
    const mountRoot = path.join(os.tmpdir(), `sy-pooled-mod-${randomBytes(4).toString('hex')}`);
    const workspaceDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-pooled-ws-'));
    fs.chownSync(workspaceDir, SANDBOX_UID, SANDBOX_UID);
    const moduleRef = await Test.createTestingModule({
      imports: [
        SandboxModule.forRoot(
          { subprocess: { cgroup: { mode: 'off' } } },
          {
            imports: [PooledTierModule.forRoot({ image: options.image, min: 1, max: 2, mountRoot })],
            tiers: [PooledTier],
          },
        ),
      ],
    }).compile();
    try {
      await moduleRef.init();
      const manager = moduleRef.get(SandboxManager);
      expect((await manager.availability()).pooled).toMatchObject({ available: true });
      const outcome = await prepareAndRun(manager, {
        actionId: 'm1',
        sessionId: `mod-${process.pid}`,
        language: 'python',
        code: 'open("/workspace/via-manager.txt", "w").write("ok"); print("routed")',
        tier: 'pooled',
        workspaceDir,
      });
      expect(outcome).toMatchObject({
        status: 'succeeded',
        tier: 'pooled',
        run: { stdout: 'routed\n', exitCode: 0 },
      });
      expect(fs.readFileSync(path.join(workspaceDir, 'via-manager.txt'), 'utf8')).toBe('ok');
      await manager.releaseSession(`mod-${process.pid}`);
      expect(moduleRef.get(PooledTier).stats().claimed).toBe(0);
    } finally {
      await moduleRef.close();
      Logger.overrideLogger(false);
      spawnSync('umount', [mountRoot]);
      fs.rmSync(mountRoot, { recursive: true, force: true });
      fs.rmSync(workspaceDir, { recursive: true, force: true });
    }
    const engine = moduleRef.get<{ engineId: string }>(POOLED_OPTIONS).engineId;
    const left = await dockerode.listContainers({
      all: true,
      filters: { label: [`${POOLED_LABELS.engine}=${engine}`] },
    });
    expect(left).toEqual([]);
  });
});
