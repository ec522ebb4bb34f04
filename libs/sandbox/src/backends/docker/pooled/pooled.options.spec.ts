import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxConfigError } from '../../../core/sandbox.errors';
import { defaultEngineInstanceId, processStartTicks } from '../../../core/engine-instance';
import { resolvePooledOptions } from './pooled.options';

describe('resolvePooledOptions', () => {
  let dir: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-pooled-opts-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('applies the documented defaults', () => {
    const o = resolvePooledOptions({});
    expect(o).toMatchObject({
      image: undefined,
      imageSource: 'none',
      min: 2,
      max: 16,
      demandWindowMs: 60_000,
      maxSessions: 16,
      acquireTimeoutMs: 10_000,
      healthCheckTimeoutMs: 1000,
      mountRoot: path.join(os.tmpdir(), 'switchyard-pooled'),
      limits: { memoryBytes: 512 * 2 ** 20, nanoCpus: 1e9, pids: 128, openFiles: 256 },
    });
    expect(o.engineId).toMatch(new RegExp(`^${os.hostname()}:${process.pid}:\\d+:[0-9a-f]{8}$`));
  });

  it('takes the image from the option, then the tag file; reads no environment', () => {
    const imageTagFile = path.join(dir, 'sandbox-image.tag');
    expect(resolvePooledOptions({ imageTagFile })).toMatchObject({ image: undefined, imageSource: 'none' });
    fs.writeFileSync(imageTagFile, 'switchyard/sandbox:fromfile\n');
    expect(resolvePooledOptions({ imageTagFile })).toMatchObject({
      image: 'switchyard/sandbox:fromfile',
      imageSource: 'tag-file',
    });
    expect(resolvePooledOptions({ image: 'x/y:z', imageTagFile })).toMatchObject({
      image: 'x/y:z',
      imageSource: 'option',
    });
    const saved = process.env.SWITCHYARD_SANDBOX_IMAGE;
    process.env.SWITCHYARD_SANDBOX_IMAGE = 'switchyard/sandbox:env';
    try {
      expect(resolvePooledOptions({}).image).toBeUndefined();
    } finally {
      if (saved === undefined) delete process.env.SWITCHYARD_SANDBOX_IMAGE;
      else process.env.SWITCHYARD_SANDBOX_IMAGE = saved;
    }
  });

  it.each([
    [{ min: -1 }, 'pooled.min'],
    [{ min: 9, max: 8 }, 'pooled.min'],
    [{ max: 0 }, 'pooled.max'],
    [{ starts: 0 }, 'pooled.starts'],
    [{ demandWindowMs: 10 }, 'pooled.demandWindowMs'],
    [{ acquireTimeoutMs: 1.5 }, 'pooled.acquireTimeoutMs'],
    [{ limits: { pids: 1000 } }, 'pooled.limits.pids'],
    [{ limits: { memoryBytes: 1024 } }, 'pooled.limits.memoryBytes'],
    [{ mountRoot: 'relative/dir' }, 'pooled.mountRoot'],
    [{ mountRoot: '/' }, 'pooled.mountRoot'],
    [{ image: 'bad image name' }, 'pooled.image'],
    [{ imageTagFile: 'relative/tag' }, 'pooled.imageTagFile'],
  ])('refuses %j naming %s', (options, name) => {
    expect(() => resolvePooledOptions(options)).toThrow(SandboxConfigError);
    expect(() => resolvePooledOptions(options)).toThrow(`sandbox option ${name}:`);
  });

  it('identifies the engine by host, pid, start time and instance', () => {
    const [host, pid, ticks, instance] = defaultEngineInstanceId().split(':');
    expect([host, pid, ticks]).toEqual([os.hostname(), String(process.pid), processStartTicks(process.pid)]);
    expect(instance).toMatch(/^[0-9a-f]{8}$/);
    expect(defaultEngineInstanceId()).not.toBe(defaultEngineInstanceId()); // two engines in one process never share an id
    expect(processStartTicks(2 ** 22 + 1)).toBeUndefined();
  });
});
