import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { Logger } from '@nestjs/common';
import type { ContainerCreateOptions } from 'dockerode';
import { matchesLabels } from '../../../../test/fake-output';
import { RUNNER_EXIT_OK } from '../../../../test/runner-exit';
import {
  DockerClient,
  type ContainerExit,
  type ContainerState,
  type ContainerStreams,
  type ContainerSummary,
  type LabelFilter,
} from '../docker-client';
import { DockerNotFoundError, DockerUnavailableError } from '../docker.errors';
import { CALL_SOCKET_ENV, type CallChannel, type TierJob } from '../../../core/sandbox.types';
import { POOLED_LABELS } from './container-config';
import { HostMounts } from './host-mounts';
import { PoolExhaustedError, RunnerLostError } from '../../../core/pooled.errors';
import { resolvePooledOptions, type PooledOptions } from './pooled.options';
import { defaultEngineInstanceId } from '../../../core/engine-instance';
import { engineDeadHere } from '../../../core/engine-instance';
import { PooledTier } from './pooled-tier';
import {
  RUNNER_PROTOCOL,
  type RunnerExit,
  type RunnerRunRequest,
} from '../../../core/runner/runner-protocol';

type RunScript = (
  request: RunnerRunRequest & { id: number },
  out: (fd: 1 | 2, text: string) => void,
  runner: FakeRunner,
) => Promise<Partial<RunnerExit> | 'never'> | Partial<RunnerExit> | 'never';

/** The in-container runner, faked: answers pings, runs scripted runs, records kills and refusals. */
class FakeRunner {
  hung = false;
  pings = 0;
  /** Pings answered so far. */
  pongs = 0;
  /** Answer pings only once this settles. */
  pingGate: Promise<void> | undefined;
  readonly kills: number[] = [];
  readonly runs: RunnerRunRequest[] = [];
  /** Runs refused because /workspace was not the expected directory (nothing of them ran). */
  readonly refused: RunnerRunRequest[] = [];
  private buffered = '';

  constructor(
    private readonly input: PassThrough,
    private readonly output: PassThrough,
    private readonly script: () => RunScript,
    /** Device and inode of what the container sees at /workspace. */
    private readonly workspace: () => [number, number],
  ) {
    input.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      const lines = this.buffered.split('\n');
      this.buffered = lines.pop()!;
      for (const line of lines) void this.handle(JSON.parse(line) as Record<string, unknown>);
    });
    this.send({ ev: 'hello', protocol: RUNNER_PROTOCOL, pid: 7, python: '3.11.2', oomCounter: true });
  }

  private send(message: Record<string, unknown>): void {
    if (!this.output.writableEnded) this.output.write(`${JSON.stringify(message)}\n`);
  }

  private async handle(m: Record<string, unknown>): Promise<void> {
    if (this.hung) return;
    const id = m.id as number;
    if (m.op === 'ping') {
      this.pings++;
      if (this.pingGate) await this.pingGate;
      this.pongs++;
      return this.send({ ev: 'pong', id, ok: true, busy: false, ms: 0.5, workspace: this.workspace() });
    }
    if (m.op === 'kill') {
      this.kills.push(id);
      return;
    }
    const request = m as unknown as RunnerRunRequest & { id: number };
    // As runner.py: nothing starts unless /workspace is the directory the run names.
    const seen = this.workspace().map(String);
    if (seen[0] !== request.workspace?.[0] || seen[1] !== request.workspace?.[1]) {
      this.refused.push(request);
      return this.send({ ev: 'error', id, code: 'workspace', message: 'not the workspace', workspace: seen });
    }
    this.runs.push(request);
    const exit = await this.script()(
      request,
      (fd, text) => this.send({ ev: 'out', id, fd, data: Buffer.from(text).toString('base64') }),
      this,
    );
    if (exit === 'never') return;
    this.send({ ev: 'exit', id, ...RUNNER_EXIT_OK, durationMs: 1, ...exit });
  }
}

interface FakeContainer {
  id: string;
  spec: ContainerCreateOptions;
  state: string;
  oomKilled: boolean;
  runner?: FakeRunner;
  /** Ends the attach connection, as when the runner (the main process) exits. */
  die(): void;
  io: { toRunner: PassThrough; fromRunner: PassThrough; stderr: PassThrough };
}

