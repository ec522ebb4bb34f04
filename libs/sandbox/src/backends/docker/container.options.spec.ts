import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxConfigError } from '../../core/sandbox.errors';
import { defaultEngineInstanceId, engineAliveHere } from '../../core/engine-instance';
import { currentImage, DEFAULT_CONTAINER_LIMITS, resolveContainerOptions } from './container.options';

describe('resolveContainerOptions', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-container-opts-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('documents its defaults', async () => {
    const o = resolveContainerOptions({});
    expect(o).toMatchObject({
      image: undefined,
      imageTagFile: undefined,
      limits: DEFAULT_CONTAINER_LIMITS,
      user: '10001:10001',
      interpreters: { python: '/usr/bin/python3', node: '/usr/bin/node', bash: '/bin/bash' },
      availabilityCacheMs: 2000,
      probeTimeoutMs: 3000,
      reapOnStart: true,
      runtime: 'auto',
      runtimeSetting: 'container.runtime',
      ahead: { max: 4, idleMs: 60_000 },
    });
    expect(o.engineInstanceId).toMatch(new RegExp(`^${os.hostname()}:${process.pid}:\\d+:[0-9a-f]{8}$`));
    // Each engine gets its own id, even in one process: it removes only its own containers.
    expect(resolveContainerOptions({}).engineInstanceId).not.toBe(o.engineInstanceId);
    expect(await o.isSessionLive('any')).toBe(false);
  });

  it('takes the image from the option, then the tag file; reads no environment', () => {
    const imageTagFile = path.join(dir, 'sandbox-image.tag');
    expect(currentImage(resolveContainerOptions({ image: 'from/option:1', imageTagFile }))).toBe(
      'from/option:1',
    );

    const o = resolveContainerOptions({ imageTagFile });
    expect(currentImage(o)).toBeUndefined();
    fs.writeFileSync(imageTagFile, 'switchyard/sandbox:aaa\n');
    expect(currentImage(o)).toBe('switchyard/sandbox:aaa');
    // Re-read every time: a rebuilt image is picked up without a restart.
    fs.writeFileSync(imageTagFile, 'switchyard/sandbox:bbb\n');
    expect(currentImage(o)).toBe('switchyard/sandbox:bbb');
    fs.writeFileSync(imageTagFile, 'not an image!\n');
    expect(currentImage(o)).toBeUndefined();

    const saved = process.env.SWITCHYARD_SANDBOX_IMAGE;
    process.env.SWITCHYARD_SANDBOX_IMAGE = 'from/env:1';
    try {
      expect(currentImage(resolveContainerOptions({}))).toBeUndefined();
    } finally {
      if (saved === undefined) delete process.env.SWITCHYARD_SANDBOX_IMAGE;
      else process.env.SWITCHYARD_SANDBOX_IMAGE = saved;
    }
  });

  it('merges partial limits over the defaults', () => {
    const o = resolveContainerOptions({ limits: { pids: 64, memoryBytes: undefined } });
    expect(o.limits).toEqual({ ...DEFAULT_CONTAINER_LIMITS, pids: 64 });
  });

  it.each([
    [{ limits: { pids: 32 } }, 'container.limits.pids'],
    [{ limits: { pids: 1000 } }, 'container.limits.pids'],
    [{ limits: { memoryBytes: 0 } }, 'container.limits.memoryBytes'],
    [{ limits: { memoryBytes: 1024 } }, 'container.limits.memoryBytes'],
    [{ limits: { nofile: 1.5 } }, 'container.limits.nofile'],
    [{ limits: { nanoCpus: 10 } }, 'container.limits.nanoCpus'],
    [{ user: '0:0' }, 'container.user'],
    [{ user: '10001:0' }, 'container.user'],
    [{ user: 'sandbox' }, 'container.user'],
    [{ image: 'bad image' }, 'container.image'],
    [{ engineInstanceId: 'has space' }, 'container.engineInstanceId'],
    [{ interpreters: { python: 'python3' } }, 'container.interpreters.python'],
    [{ availabilityCacheMs: -1 }, 'container.availabilityCacheMs'],
    [{ imageTagFile: 'relative/tag' }, 'container.imageTagFile'],
    [{ runtime: 'kata' as 'runc' }, 'container.runtime'],
    [{ ahead: { max: -1 } }, 'container.ahead.max'],
    [{ ahead: { max: 65 } }, 'container.ahead.max'],
    [{ ahead: { idleMs: 10 } }, 'container.ahead.idleMs'],
  ])('rejects %j, naming %s', (options, option) => {
    expect(() => resolveContainerOptions(options)).toThrow(SandboxConfigError);
    expect(() => resolveContainerOptions(options)).toThrow(`sandbox option ${option}:`);
  });
});

describe('engineAliveHere', () => {
  it('is true only for a running process of this host with the same start time', () => {
    expect(engineAliveHere(defaultEngineInstanceId())).toBe(true);
    const [host, pid, ticks] = defaultEngineInstanceId().split(':');
    expect(engineAliveHere(`${host}:${pid}:${ticks}`)).toBe(true); // ids of earlier versions had no instance part
    expect(engineAliveHere(`${host}:${pid}:${ticks}:a:b`)).toBe(false);
    expect(engineAliveHere(`${host}:${pid}:${Number(ticks) + 1}`)).toBe(false); // pid reused by a later process
    expect(engineAliveHere(`${host}:999999999:0`)).toBe(false);
    expect(engineAliveHere(`other-host:${pid}:${ticks}`)).toBe(false);
    expect(engineAliveHere('it-engine')).toBe(false);
  });
});
