import { PassThrough } from 'node:stream';
import type { Logger } from '@nestjs/common';
import type { ContainerCreateOptions } from 'dockerode';
import type { ContainerStreams, DockerClient } from './docker-client';
import { GvisorSeccompProbe } from './gvisor-seccomp-probe';

/** A runsc as the probe sees it: whether it honours `errnoRet`, whether it implements clone3. */
function fakeDocker(runsc: { honoursErrnoRet: boolean; implementsClone3: boolean }, fail = false) {
  const specs = new Map<string, ContainerCreateOptions>();
  const removed: string[] = [];
  let n = 0;
  const docker = {
    createContainer: async (spec: ContainerCreateOptions) => {
      if (fail) throw new Error('no Docker');
      const id = `c${++n}`;
      specs.set(id, spec);
      return id;
    },
    attach: async (): Promise<ContainerStreams> => ({
      stdin: new PassThrough(),
      stdout: new PassThrough(),
      stderr: new PassThrough(),
      closed: Promise.resolve(),
      destroy: () => undefined,
    }),
    start: async () => undefined,
    wait: async (id: string) => {
      const ruled = (specs.get(id)!.HostConfig!.SecurityOpt ?? []).some((o: string) =>
        o.includes('"clone3"'),
      );
      // The rule's errnoRet (ENOSYS), or EPERM from a runsc that ignores it; else the call itself.
      if (ruled) return { statusCode: runsc.honoursErrnoRet ? 38 : 1 };
      return { statusCode: runsc.implementsClone3 ? 14 : 38 };
    },
    remove: async (id: string) => void removed.push(id),
  };
  return { docker: docker as unknown as DockerClient, specs, removed };
}

const logger = () => ({ log: jest.fn(), warn: jest.fn() });
const options = {
  user: '10001:10001',
  interpreters: { python: '/usr/bin/python3' },
  engineInstanceId: 'e1',
} as never;

describe('GvisorSeccompProbe', () => {
  it('denies clone3 with ENOSYS when the runsc honours errnoRet, with one probe container, removed', async () => {
    const { docker, specs, removed } = fakeDocker({ honoursErrnoRet: true, implementsClone3: true });
    const probe = new GvisorSeccompProbe(docker, options, logger() as unknown as Logger);
    expect(await probe.clone3For('img', 'runsc')).toBe('enosys');
    expect(await probe.clone3For('img', 'runsc')).toBe('enosys'); // kept
    expect(specs.size).toBe(1);
    expect(removed).toEqual(['c1']);
    const spec = specs.get('c1')!;
    expect(spec.HostConfig).toMatchObject({ Runtime: 'runsc', NetworkMode: 'none', CapDrop: ['ALL'] });
    expect(spec.NetworkDisabled).toBe(true);
    expect(spec.User).toBe('10001:10001');
  });

  it("leaves clone3 to a runsc that does not implement it (Debian's), without a warning", async () => {
    const { docker, specs } = fakeDocker({ honoursErrnoRet: false, implementsClone3: false });
    const log = logger();
    const probe = new GvisorSeccompProbe(docker, options, log as unknown as Logger);
    expect(await probe.clone3For('img', 'runsc')).toBe('runtime');
    expect(specs.size).toBe(2);
    expect(log.warn).not.toHaveBeenCalled();
  });

  it('warns that namespaces can be made when the runsc implements clone3 and ignores errnoRet', async () => {
    const { docker } = fakeDocker({ honoursErrnoRet: false, implementsClone3: true });
    const log = logger();
    const probe = new GvisorSeccompProbe(docker, options, log as unknown as Logger);
    expect(await probe.clone3For('img', 'runsc')).toBe('runtime');
    expect(log.warn).toHaveBeenCalledWith(expect.stringContaining('can make namespaces'));
  });

  it('takes a probe killed midway for no answer, and starts none once closed', async () => {
    const { docker, specs } = fakeDocker({ honoursErrnoRet: true, implementsClone3: true });
    (docker as unknown as { wait: unknown }).wait = async () => ({ statusCode: 137 });
    const probe = new GvisorSeccompProbe(docker, options, logger() as unknown as Logger);
    expect(await probe.clone3For('img', 'runsc')).toBe('runtime');
    expect(specs.size).toBe(1); // no second probe on a non-answer
    probe.close();
    expect(await probe.clone3For('img', 'runsc')).toBe('runtime');
    expect(specs.size).toBe(1);
  });

  it('runs nothing for another runtime, and asks again after a probe that failed', async () => {
    const failing = fakeDocker({ honoursErrnoRet: true, implementsClone3: true }, true);
    const probe = new GvisorSeccompProbe(failing.docker, options, logger() as unknown as Logger);
    expect(await probe.clone3For('img', 'runc')).toBe('runtime');
    expect(await probe.clone3For('img', 'runsc')).toBe('runtime'); // failed: the safe-for-threads default
    expect(failing.specs.size).toBe(0);
    const working = fakeDocker({ honoursErrnoRet: true, implementsClone3: true });
    (failing.docker as unknown as { createContainer: unknown }).createContainer = (
      working.docker as unknown as { createContainer: unknown }
    ).createContainer;
    (failing.docker as unknown as { wait: unknown }).wait = (
      working.docker as unknown as { wait: unknown }
    ).wait;
    expect(await probe.clone3For('img', 'runsc')).toBe('enosys');
  });
});
