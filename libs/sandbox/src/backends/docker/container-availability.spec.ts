import { Logger } from '@nestjs/common';
import type { ContainerCreateOptions } from 'dockerode';
import { FakeClock } from '../../../test/fake-clock';
import { SandboxUnavailableError } from '../../core/sandbox.errors';
import type { TierJob } from '../../core/sandbox.types';
import { chooseRuntime, ContainerAvailability } from './container-availability';
import { resolveContainerOptions, type ContainerTierOptions } from './container.options';
import { buildContainerSpec } from './container-spec';
import { GVISOR_SANDBOX_PIDS } from './gvisor';
import { ContainerTier } from './container-tier';
import {
  DockerClient,
  type ContainerExit,
  type ContainerState,
  type ContainerStreams,
  type ContainerSummary,
  type DockerRuntimes,
} from './docker-client';
import {
  CONTAINER_RUNTIME_UNAVAILABLE,
  DOCKER_UNAVAILABLE,
  pingForAvailability,
} from './docker-availability';
import { DockerApiError, DockerTimeoutError, DockerUnavailableError } from './docker.errors';

const IMAGE = 'switchyard/sandbox:test';
const WITH_GVISOR: DockerRuntimes = { names: ['runc', 'runsc'], defaultRuntime: 'runc' };
const WITHOUT_GVISOR: DockerRuntimes = { names: ['io.containerd.runc.v2', 'runc'], defaultRuntime: 'runc' };

/** A Docker engine that answers the availability probe and records it; it runs nothing. */
class ProbeDocker extends DockerClient {
  readonly endpoint = 'unix:///fake/docker.sock';
  readonly calls: string[] = [];
  engine: DockerRuntimes = WITH_GVISOR;
  pingError?: Error;
  runtimesError?: Error;
  created: ContainerCreateOptions[] = [];

  async ping(): Promise<void> {
    this.calls.push('ping');
    if (this.pingError) throw this.pingError;
  }
  async imageExists(ref: string): Promise<boolean> {
    this.calls.push('imageExists');
    return ref === IMAGE;
  }
  override async runtimes(): Promise<DockerRuntimes> {
    this.calls.push('runtimes');
    if (this.runtimesError) throw this.runtimesError;
    return this.engine;
  }
  async createContainer(spec: ContainerCreateOptions): Promise<string> {
    this.created.push(spec);
    throw new Error('not expected: the tier must not create a container');
  }
  attach(): Promise<ContainerStreams> {
    throw new Error('not expected');
  }
  start(): Promise<void> {
    throw new Error('not expected');
  }
  wait(): Promise<ContainerExit> {
    throw new Error('not expected');
  }
  kill(): Promise<void> {
    throw new Error('not expected');
  }
  remove(): Promise<void> {
    throw new Error('not expected');
  }
  inspect(): Promise<ContainerState> {
    throw new Error('not expected');
  }
  async listByLabel(): Promise<ContainerSummary[]> {
    return [];
  }
}

const logger = { log: jest.fn(), warn: jest.fn() } as unknown as Logger;

function probeOf(docker: ProbeDocker, options: ContainerTierOptions, clock = new FakeClock(0)) {
  return new ContainerAvailability(
    docker,
    resolveContainerOptions({ image: IMAGE, availabilityCacheMs: 0, ...options }),
    clock,
    logger,
  );
}

beforeAll(() => Logger.overrideLogger(false));

describe('chooseRuntime', () => {
  const endpoint = 'unix:///var/run/docker.sock';
  const setting = (runtime: 'auto' | 'runsc' | 'runc') => ({
    runtime,
    runtimeSetting: 'SWITCHYARD_CONTAINER_RUNTIME',
  });

  it('auto: gVisor when the engine has it, else the engine default', () => {
    expect(chooseRuntime(setting('auto'), WITH_GVISOR, endpoint)).toEqual({ runtime: 'runsc' });
    expect(chooseRuntime(setting('auto'), WITHOUT_GVISOR, endpoint)).toEqual({ runtime: 'runc' });
    expect(chooseRuntime(setting('auto'), { names: ['crun'], defaultRuntime: 'crun' }, endpoint)).toEqual({
      runtime: 'crun',
    });
  });

  it('an explicit runtime is used as is when the engine has it', () => {
    expect(chooseRuntime(setting('runsc'), WITH_GVISOR, endpoint)).toEqual({ runtime: 'runsc' });
    expect(chooseRuntime(setting('runc'), WITH_GVISOR, endpoint)).toEqual({ runtime: 'runc' });
  });

  it('an explicit runsc the engine lacks is a reason naming the setting, never runc', () => {
    const r = chooseRuntime(setting('runsc'), WITHOUT_GVISOR, endpoint);
    expect(r).not.toHaveProperty('runtime');
    expect((r as { reason: string }).reason).toBe(
      'SWITCHYARD_CONTAINER_RUNTIME=runsc, but the Docker engine at unix:///var/run/docker.sock has no runsc ' +
        'runtime (it has: io.containerd.runc.v2, runc); install gVisor and register it with `npm run ' +
        'docker:engine` (as root; see docker/README.md), or set SWITCHYARD_CONTAINER_RUNTIME=auto',
    );
  });
});