/** A Docker engine in memory that records what the tier asked of it. */
class FakeDocker extends DockerClient {
  readonly endpoint = 'fake://docker';
  down = false;
  images = new Set<string>(['switchyard/sandbox:test']);
  readonly containers = new Map<string, FakeContainer>();
  readonly removed: string[] = [];
  /** Containers of other engines, as `listByLabel` reports them. */
  foreign: ContainerSummary[] = [];
  /** Host mounts on a container's mount point show up inside it (shared mount root). */
  propagates = true;
  script: RunScript = (r, out) => {
    out(1, `ran ${r.language}\n`);
    return { exitCode: 0 };
  };
  private next = 1;
  /** Containers created so far. */
  created = 0;

  constructor(private readonly mounts: FakeMounts) {
    super();
  }

  private check(operation: string): void {
    if (this.down) throw new DockerUnavailableError(operation, this.endpoint, 'ECONNREFUSED');
  }

  ping(): Promise<void> {
    this.check('ping');
    return Promise.resolve();
  }
  imageExists(ref: string): Promise<boolean> {
    this.check('imageExists');
    return Promise.resolve(this.images.has(ref));
  }
  createContainer(spec: ContainerCreateOptions): Promise<string> {
    this.check('createContainer');
    this.created++;
    const id = `c${this.next++}`.padEnd(64, '0');
    const io = { toRunner: new PassThrough(), fromRunner: new PassThrough(), stderr: new PassThrough() };
    let closed!: () => void;
    const container: FakeContainer = {
      id,
      spec,
      state: 'created',
      oomKilled: false,
      io,
      die: () => {
        container.state = 'exited';
        io.fromRunner.end();
        io.stderr.end();
        closed();
      },
    };
    (container as unknown as { closed: Promise<void> }).closed = new Promise<void>((r) => (closed = r));
    this.containers.set(id, container);
    return Promise.resolve(id);
  }
  attach(id: string): Promise<ContainerStreams> {
    const c = this.get(id);
    return Promise.resolve({
      stdin: c.io.toRunner,
      stdout: c.io.fromRunner,
      stderr: c.io.stderr,
      closed: (c as unknown as { closed: Promise<void> }).closed,
      destroy: () => c.die(),
    });
  }
  start(id: string): Promise<void> {
    const c = this.get(id);
    c.state = 'running';
    const mountPoint = c.spec.HostConfig!.Mounts![0].Source;
    c.runner = new FakeRunner(
      c.io.toRunner,
      c.io.fromRunner,
      () => this.script,
      () => {
        const seen = this.propagates ? (this.mounts.bound.get(mountPoint) ?? mountPoint) : mountPoint;
        const st = fs.statSync(seen);
        return [st.dev, st.ino];
      },
    );
    return Promise.resolve();
  }
  wait(): Promise<ContainerExit> {
    return Promise.resolve({ statusCode: 0 });
  }
  kill(): Promise<void> {
    return Promise.resolve();
  }
  remove(id: string): Promise<void> {
    this.check('remove');
    const c = this.containers.get(id);
    if (c) {
      if (c.state !== 'exited') c.die();
      this.containers.delete(id);
      this.removed.push(id);
    } else {
      this.foreign = this.foreign.filter((f) => f.id !== id);
      this.removed.push(id);
    }
    return Promise.resolve();
  }
  inspect(id: string): Promise<ContainerState> {
    const c = this.containers.get(id);
    if (!c) return Promise.reject(new DockerNotFoundError('inspect', 404, 'no such container'));
    return Promise.resolve({
      id,
      status: c.state,
      running: c.state === 'running',
      exitCode: c.state === 'exited' ? 137 : 0,
      oomKilled: c.oomKilled,
      labels: c.spec.Labels ?? {},
    });
  }
  listByLabel(labels: LabelFilter): Promise<ContainerSummary[]> {
    this.check('listByLabel');
    const own = [...this.containers.values()].map((c) => ({
      id: c.id,
      state: c.state,
      labels: c.spec.Labels ?? {},
    }));
    return Promise.resolve([...own, ...this.foreign].filter((c) => matchesLabels(c.labels, labels)));
  }
  get(id: string): FakeContainer {
    const c = this.containers.get(id);
    if (!c) throw new Error(`no container ${id}`);
    return c;
  }
}

