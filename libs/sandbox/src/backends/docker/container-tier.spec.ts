import * as fs from 'node:fs';
import { Writable } from 'node:stream';
import { Logger } from '@nestjs/common';
import type { ContainerCreateOptions } from 'dockerode';
import { FakeClock } from '../../../test/fake-clock';
import { FakeOutput, matchesLabels } from '../../../test/fake-output';
import { SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { TierJob } from '../../core/sandbox.types';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import { resolveContainerOptions, type ContainerTierOptions } from './container.options';
import { ContainerTier } from './container-tier';
import { SANDBOX_HOSTS } from './sandbox-hosts';
import {
  DockerClient,
  type ContainerExit,
  type ContainerState,
  type ContainerStreams,
  type ContainerSummary,
  type DockerCallOptions,
  type LabelFilter,
} from './docker-client';
import {
  DockerApiError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
} from './docker.errors';

const IMAGE = 'switchyard/sandbox:test';

/** What a fake container does once started, like the code inside would. */
type Program = (c: FakeContainer) => void;

class FakeContainer extends FakeOutput {
  stdin = '';
  stdinEnded = false;
  started = false;
  removed = false;
  oomKilled = false;
  /** Set when the container should ignore kills (a wedged daemon). */
  ignoreKill = false;
  exitCode?: number;
  private exited!: (exit: ContainerExit) => void;
  readonly exit: Promise<ContainerExit> = new Promise((resolve) => (this.exited = resolve));

  constructor(
    readonly id: string,
    readonly spec: ContainerCreateOptions,
    readonly program: Program,
  ) {
    super();
  }

  get running(): boolean {
    return this.started && this.exitCode === undefined;
  }
  /** The main process ended: output closes, waiters wake. */
  end(statusCode: number): void {
    if (this.exitCode !== undefined) return;
    this.exitCode = statusCode;
    this.stdout.end();
    this.stderr.end();
    this.exited({ statusCode });
  }
}

/** A Docker engine in memory that records every call, in order. */
class FakeDocker extends DockerClient {
  readonly endpoint = 'unix:///fake/docker.sock';
  readonly calls: string[] = [];
  readonly containers = new Map<string, FakeContainer>();
  readonly images = new Set([IMAGE]);
  /** Containers `listByLabel` reports besides the live ones (leftovers of other engines). */
  readonly listed: ContainerSummary[] = [];
  program: Program = (c) => c.end(0);
  pingError?: Error;
  createError?: Error;
  startError?: Error;
  removeError?: Error;
  /** Holds removals until it settles. */
  removeGate?: Promise<void>;
  private next = 1;

  async ping(): Promise<void> {
    this.calls.push('ping');
    if (this.pingError) throw this.pingError;
  }
  async imageExists(ref: string): Promise<boolean> {
    this.calls.push(`imageExists ${ref}`);
    return this.images.has(ref);
  }
  async createContainer(spec: ContainerCreateOptions): Promise<string> {
    this.calls.push('create');
    if (this.createError) throw this.createError;
    const id = `c${this.next++}`;
    this.containers.set(id, new FakeContainer(id, spec, this.program));
    return id;
  }
  async attach(id: string): Promise<ContainerStreams> {
    this.calls.push(`attach ${id}`);
    const c = this.get(id);
    const stdin = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        c.stdin += chunk.toString();
        done();
      },
      final: (done) => {
        c.stdinEnded = true;
        done();
      },
    });
    let destroyed = false;
    const closed = Promise.race([
      c.exit.then(() => undefined),
      new Promise<void>((resolve) => c.stdout.once('close', () => resolve())),
    ]);
    return {
      stdin,
      stdout: c.stdout,
      stderr: c.stderr,
      closed,
      destroy: () => {
        if (destroyed) return;
        destroyed = true;
        c.stdout.destroy();
        c.stderr.destroy();
      },
    };
  }
  async start(id: string): Promise<void> {
    this.calls.push(`start ${id}`);
    if (this.startError) throw this.startError;
    const c = this.get(id);
    c.started = true;
    setImmediate(() => c.program(c));
  }
  async wait(id: string, options: DockerCallOptions = {}): Promise<ContainerExit> {
    this.calls.push(`wait ${id}`);
    const c = this.get(id);
    return new Promise((resolve, reject) => {
      void c.exit.then(resolve);
      options.signal?.addEventListener('abort', () => reject(new DockerTimeoutError('wait', 'cancelled')));
    });
  }
  async kill(id: string): Promise<void> {
    this.calls.push(`kill ${id}`);
    const c = this.get(id);
    if (!c.ignoreKill) c.end(137);
  }
  async remove(id: string): Promise<void> {
    this.calls.push(`remove ${id}`);
    if (this.removeError) throw this.removeError;
    await this.removeGate;
    const c = this.containers.get(id);
    if (c) {
      c.removed = true;
      c.end(137);
    }
    const i = this.listed.findIndex((l) => l.id === id);
    if (i !== -1) this.listed.splice(i, 1);
  }
  async inspect(id: string): Promise<ContainerState> {
    this.calls.push(`inspect ${id}`);
    const c = this.get(id);
    return {
      id,
      status: c.running ? 'running' : 'exited',
      running: c.running,
      exitCode: c.exitCode ?? 0,
      oomKilled: c.oomKilled,
      labels: c.spec.Labels ?? {},
    };
  }
  async listByLabel(labels: LabelFilter): Promise<ContainerSummary[]> {
    this.calls.push(`list ${JSON.stringify(labels)}`);
    const live = [...this.containers.values()]
      .filter((c) => !c.removed)
      .map((c) => ({ id: c.id, state: c.running ? 'running' : 'created', labels: c.spec.Labels ?? {} }));
    return [...live, ...this.listed].filter((c) => matchesLabels(c.labels, labels));
  }

  get(id: string): FakeContainer {
    const c = this.containers.get(id);
    if (!c) throw new Error(`no container ${id}`);
    return c;
  }
  /** The only container created so far. */
  get only(): FakeContainer {
    expect(this.containers.size).toBe(1);
    return [...this.containers.values()][0];
  }
}