describe('ContainerAvailability: the runtime', () => {
  it('reports the runtime it chose in the details and the entry (auto on an engine with gVisor: runsc)', async () => {
    const docker = new ProbeDocker();
    const entry = await probeOf(docker, {}).current();
    expect(entry).toMatchObject({
      image: IMAGE,
      runtime: 'runsc',
      value: { available: true, details: { runtime: 'runsc', image: IMAGE } },
    });
    expect(docker.calls).toEqual(['ping', 'runtimes', 'imageExists']);
  });

  it('auto on an engine without gVisor: runc', async () => {
    const docker = new ProbeDocker();
    docker.engine = WITHOUT_GVISOR;
    expect(await probeOf(docker, { runtime: 'auto' }).current()).toMatchObject({
      runtime: 'runc',
      value: { available: true, details: { runtime: 'runc' } },
    });
  });

  it('explicit runsc on an engine without it: unavailable, naming the setting', async () => {
    const docker = new ProbeDocker();
    docker.engine = WITHOUT_GVISOR;
    const entry = await probeOf(docker, {
      runtime: 'runsc',
      runtimeSetting: 'SWITCHYARD_CONTAINER_RUNTIME',
    }).current();
    expect(entry.runtime).toBeUndefined();
    expect(entry.image).toBeUndefined();
    expect(entry.value).toMatchObject({ available: false, code: CONTAINER_RUNTIME_UNAVAILABLE });
    expect(entry.value.reason).toMatch(
      /^SWITCHYARD_CONTAINER_RUNTIME=runsc, but the Docker engine .* no runsc/,
    );
  });

  it('explicit runc on an engine with gVisor: runc', async () => {
    const docker = new ProbeDocker();
    expect((await probeOf(docker, { runtime: 'runc' }).current()).runtime).toBe('runc');
  });

  it('keeps the runtime in the details when only the image is missing', async () => {
    const docker = new ProbeDocker();
    const entry = await probeOf(docker, { image: 'switchyard/sandbox:gone' }).current();
    expect(entry.value).toMatchObject({ available: false, details: { runtime: 'runsc' } });
  });

  it('a Docker that stops answering while listing runtimes is Docker unavailable; another failure names the setting', async () => {
    const docker = new ProbeDocker();
    docker.runtimesError = new DockerUnavailableError('runtimes', docker.endpoint, 'ECONNREFUSED');
    expect((await probeOf(docker, {}).current()).value).toMatchObject({
      available: false,
      code: DOCKER_UNAVAILABLE,
    });
    docker.runtimesError = new DockerApiError('runtimes', 500, 'server error');
    const value = (await probeOf(docker, { runtimeSetting: 'SWITCHYARD_CONTAINER_RUNTIME' }).current()).value;
    expect(value).toMatchObject({ available: false, code: CONTAINER_RUNTIME_UNAVAILABLE });
    expect(value.reason).toContain('SWITCHYARD_CONTAINER_RUNTIME=auto');
  });

  it('asks for the runtimes again after 30 s, after a Docker outage and after forget(), not on every probe', async () => {
    const clock = new FakeClock(0);
    const docker = new ProbeDocker();
    const probe = probeOf(docker, {}, clock);
    const runtimesCalls = () => docker.calls.filter((c) => c === 'runtimes').length;
    await probe.current();
    clock.t = 1000;
    await probe.current();
    expect(runtimesCalls()).toBe(1);

    // The daemon was reconfigured without gVisor: auto moves to runc at the next listing.
    docker.engine = WITHOUT_GVISOR;
    clock.t = 31_000;
    expect((await probe.current()).runtime).toBe('runc');
    expect(runtimesCalls()).toBe(2);

    docker.engine = WITH_GVISOR;
    probe.forget();
    expect((await probe.current()).runtime).toBe('runsc');
    expect(runtimesCalls()).toBe(3);

    docker.pingError = new DockerUnavailableError('ping', docker.endpoint, 'ECONNREFUSED');
    clock.t = 32_000;
    expect((await probe.current()).value.available).toBe(false);
    docker.pingError = undefined;
    clock.t = 33_000;
    await probe.current();
    expect(runtimesCalls()).toBe(4);
  });
});

describe('ContainerTier with an explicit runsc the Docker engine lacks', () => {
  it('refuses the run as unavailable, naming the setting, and creates no container', async () => {
    const docker = new ProbeDocker();
    docker.engine = WITHOUT_GVISOR;
    const tier = new ContainerTier(
      docker,
      resolveContainerOptions({
        image: IMAGE,
        runtime: 'runsc',
        runtimeSetting: 'SWITCHYARD_CONTAINER_RUNTIME',
        reapOnStart: false,
      }),
      new FakeClock(0),
    );
    const availability = await tier.availability();
    expect(availability).toMatchObject({ available: false, code: CONTAINER_RUNTIME_UNAVAILABLE });
    const job = { actionId: 'a', sessionId: 's', language: 'bash', code: 'true' } as TierJob;
    const run = tier.run(job);
    await expect(run).rejects.toBeInstanceOf(SandboxUnavailableError);
    await expect(run).rejects.toThrow(/SWITCHYARD_CONTAINER_RUNTIME=runsc/);
    expect(docker.created).toEqual([]);
    await tier.onApplicationShutdown();
  });
});

