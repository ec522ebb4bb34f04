import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxConfigError } from '../sandbox.errors';
import {
  currentImage,
  DEFAULT_CONTAINER_LIMITS,
  defaultEngineInstanceId,
  engineAliveHere,
  resolveContainerOptions,
} from './container.options';

describe('resolveContainerOptions', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-container-opts-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('documents its defaults', async () => {
    const o = resolveContainerOptions({}, {}, dir);
    expect(o).toMatchObject({
      image: undefined,
      imageTagFile: path.join(dir, '.runtime', 'sandbox-image.tag'),
      limits: DEFAULT_CONTAINER_LIMITS,
      user: '10001:10001',
      interpreters: { python: '/usr/bin/python3', node: '/usr/bin/node', bash: '/bin/bash' },
      availabilityCacheMs: 2000,
      probeTimeoutMs: 3000,
      reapOnStart: true,
    });
    expect(o.engineInstanceId).toMatch(new RegExp(`^${os.hostname()}:${process.pid}:\\d+:[0-9a-f]{8}$`));
    // Each engine gets its own id, even in one process: it removes only its own containers.
    expect(resolveContainerOptions({}, {}, dir).engineInstanceId).not.toBe(o.engineInstanceId);
    expect(await o.isSessionLive('any')).toBe(false);
  });

  it('takes the image from the option, then SWITCHYARD_SANDBOX_IMAGE, then the tag file', () => {
    const env = { SWITCHYARD_SANDBOX_IMAGE: 'from/env:1' };
    expect(resolveContainerOptions({ image: 'from/option:1' }, env, dir).image).toBe('from/option:1');
    expect(resolveContainerOptions({}, env, dir).image).toBe('from/env:1');

    const o = resolveContainerOptions({}, {}, dir);
    expect(currentImage(o)).toBeUndefined();
    fs.mkdirSync(path.join(dir, '.runtime'));
    fs.writeFileSync(o.imageTagFile, 'switchyard/sandbox:aaa\n');
    expect(currentImage(o)).toBe('switchyard/sandbox:aaa');
    // Re-read every time: a rebuilt image is picked up without a restart.
    fs.writeFileSync(o.imageTagFile, 'switchyard/sandbox:bbb\n');
    expect(currentImage(o)).toBe('switchyard/sandbox:bbb');
    fs.writeFileSync(o.imageTagFile, 'not an image!\n');
    expect(currentImage(o)).toBeUndefined();
  });

  it('merges partial limits over the defaults', () => {
    const o = resolveContainerOptions({ limits: { pids: 64, memoryBytes: undefined } }, {}, dir);
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
  ])('rejects %j, naming %s', (options, option) => {
    expect(() => resolveContainerOptions(options, {}, dir)).toThrow(SandboxConfigError);
    expect(() => resolveContainerOptions(options, {}, dir)).toThrow(`sandbox option ${option}:`);
  });

  it('names the environment variable when it holds a bad image', () => {
    expect(() => resolveContainerOptions({}, { SWITCHYARD_SANDBOX_IMAGE: 'a b' }, dir)).toThrow(
      'sandbox option SWITCHYARD_SANDBOX_IMAGE:',
    );
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