describe('ContainerTier (fake Docker)', () => {
  let docker: FakeDocker;
  let clock: FakeClock;
  let tier: ContainerTier;
  const workspaceDir = process.cwd();

  const make = (options: ContainerTierOptions = {}) =>
    new ContainerTier(
      docker,
      resolveContainerOptions({
        image: IMAGE,
        engineInstanceId: 'engine-me',
        reapOnStart: false,
        // Each run's own calls only; containers started ahead: ahead-containers.integration.
        ahead: { max: 0 },
        ...options,
      }),
      clock,
    );

  beforeAll(() => Logger.overrideLogger(false));
  beforeEach(() => {
    docker = new FakeDocker();
    clock = new FakeClock();
    tier = make();
  });
  afterEach(async () => {
    await tier.onApplicationShutdown();
  });

  const job = (extra: Partial<TierJob> = {}): TierJob => ({
    actionId: 'a1',
    sessionId: 's1',
    language: 'python',
    code: 'print("hi")',
    env: { PATH: '/usr/bin:/bin' },
    timeoutMs: 5000,
    workspaceDir,
    output: { maxBytes: 1024, maxLines: 100 },
    ...extra,
  });

  describe('run', () => {
    it('creates, attaches, feeds stdin, starts, waits and removes; output and exit code are data', async () => {
      docker.program = (c) => c.out('hi\n').err('warn\n').end(3);
      const streamed: string[] = [];
      const r = await tier.run(job({ stdin: 'input', onOutput: (s, t) => streamed.push(`${s}:${t}`) }));
      expect(r).toMatchObject({
        exitCode: 3,
        stdout: 'hi\n',
        stderr: 'warn\n',
        timedOut: false,
        truncated: { stdout: false, stderr: false },
      });
      expect(r.limit).toBeUndefined();
      expect(streamed.sort()).toEqual(['stderr:warn\n', 'stdout:hi\n']);
      expect(docker.calls).toEqual([
        'ping',
        `imageExists ${IMAGE}`,
        'create',
        'attach c1',
        'start c1',
        'wait c1',
        'remove c1',
      ]);
      const c = docker.only;
      expect(c.stdin).toBe('11\nprint("hi")input');
      expect(c.stdinEnded).toBe(true);
      expect(c.removed).toBe(true);
      expect(c.spec).toMatchObject({
        Image: IMAGE,
        Labels: {
          'dev.switchyard.engine': 'engine-me',
          'dev.switchyard.session': 's1',
          'dev.switchyard.action': 'a1',
        },
        Env: ['PATH=/usr/bin:/bin'],
      });
      expect(c.spec.name).toMatch(/^switchyard-a1-[0-9a-f]{8}$/);
    });

    it('kills at the timeout and reports it', async () => {
      docker.program = (c) => c.out('started\n');
      const r = await tier.run(job({ timeoutMs: 50 }));
      expect(r).toMatchObject({ timedOut: true, exitCode: 137, signal: 'SIGKILL', stdout: 'started\n' });
      expect(r.limit).toBeUndefined();
      expect(docker.calls).toEqual(expect.arrayContaining(['kill c1', 'inspect c1', 'remove c1']));
      expect(docker.only.removed).toBe(true);
    });

    it('stops the run once a stream goes past its cap', async () => {
      docker.program = (c) => c.out('x'.repeat(4000));
      const r = await tier.run(job());
      expect(r).toMatchObject({ truncated: { stdout: true, stderr: false }, limit: { code: 'OUTPUT_CAP' } });
      expect(r.stdout).toBe('x'.repeat(1024));
      expect(docker.calls).toContain('kill c1');
    });

    it('reports an OOM kill as out of memory', async () => {
      docker.program = (c) => {
        c.oomKilled = true;
        c.end(137);
      };
      const r = await tier.run(job());
      expect(r).toMatchObject({
        exitCode: 137,
        signal: 'SIGKILL',
        timedOut: false,
        limit: { code: 'OUT_OF_MEMORY', message: expect.stringContaining('512 MiB') },
      });
    });

    it('a SIGKILL the code sent itself is not out of memory (checked 5 times, the flag may trail)', async () => {
      docker.program = (c) => c.end(137);
      const r = await tier.run(job());
      expect(r).toMatchObject({ exitCode: 137, signal: 'SIGKILL' });
      expect(r.limit).toBeUndefined();
      expect(docker.calls.filter((c) => c === 'inspect c1')).toHaveLength(5);
    });

    it('finds an OOM flag the daemon records several hundred ms after the exit (gVisor under load)', async () => {
      docker.program = (c) => {
        c.end(137);
        setTimeout(() => (c.oomKilled = true), 400);
      };
      const r = await tier.run(job());
      expect(r).toMatchObject({ exitCode: 137, limit: { code: 'OUT_OF_MEMORY' } });
    });

    it('reports SIGXFSZ as the file size limit', async () => {
      docker.program = (c) => c.end(153);
      expect(await tier.run(job())).toMatchObject({ signal: 'SIGXFSZ', limit: { code: 'FILE_SIZE' } });
    });

    it('a container the daemon refuses to start is a spawn error, and is removed', async () => {
      docker.startError = new DockerApiError('start', 400, 'exec: "/usr/bin/python3": no such file');
      const r = await tier.run(job());
      expect(r.spawnError).toContain('no such file');
      expect(docker.calls).toContain('remove c1');
    });

    it('stops waiting for a container that ignores its kill, and removes it by force', async () => {
      docker.program = (c) => (c.ignoreKill = true);
      const started = Date.now();
      const r = await tier.run(job({ timeoutMs: 20 }));
      expect(Date.now() - started).toBeLessThan(2500); // timeout + the 2 s kill grace
      expect(r).toMatchObject({ timedOut: true, signal: 'SIGKILL' });
      expect(r.exitCode).toBeUndefined();
      expect(docker.only.removed).toBe(true);
    }, 10_000);

    it('an already-aborted signal runs nothing', async () => {
      const r = await tier.run(job(), AbortSignal.abort());
      expect(r).toMatchObject({ aborted: true });
      expect(docker.calls).toEqual([]);
    });

    it('an abort mid-run kills the container and reports it', async () => {
      const controller = new AbortController();
      docker.program = () => controller.abort();
      const r = await tier.run(job(), controller.signal);
      expect(r).toMatchObject({ aborted: true, timedOut: false, signal: 'SIGKILL' });
      expect(docker.only.removed).toBe(true);
    });

    it('refuses a missing workspace before touching Docker', async () => {
      await tier.availability();
      docker.calls.length = 0;
      await expect(tier.run(job({ workspaceDir: '/no/such/dir' }))).rejects.toThrow(SandboxInternalError);
      await expect(tier.run(job({ workspaceDir: '/a:b' }))).rejects.toMatchObject({ code: 'WORKSPACE_PATH' });
      expect(docker.calls).toEqual([]);
    });

    it('rejects with the Docker error when Docker fails, and asks Docker again next time', async () => {
      await tier.availability();
      docker.createError = new DockerUnavailableError('createContainer', docker.endpoint, 'ECONNREFUSED');
      await expect(tier.run(job())).rejects.toBeInstanceOf(DockerUnavailableError);
      docker.calls.length = 0;
      await tier.availability();
      expect(docker.calls).toContain('ping');
    });

    it('a sandbox image removed after the probe makes the run unavailable, naming the fix', async () => {
      docker.createError = new DockerNotFoundError('createContainer', 404, `No such image: ${IMAGE}`);
      await expect(tier.run(job())).rejects.toThrow(SandboxUnavailableError);
      await expect(tier.run(job())).rejects.toThrow('npm run sandbox:image');
    });

    it('still returns the result when removal fails, and retries the removal on release', async () => {
      docker.removeError = new DockerUnavailableError('remove', docker.endpoint, 'ECONNRESET');
      expect(await tier.run(job())).toMatchObject({ exitCode: 0 });
      docker.removeError = undefined;
      docker.calls.length = 0;
      const ofSession = `list ${JSON.stringify({ 'dev.switchyard.tier': 'container', 'dev.switchyard.session': 's1' })}`;
      await tier.releaseSession('s1');
      expect(docker.calls).toEqual([ofSession, 'remove c1']);
      docker.calls.length = 0;
      await tier.releaseSession('s1');
      expect(docker.calls).toEqual([ofSession]); // nothing left: only the look
    });
  });

  describe('availability', () => {
    it('is cached briefly and recovers by itself when Docker comes back', async () => {
      docker.pingError = new DockerUnavailableError('ping', docker.endpoint, 'ENOENT');
      const down = await tier.availability();
      expect(down).toMatchObject({ available: false, code: 'DOCKER_UNAVAILABLE' });
      expect(down.reason).toContain('unix:///fake/docker.sock');
      expect(down.reason?.match(/not answering/g)).toHaveLength(1);
      expect(down.reason).toContain('npm run docker:engine');
      await expect(tier.run(job())).rejects.toBeInstanceOf(SandboxUnavailableError);

      docker.pingError = undefined;
      clock.t = 1999;
      expect((await tier.availability()).available).toBe(false); // still cached
      clock.t = 2000;
      expect(await tier.availability()).toMatchObject({ available: true, details: { image: IMAGE } });
      expect(docker.calls.filter((c) => c === 'ping')).toHaveLength(2);
    });

    it('probes once for concurrent callers', async () => {
      await Promise.all([tier.availability(), tier.availability(), tier.availability()]);
      expect(docker.calls.filter((c) => c === 'ping')).toHaveLength(1);
    });

    it('says how to build a missing image', async () => {
      docker.images.clear();
      const a = await tier.availability();
      expect(a).toMatchObject({ available: false, code: 'SANDBOX_IMAGE_MISSING' });
      expect(a.reason).toContain(IMAGE);
      expect(a.reason).toContain('npm run sandbox:image');
    });

    it('says how to get an image tag when none is configured', async () => {
      const untagged = new ContainerTier(
        docker,
        resolveContainerOptions({ imageTagFile: '/no/such/tag', reapOnStart: false }),
        clock,
      );
      const a = await untagged.availability();
      expect(a.code).toBe('SANDBOX_IMAGE_MISSING');
      expect(a.reason).toContain('/no/such/tag');
      expect(a.reason).toContain('npm run sandbox:image');
    });
  });

  describe('sessions, reaping and shutdown', () => {
    it('releaseSession kills that session’s running container only', async () => {
      docker.program = () => undefined; // runs until killed
      const doomed = tier.run(job({ sessionId: 'doomed' }));
      const kept = tier.run(job({ sessionId: 'kept', timeoutMs: 300 }));
      await until(
        () => docker.containers.size === 2 && [...docker.containers.values()].every((c) => c.started),
      );
      await tier.releaseSession('doomed');
      expect(await doomed).toMatchObject({ aborted: true });
      expect(docker.get('c2').running).toBe(true);
      expect(await kept).toMatchObject({ timedOut: true });
    });

    it('reaps other engines’ containers of sessions that are not live, never its own', async () => {
      const labels = (engine: string, session: string) => ({
        'dev.switchyard.engine': engine,
        'dev.switchyard.tier': 'container',
        'dev.switchyard.session': session,
      });
      docker.listed.push(
        { id: 'dead', state: 'running', labels: labels('old-engine', 'gone') },
        { id: 'live', state: 'running', labels: labels('old-engine', 'alive') },
        { id: 'mine', state: 'exited', labels: labels('engine-me', 'gone') },
        // Another engine process on this host that is still running: its containers are its own business.
        { id: 'neighbour', state: 'running', labels: labels(defaultEngineInstanceId(), 'gone') },
      );
      expect(await tier.reapLeftovers({ isLive: async (s) => s === 'alive' })).toEqual(['dead']);
      expect(docker.listed.map((c) => c.id)).toEqual(['live', 'mine', 'neighbour']);
      // Naming an engine reaps that engine's, including this one's when asked explicitly.
      expect(await tier.reapLeftovers({ engineInstanceId: 'engine-me' })).toEqual(['mine']);
    });

    it('reaps every container of an engine dead on this host, live session or not; retries a failed removal', async () => {
      const labels = (engine: string, session: string) => ({
        'dev.switchyard.engine': engine,
        'dev.switchyard.tier': 'container',
        'dev.switchyard.session': session,
      });
      // This host's name and a pid no process has: an engine that was killed.
      const dead = defaultEngineInstanceId(2 ** 30);
      docker.listed.push(
        { id: 'interrupted', state: 'exited', labels: labels(dead, 'alive') },
        { id: 'stuck', state: 'running', labels: labels(dead, 'alive') },
      );
      const everyoneLive = { isLive: () => true };
      docker.removeError = new DockerTimeoutError('remove', 'no answer within 10000 ms');
      expect(await tier.reapLeftovers(everyoneLive)).toEqual([]);
      docker.removeError = undefined;
      expect(await tier.reapLeftovers(everyoneLive)).toEqual(['interrupted', 'stuck']);
      expect(docker.listed).toEqual([]);
    });

    it('returns the result of an exited container before its removal ends; release and shutdown wait for it', async () => {
      let letGo!: () => void;
      docker.removeGate = new Promise<void>((resolve) => (letGo = resolve));
      docker.program = (c) => c.out('1\n').end(0);
      expect(await tier.run(job())).toMatchObject({ exitCode: 0, stdout: '1\n' });
      expect(docker.calls.at(-1)).toBe('remove c1');
      expect(docker.only.removed).toBe(false);
      let released = false;
      const release = tier.releaseSession('s1').then(() => (released = true));
      await new Promise((r) => setTimeout(r, 20));
      expect(released).toBe(false);
      letGo();
      await release;
      expect(docker.only.removed).toBe(true);
    });

    it('binds its own read-only /etc/hosts naming localhost, and disables the network', async () => {
      docker.program = (c) => c.end(0);
      await tier.run(job());
      const spec = docker.only.spec;
      expect(spec.NetworkDisabled).toBe(true);
      const hosts = spec.HostConfig?.Binds?.find((b) => b.endsWith(':/etc/hosts:ro'));
      const file = hosts!.slice(0, -':/etc/hosts:ro'.length);
      expect(fs.readFileSync(file, 'utf8')).toBe(SANDBOX_HOSTS);
      expect(fs.readFileSync(file, 'utf8')).toMatch(/^127\.0\.0\.1\tlocalhost$/m);
      await tier.onApplicationShutdown();
      // The private directory it was made in goes with the tier.
      expect(fs.existsSync(file)).toBe(false);
    });

    it('releaseSession removes every container labelled with the session, whichever engine started it', async () => {
      const labels = (engine: string, session: string) => ({
        'dev.switchyard.engine': engine,
        'dev.switchyard.tier': 'container',
        'dev.switchyard.session': session,
      });
      await tier.availability(); // Docker answers
      docker.listed.push(
        { id: 'elsewhere', state: 'running', labels: labels('other-host:1:1:abcd', 's1') },
        { id: 'mine-unknown', state: 'created', labels: labels('engine-me', 's1') },
        { id: 'other-session', state: 'running', labels: labels('other-host:1:1:abcd', 's2') },
      );
      await tier.releaseSession('s1');
      expect(docker.listed.map((c) => c.id)).toEqual(['other-session']);
    });

    it('reaps at start-up in the background when asked to', async () => {
      docker.listed.push({
        id: 'old',
        state: 'exited',
        labels: { 'dev.switchyard.engine': 'old-engine', 'dev.switchyard.tier': 'container' },
      });
      const reaping = make({ reapOnStart: true });
      reaping.onApplicationBootstrap();
      await until(() => docker.listed.length === 0);
      await reaping.onApplicationShutdown();
      make().onApplicationBootstrap(); // reapOnStart: false
      // The first one's reaper only (it lists every engine's); shutdown lists this engine's own.
      expect(
        docker.calls.filter((c) => c.startsWith('list') && c.includes('"dev.switchyard.engine":true')),
      ).toHaveLength(1);
    });

    it('shutdown kills running runs, removes this engine’s containers and refuses new runs', async () => {
      docker.program = () => undefined;
      const pending = tier.run(job({ timeoutMs: 60_000 }));
      await until(() => docker.containers.get('c1')?.started === true);
      await tier.onApplicationShutdown();
      expect(await pending).toMatchObject({ aborted: true });
      expect(docker.only.removed).toBe(true);
      expect(docker.calls).toContain(
        `list ${JSON.stringify({ 'dev.switchyard.tier': 'container', 'dev.switchyard.engine': 'engine-me' })}`,
      );
      expect(await tier.availability()).toEqual({ available: false, reason: 'the engine is shutting down' });
      await expect(tier.run(job())).rejects.toBeInstanceOf(SandboxUnavailableError);
    });

    it('shutdown makes no Docker calls when the tier never reached Docker', async () => {
      await make().onApplicationShutdown();
      expect(docker.calls).toEqual([]);
    });
  });
});

async function until(check: () => boolean, withinMs = 2000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