describe('buildContainerSpec: the runtime', () => {
  const job = {
    actionId: 'a',
    sessionId: 's',
    language: 'bash' as const,
    code: 'true',
    env: {},
    workspaceDir: '/w',
  };
  const options = resolveContainerOptions({});
  const hostsFile = '/h/sandbox-hosts';

  it('names the runtime in HostConfig.Runtime, and leaves it to the daemon when there is none', () => {
    expect(
      buildContainerSpec({ job, image: IMAGE, options, runtime: 'runsc', hostsFile }).HostConfig?.Runtime,
    ).toBe('runsc');
    expect(buildContainerSpec({ job, image: IMAGE, options, hostsFile }).HostConfig).not.toHaveProperty(
      'Runtime',
    );
  });

  it("gives gVisor containers no new privileges and gVisor's seccomp profile; others Docker's default", () => {
    const gvisor = buildContainerSpec({
      job,
      image: IMAGE,
      options,
      runtime: 'runsc',
      hostsFile,
    }).HostConfig!;
    expect(gvisor.SecurityOpt).toEqual(['no-new-privileges', expect.stringMatching(/^seccomp=\{/)]);
    const profile = JSON.parse(gvisor.SecurityOpt![1]!.slice('seccomp='.length)) as {
      defaultAction: string;
      syscalls: Array<{ names: string[]; action: string; args?: unknown[] }>;
    };
    const denied = profile.syscalls.filter((r) => !r.args).flatMap((r) => r.names);
    expect(denied).toEqual(expect.arrayContaining(['unshare', 'setns', 'mount', 'keyctl', 'bpf', 'syslog']));
    // Threads need clone (without namespace flags) and clone3 (which this runsc answers with ENOSYS itself).
    expect(denied).not.toContain('clone');
    expect(denied).not.toContain('clone3');
    expect(profile.syscalls.filter((r) => r.names.includes('clone'))).toHaveLength(7);
    expect(profile.syscalls.every((r) => r.action === 'SCMP_ACT_ERRNO')).toBe(true);
    for (const runtime of [undefined, 'runc']) {
      expect(
        buildContainerSpec({ job, image: IMAGE, options, runtime, hostsFile }).HostConfig?.SecurityOpt,
      ).toEqual(['no-new-privileges']);
    }
  });

  it("leaves gVisor's own host threads out of the code's pids budget", () => {
    const pids = (runtime?: string) =>
      buildContainerSpec({ job, image: IMAGE, options, runtime, hostsFile }).HostConfig?.PidsLimit;
    expect(pids()).toBe(options.limits.pids);
    expect(pids('runc')).toBe(options.limits.pids);
    expect(pids('runsc')).toBe(options.limits.pids + GVISOR_SANDBOX_PIDS);
  });
});

describe('pingForAvailability: a slow Docker engine is not a dead one', () => {
  /** Answers the pings in `outcomes` order: an error to throw, or undefined to answer. */
  const docker = (outcomes: Array<Error | undefined>) => {
    const asked: number[] = [];
    return {
      asked,
      async ping(options?: { timeoutMs?: number }): Promise<void> {
        asked.push(options?.timeoutMs ?? -1);
        const outcome = outcomes.shift();
        if (outcome) throw outcome;
      },
    };
  };
  const slow = () => new DockerTimeoutError('ping', 'Docker ping took longer than 2000 ms');

  it('an engine that answered before and is slow now gets a second ping, four times as long', async () => {
    const d = docker([slow(), undefined]);
    await pingForAvailability(d, 2000, true);
    expect(d.asked).toEqual([2000, 8000]);
  });

  it('still fails when the second ping is late too', async () => {
    const d = docker([slow(), slow()]);
    await expect(pingForAvailability(d, 2000, true)).rejects.toBeInstanceOf(DockerTimeoutError);
    expect(d.asked).toEqual([2000, 8000]);
  });

  it('an engine never seen, or one that refuses, fails at the first ping', async () => {
    const unseen = docker([slow()]);
    await expect(pingForAvailability(unseen, 2000, false)).rejects.toBeInstanceOf(DockerTimeoutError);
    expect(unseen.asked).toEqual([2000]);
    const refusing = docker([new DockerUnavailableError('ping', 'unix:///x.sock', 'connect ENOENT')]);
    await expect(pingForAvailability(refusing, 2000, true)).rejects.toBeInstanceOf(DockerUnavailableError);
    expect(refusing.asked).toEqual([2000]);
  });
});