/** Host mounts in memory: which source is bound where. */
class FakeMounts extends HostMounts {
  readonly bound = new Map<string, string>();
  readonly calls: string[] = [];
  ensureSharedRoot(dir: string): Promise<void> {
    this.calls.push(`shared ${dir}`);
    return Promise.resolve();
  }
  bind(source: string, target: string): Promise<void> {
    this.calls.push(`bind ${source} ${target}`);
    this.bound.set(target, source);
    return Promise.resolve();
  }
  unmount(target: string): Promise<void> {
    if (this.bound.delete(target)) this.calls.push(`umount ${target}`);
    return Promise.resolve();
  }
  mountsUnder(dir: string): Promise<string[]> {
    return Promise.resolve([...this.bound.keys()].filter((t) => t.startsWith(`${dir}/`)));
  }
  override releaseSharedRoot(dir: string): Promise<boolean> {
    this.calls.push(`release ${dir}`);
    return Promise.resolve(true);
  }
}

async function eventually(check: () => boolean, withinMs = 2000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('PooledTier', () => {
  let root: string;
  let docker: FakeDocker;
  let mounts: FakeMounts;
  let tier: PooledTier;
  const workspaces: Record<string, string> = {};

  const make = async (extra: PooledOptions = {}) => {
    const options = resolvePooledOptions({
      image: 'switchyard/sandbox:test',
      min: 2,
      max: 4,
      acquireTimeoutMs: 500,
      healthCheckTimeoutMs: 50,
      runnerGraceMs: 100,
      mountRoot: path.join(root, 'pool'),
      engineId: `${os.hostname()}:${process.pid}:test`,
      ...extra,
    });
    fs.mkdirSync(options.mountRoot, { recursive: true });
    tier = new PooledTier(options, docker, mounts);
    await tier.onModuleInit();
    await eventually(() => tier.stats().available >= Math.min(options.min, 2));
    return tier;
  };
  const job = (session: string, extra: Partial<TierJob> = {}): TierJob => {
    workspaces[session] ??= fs.mkdtempSync(path.join(root, `ws-${session}-`));
    return {
      actionId: 'a1',
      sessionId: session,
      language: 'python',
      code: 'print(1)',
      env: {},
      timeoutMs: 1000,
      workspaceDir: workspaces[session],
      output: { maxBytes: 1024, maxLines: 100 },
      ...extra,
    };
  };
  const holder = (session: string) => tier.containers().find((c) => c.sessionId === session)?.id;

  beforeAll(() => Logger.overrideLogger(false));
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-pooled-unit-'));
    mounts = new FakeMounts();
    docker = new FakeDocker(mounts);
  });
  afterEach(async () => {
    await tier?.onApplicationShutdown();
    fs.rmSync(root, { recursive: true, force: true });
    for (const k of Object.keys(workspaces)) delete workspaces[k];
  });

  it('warms `min` containers at start, after making the mount root shared', async () => {
    await make();
    expect(mounts.calls[0]).toBe(`shared ${path.join(root, 'pool')}`);
    expect(docker.containers.size).toBe(2);
    expect(tier.stats()).toMatchObject({ size: 2, available: 2, claimed: 0, pending: 0, min: 2, max: 4 });
  });

  it('marks the mount root while it runs, sweeps the marks of dead engines, and releases the root at shutdown', async () => {
    const pool = path.join(root, 'pool');
    const marks = () => fs.readdirSync(pool).filter((n) => n.startsWith('.engine-'));
    fs.mkdirSync(pool, { recursive: true });
    // This host's name: a pid above pid_max (an engine killed long ago), and this very process (alive).
    const dead = `.engine-${defaultEngineInstanceId(4_194_305)}`;
    const live = `.engine-${defaultEngineInstanceId(process.pid)}`;
    for (const m of [dead, live]) fs.writeFileSync(path.join(pool, m), '');
    await make();
    const own = marks().filter((m) => m !== live);
    expect(own).toHaveLength(1);
    expect(own[0]).toContain(`:${process.pid}:test`);
    expect(marks()).not.toContain(dead);

    await tier.onApplicationShutdown();
    expect(marks()).toEqual([live]);
    expect(mounts.calls.at(-1)).toBe(`release ${pool}`);
  });

  it('claims a warm container per session, mounts the workspace onto it, and refills the pool', async () => {
    await make();
    const r = await tier.run(job('s1'));
    expect(r).toMatchObject({ exitCode: 0, stdout: 'ran python\n', timedOut: false });
    const id = holder('s1')!;
    const mountPoint = docker.get(id).spec.HostConfig!.Mounts![0].Source;
    expect(mounts.bound.get(mountPoint)).toBe(fs.realpathSync(workspaces.s1));
    // The claim raised the target by one (min 2 + a burst of 1 claim): the replacement and one more.
    await eventually(() => tier.stats().available === 3);
    expect(tier.stats()).toMatchObject({ claimed: 1, available: 3, min: 2, target: 3 });

    // Same session: same container. Another session: another one.
    await tier.run(job('s1'));
    expect(holder('s1')).toBe(id);
    await tier.run(job('s2'));
    expect(holder('s2')).not.toBe(id);
    expect(docker.get(id).runner!.runs).toHaveLength(2);
  });

  it('refuses a claim when the container does not see the mounted workspace, before any code runs', async () => {
    await make();
    docker.propagates = false;
    const [first] = [...docker.containers.values()];
    await expect(tier.run(job('s1'))).rejects.toMatchObject({ code: 'WORKSPACE_NOT_VISIBLE' });
    expect(first.runner!.refused).toHaveLength(1);
    expect(first.runner!.runs).toHaveLength(0);
    expect(docker.removed).toEqual([first.id]);
    expect(mounts.bound.size).toBe(0);
    expect(tier.stats().claimed).toBe(0);
  });

  it('claims with one runner round trip, the health check, and has every run verify the workspace', async () => {
    await make();
    const [first] = [...docker.containers.values()];
    const pingsWhenWarm = first.runner!.pings;
    await tier.run(job('s1'));
    expect(holder('s1')).toBe(first.id);
    // testOnBorrow is the only round trip of the claim: no separate verification ping.
    expect(first.runner!.pings).toBe(pingsWhenWarm + 1);
    const st = fs.statSync(fs.realpathSync(workspaces.s1), { bigint: true });
    expect(first.runner!.runs[0].workspace).toEqual([st.dev.toString(), st.ino.toString()]);
    await tier.run(job('s1'));
    expect(first.runner!.pings).toBe(pingsWhenWarm + 1);
    expect(first.runner!.runs[1].workspace).toEqual([st.dev.toString(), st.ino.toString()]);
    expect(tier.stats().lastClaimMs).toBeGreaterThanOrEqual(0);
  });

  it('never runs code once the workspace is no longer what the container sees', async () => {
    await make();
    await tier.run(job('s1'));
    const id = holder('s1')!;
    // Someone unmounted it behind the engine's back: the next run is refused and the container replaced.
    mounts.bound.delete(docker.get(id).spec.HostConfig!.Mounts![0].Source);
    await expect(tier.run(job('s1'))).rejects.toMatchObject({ code: 'WORKSPACE_NOT_VISIBLE' });
    expect(docker.removed).toContain(id);
    expect((await tier.run(job('s1'))).exitCode).toBe(0);
    expect(holder('s1')).not.toBe(id);
  });

  it('remounts when the session workspace is replaced, and runs in the new one', async () => {
    await make();
    await tier.run(job('s1'));
    const id = holder('s1')!;
    const mountPoint = docker.get(id).spec.HostConfig!.Mounts![0].Source;
    const old = workspaces.s1;
    // Same path, another directory (made while the old one exists, so it cannot reuse its inode).
    fs.mkdirSync(`${old}.new`);
    fs.rmSync(old, { recursive: true });
    fs.renameSync(`${old}.new`, old);
    await tier.run(job('s1'));
    expect(holder('s1')).toBe(id);
    expect(mounts.calls.filter((c) => c === `umount ${mountPoint}`)).toHaveLength(1);
    const st = fs.statSync(old, { bigint: true });
    expect(docker.get(id).runner!.runs[1].workspace).toEqual([st.dev.toString(), st.ino.toString()]);
  });

  it('starts the replacement of a claimed container only once the workspace is mounted', async () => {
    await make();
    const createdAtBind: number[] = [];
    const bind = mounts.bind.bind(mounts);
    mounts.bind = (source, target) => {
      createdAtBind.push(docker.created);
      return bind(source, target);
    };
    await tier.run(job('s1'));
    expect(createdAtBind).toEqual([2]);
    await eventually(() => docker.created === 4 && tier.stats().available === 3);
  });

  it('fails a claim for a missing workspace, destroying the container it took, and refills the pool', async () => {
    await make();
    const missing = path.join(root, 'no-such-workspace');
    await expect(tier.run(job('s1', { workspaceDir: missing }))).rejects.toMatchObject({
      code: 'WORKSPACE_MISSING',
    });
    expect(docker.removed).toHaveLength(1);
    expect(mounts.bound.size).toBe(0);
    await eventually(() => tier.stats().available === 3);
    expect(tier.stats()).toMatchObject({ claimed: 0, borrowed: 0, size: 3, target: 3 });
  });

  it('counts claims that found a warm container and claims that waited for a start', async () => {
    await make({ min: 1, max: 1 });
    await tier.run(job('s1'));
    await eventually(() => tier.stats().available === 1);
    await tier.run(job('s2'));
    expect(tier.stats()).toMatchObject({ warmClaims: 2, coldClaims: 0 });
    await eventually(() => tier.stats().available === 1);
    const [warm] = tier.containers().filter((c) => c.state === 'warm');
    docker.get(warm.id).runner!.hung = true; // fails its health check: the claim waits for a fresh start
    await tier.run(job('s3'));
    expect(holder('s3')).not.toBe(warm.id);
    expect(tier.stats()).toMatchObject({ warmClaims: 2, coldClaims: 1 });
  });

  it('passes the job to the runner with backstop caps above the engine caps', async () => {
    await make();
    await tier.run(
      job('s1', { language: 'bash', code: 'echo', stdin: 'in', env: { A: 'b' }, timeoutMs: 2500 }),
    );
    expect(docker.get(holder('s1')!).runner!.runs[0]).toMatchObject({
      language: 'bash',
      code: 'echo',
      stdin: 'in',
      env: { A: 'b' },
      timeoutMs: 2500,
      cpuSeconds: 4,
      capBytes: 1024 + 64 * 1024,
      capLines: 100,
    });
  });

  it('serialises the runs of one session', async () => {
    await make();
    let active = 0;
    let most = 0;
    docker.script = async () => {
      most = Math.max(most, ++active);
      await new Promise((r) => setTimeout(r, 20));
      active--;
      return { exitCode: 0 };
    };
    await Promise.all([tier.run(job('s1')), tier.run(job('s1')), tier.run(job('s1'))]);
    expect(most).toBe(1);
  });

  it('destroys the container and unmounts on releaseSession; idempotent', async () => {
    await make();
    await tier.run(job('s1'));
    const id = holder('s1')!;
    await tier.releaseSession('s1');
    expect(docker.removed).toContain(id);
    expect([...mounts.bound.values()]).not.toContain(fs.realpathSync(workspaces.s1));
    expect(tier.stats().claimed).toBe(0);
    await tier.releaseSession('s1');
    await tier.releaseSession('never-seen');
    // A later action of the session gets a fresh container.
    await tier.run(job('s1'));
    expect(holder('s1')).not.toBe(id);
  });

  it('applies the engine caps and redaction, and stops the run when they are hit', async () => {
    await make();
    docker.script = (r, out) => {
      out(1, 'token sk-ant-abcdefghijklmnopqrstuvwxyz0123 end\n');
      out(1, `${'x'.repeat(49)}\n`.repeat(40));
      return { exitCode: null, signal: 'SIGKILL', ended: 'kill' };
    };
    const r = await tier.run(
      job('s1', { output: { maxBytes: 100, maxLines: 10, redact: [/sk-ant-[\w-]+/g] } }),
    );
    expect(r.stdout.startsWith('token ***REDACTED*** end\n')).toBe(true);
    expect(Buffer.byteLength(r.stdout)).toBe(100);
    expect(r).toMatchObject({ truncated: { stdout: true, stderr: false }, limit: { code: 'OUTPUT_CAP' } });
    expect(docker.get(holder('s1')!).runner!.kills).toHaveLength(1);
  });

  it('maps runner outcomes: timeout, out of memory, spawn failure, CPU limit', async () => {
    await make();
    docker.script = () => ({ exitCode: null, signal: 'SIGKILL', timedOut: true, ended: 'timeout' });
    expect(await tier.run(job('s1'))).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
    docker.script = () => ({ exitCode: null, signal: 'SIGKILL', oomKilled: true });
    expect((await tier.run(job('s1'))).limit).toMatchObject({ code: 'OUT_OF_MEMORY' });
    docker.script = () => ({ exitCode: null, spawnError: 'cannot start /usr/bin/python3: EAGAIN' });
    expect(await tier.run(job('s1'))).toMatchObject({ spawnError: 'cannot start /usr/bin/python3: EAGAIN' });
    docker.script = () => ({ exitCode: null, signal: 'SIGXCPU' });
    expect((await tier.run(job('s1'))).limit).toMatchObject({ code: 'CPU_TIME' });
    docker.script = () => ({ exitCode: 1, pidsLimitHit: true });
    expect((await tier.run(job('s1'))).limit).toMatchObject({ code: 'PIDS' });
  });

  it('asks the runner to stop on abort and reports the run as aborted', async () => {
    await make();
    docker.script = (r, _out, runner) =>
      new Promise((resolve) => {
        const wait = setInterval(() => {
          if (runner.kills.includes(r.id)) {
            clearInterval(wait);
            resolve({ exitCode: null, signal: 'SIGKILL', ended: 'kill' });
          }
        }, 2);
      });
    const controller = new AbortController();
    const pending = tier.run(job('s1'), controller.signal);
    setTimeout(() => controller.abort(), 20);
    expect(await pending).toMatchObject({ aborted: true, signal: 'SIGKILL' });
  });

  it('reports a runner killed by the OOM killer as OUT_OF_MEMORY and replaces the container', async () => {
    await make();
    await tier.run(job('s1'));
    const id = holder('s1')!;
    docker.script = (_r, out) => {
      out(1, 'partial\n');
      setTimeout(() => {
        docker.get(id).oomKilled = true;
        docker.get(id).die();
      }, 5);
      return 'never';
    };
    const r = await tier.run(job('s1'));
    expect(r).toMatchObject({ stdout: 'partial\n', signal: 'SIGKILL', limit: { code: 'OUT_OF_MEMORY' } });
    expect(docker.removed).toContain(id);
    docker.script = () => ({ exitCode: 0 });
    await tier.run(job('s1'));
    expect(holder('s1')).not.toBe(id);
  });

  it('throws RUNNER_LOST when the runner dies mid-run, RUNNER_UNRESPONSIVE when it hangs', async () => {
    await make();
    await tier.run(job('s1'));
    const first = holder('s1')!;
    docker.script = () => {
      setTimeout(() => docker.get(first).die(), 5);
      return 'never';
    };
    await expect(tier.run(job('s1'))).rejects.toMatchObject({ code: 'RUNNER_LOST', retriable: true });
    expect(docker.removed).toContain(first);

    docker.script = () => 'never';
    const t0 = Date.now();
    const hung = tier.run(job('s1', { timeoutMs: 50 }));
    await expect(hung).rejects.toBeInstanceOf(RunnerLostError);
    await expect(hung).rejects.toMatchObject({ code: 'RUNNER_UNRESPONSIVE' });
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("opens a run's call channel in its container's directory for that run only, however it ends", async () => {
    await make();
    const listened: string[] = [];
    let stops = 0;
    const channel: CallChannel = {
      socketDir: '/not/used/by/pooled',
      listen: async (socketPath) => {
        listened.push(socketPath);
        fs.writeFileSync(socketPath, ''); // stands in for the socket; a stop that leaves it behind
        return async () => {
          stops++;
        };
      },
    };
    const succeeding = docker.script;
    await tier.run(job('s1', { actionId: 'act_1', channel, env: { [CALL_SOCKET_ENV]: '/tmp/forged.sock' } }));
    const first = holder('s1')!;
    expect(docker.get(first).runner!.runs[0].env).toEqual({
      [CALL_SOCKET_ENV]: '/run/switchyard-egress/call-act_1.sock',
    });
    expect(listened).toEqual([expect.stringMatching(/\/pool\/[0-9a-f]+\.egress\/call-act_1\.sock$/)]);
    expect(stops).toBe(1);
    expect(fs.existsSync(listened[0])).toBe(false);

    docker.script = () => {
      setTimeout(() => docker.get(first).die(), 5);
      return 'never';
    };
    await expect(tier.run(job('s1', { actionId: 'act_2', channel }))).rejects.toMatchObject({
      code: 'RUNNER_LOST',
    });
    expect(stops).toBe(2);
    docker.script = () => 'never';
    await expect(tier.run(job('s1', { actionId: 'act_3', channel, timeoutMs: 50 }))).rejects.toMatchObject({
      code: 'RUNNER_UNRESPONSIVE',
    });
    expect(stops).toBe(3);

    // A channel that cannot answer there fails the run before anything of it starts.
    docker.script = succeeding;
    const broken: CallChannel = { ...channel, listen: () => Promise.reject(new Error('EADDRINUSE')) };
    await expect(tier.run(job('s1', { actionId: 'act_4', channel: broken }))).rejects.toMatchObject({
      code: 'CALL_SOCKET',
      retriable: true,
    });
    expect(docker.get(holder('s1')!).runner!.runs).toHaveLength(0);
  });

  it('replaces a claimed container whose runner died between actions', async () => {
    await make();
    await tier.run(job('s1'));
    const id = holder('s1')!;
    docker.get(id).die();
    await eventually(() => docker.removed.includes(id));
    expect((await tier.run(job('s1'))).exitCode).toBe(0);
    expect(holder('s1')).not.toBe(id);
  });

  it('never hands out a dead or hung warm container, nor leaves the workspace mounted in one', async () => {
    await make({ min: 2 });
    const [dead, hung] = [...docker.containers.values()];
    hung.runner!.hung = true;
    dead.die();
    await tier.run(job('s1'));
    expect([dead.id, hung.id]).not.toContain(holder('s1'));
    await eventually(() => docker.removed.includes(dead.id) && docker.removed.includes(hung.id));
    // The workspace is mounted in the holder only: a container that failed its test lost the mount with its life.
    expect([...mounts.bound.entries()]).toEqual([
      [docker.get(holder('s1')!).spec.HostConfig!.Mounts![0].Source, fs.realpathSync(workspaces.s1)],
    ]);
  });

  it('tests a borrowed container while it mounts the workspace, not before', async () => {
    await make();
    // No ping is answered until a mount starts: a claim that waited for the test before mounting would never get
    // its answer (its health check would time out), so this holds on a machine of any speed.
    let mountStarted!: () => void;
    const gate = new Promise<void>((resolve) => (mountStarted = resolve));
    for (const c of docker.containers.values()) c.runner!.pingGate = gate;
    const answered: number[] = [];
    const bind = mounts.bind.bind(mounts);
    mounts.bind = (source, target) => {
      const c = [...docker.containers.values()].find((x) => x.spec.HostConfig!.Mounts![0].Source === target)!;
      answered.push(c.runner!.pongs);
      mountStarted();
      return bind(source, target);
    };
    const before = new Map([...docker.containers.values()].map((c) => [c.id, c.runner!.pongs]));
    await tier.run(job('s1'));
    const held = docker.get(holder('s1')!);
    // When the mount started, the borrow test's answer had not come yet; the claim waited for both.
    expect(answered).toEqual([before.get(held.id)]);
    expect(held.runner!.pongs).toBe(before.get(held.id)! + 1);
  });

  it('refuses sessions beyond maxSessions, and claims that wait longer than acquireTimeoutMs', async () => {
    await make({ min: 1, max: 1, maxSessions: 1 });
    await tier.run(job('s1'));
    await expect(tier.run(job('s2'))).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
    await tier.onApplicationShutdown();

    docker = new FakeDocker(mounts);
    await make({ min: 1, max: 1, acquireTimeoutMs: 100 });
    // The one warm container goes to s1; its replacement cannot start, so s2 waits in vain.
    docker.down = true;
    await tier.run(job('s1'));
    const refused = tier.run(job('s2'));
    await expect(refused).rejects.toBeInstanceOf(PoolExhaustedError);
    await expect(refused).rejects.toMatchObject({ code: 'POOL_ACQUIRE_TIMEOUT', retriable: true });
    expect(tier.stats().consecutiveCreateFailures).toBeGreaterThan(0);
    // Docker back: the pool refills by itself.
    docker.down = false;
    await eventually(() => tier.stats().available === 1, 3000);
  });

  it('a session that ended stops counting against maxSessions before its container is removed', async () => {
    await make({ min: 1, max: 2, maxSessions: 1 });
    await tier.run(job('s1'));
    const held = holder('s1')!;
    await expect(tier.run(job('s2'))).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
    // Fenced (the engine's DELETE answered), its release not begun yet: s2 is served, s1's container still there.
    tier.fenceSession('s1');
    tier.fenceSession('unknown');
    expect(await tier.run(job('s2'))).toMatchObject({ exitCode: 0 });
    expect(docker.containers.has(held)).toBe(true);
    await expect(tier.run(job('s3'))).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
    await tier.releaseSession('s1');
    expect(docker.containers.has(held)).toBe(false);
    // Released, s1 no longer holds anything; s2 still does, so the limit still holds.
    await expect(tier.run(job('s3'))).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
  });

  it('reports why it is unavailable, and recovers when Docker is back', async () => {
    await make();
    docker.down = true;
    const down = await tier.availability();
    expect(down).toMatchObject({ available: false, code: 'DOCKER_UNAVAILABLE' });
    // The client's message names the endpoint and the fix once, not wrapped in a second copy of itself.
    expect(down.reason).toBe(
      'Docker engine at fake://docker is not answering (ECONNREFUSED); start one with `npm run docker:engine` or set DOCKER_HOST',
    );
    docker.down = false;
    docker.images.clear();
    expect(await tier.availability()).toMatchObject({
      available: false,
      code: 'SANDBOX_IMAGE_MISSING',
      reason: expect.stringContaining('not found'),
    });
    docker.images.add('switchyard/sandbox:test');
    expect(await tier.availability()).toMatchObject({ available: true, details: { pool: { min: 2 } } });
  });

  it('is unavailable without an image, naming how to configure one', async () => {
    const options = resolvePooledOptions({ mountRoot: path.join(root, 'pool') });
    tier = new PooledTier(options, docker, mounts);
    await tier.onModuleInit();
    expect(await tier.availability()).toMatchObject({
      available: false,
      code: 'SANDBOX_IMAGE_MISSING',
      reason: expect.stringContaining('SWITCHYARD_SANDBOX_IMAGE'),
    });
    expect(docker.containers.size).toBe(0);
  });

  it('reaps containers of dead engines and exited ones at start, leaving live engines alone', async () => {
    const label = (engine: string) => ({
      [POOLED_LABELS.tier]: 'pooled',
      [POOLED_LABELS.engine]: engine,
      [POOLED_LABELS.mountKey]: 'aa',
    });
    docker.foreign = [
      { id: 'dead-engine', state: 'running', labels: label(`${os.hostname()}:${2 ** 22 + 3}:1`) },
      { id: 'exited', state: 'exited', labels: label('elsewhere:1:1') },
      {
        id: 'live-engine',
        state: 'running',
        labels: label(
          `${os.hostname()}:1:${fs.readFileSync('/proc/1/stat', 'utf8').split(') ')[1].split(' ')[19]}`,
        ),
      },
      { id: 'other-host', state: 'running', labels: label('elsewhere:1:1') },
    ];
    await make();
    expect(docker.removed.sort()).toEqual(['dead-engine', 'exited']);
  });

  it('destroys every container at shutdown and refuses work afterwards', async () => {
    await make();
    await tier.run(job('s1'));
    await tier.onApplicationShutdown();
    expect(docker.containers.size).toBe(0);
    expect(mounts.bound.size).toBe(0);
    await expect(tier.run(job('s1'))).rejects.toMatchObject({ code: 'SANDBOX_UNAVAILABLE' });
    expect(await tier.availability()).toMatchObject({ available: false });
  });

  it('at shutdown also removes containers of its own that only Docker knows (a create whose reply was lost)', async () => {
    await make();
    const labels = (engine: string, key: string) => ({
      [POOLED_LABELS.tier]: 'pooled',
      [POOLED_LABELS.engine]: engine,
      [POOLED_LABELS.mountKey]: key,
    });
    const ownId = `${os.hostname()}:${process.pid}:test`;
    fs.mkdirSync(path.join(root, 'pool', 'beef01'));
    docker.foreign = [
      { id: 'lost-reply', state: 'created', labels: labels(ownId, 'beef01') },
      { id: 'other-engine-same-process', state: 'running', labels: labels(`${ownId}:other`, 'beef02') },
    ];
    await tier.onApplicationShutdown();
    expect(docker.removed).toContain('lost-reply');
    expect(docker.removed).not.toContain('other-engine-same-process');
    expect(fs.existsSync(path.join(root, 'pool', 'beef01'))).toBe(false);
  });
});

describe('engineDeadHere', () => {
  it('knows a process of this host by pid and start time', () => {
    const ticks = fs.readFileSync(`/proc/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ')[19];
    expect(engineDeadHere(`${os.hostname()}:${process.pid}:${ticks}`)).toBe(false);
    expect(engineDeadHere(`${os.hostname()}:${process.pid}:${Number(ticks) + 1}`)).toBe(true);
    expect(engineDeadHere(`${os.hostname()}:${2 ** 22 + 3}:1`)).toBe(true);
    expect(engineDeadHere('another-host:1:1')).toBe(false);
    expect(engineDeadHere('not-an-engine-id')).toBe(false);
  });

  it('reads ids as both container tiers write them, with the hostname made label-safe', () => {
    // The default id spells "my host" as "my_host"; a dead engine of that host must still be recognised.
    expect(engineDeadHere(`my_host:${2 ** 22 + 3}:1`, 'my host')).toBe(true);
    expect(engineDeadHere(`my host:${2 ** 22 + 3}:1`, 'my host')).toBe(false);
  });
});
