import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxConfigError } from '../sandbox.errors';
import { defaultEngineInstanceId, processStartTicks } from '../container/container.options';
import { resolvePooledOptions } from './pooled.options';

describe('resolvePooledOptions', () => {
  let cwd: string;

  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-pooled-opts-'));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  it('applies the documented defaults', () => {
    const o = resolvePooledOptions({}, { cwd, env: {} });
    expect(o).toMatchObject({
      image: undefined,
      imageSource: 'none',
      min: 2,
      max: 8,
      maxSessions: 16,
      acquireTimeoutMs: 10_000,
      healthCheckTimeoutMs: 1000,
      mountRoot: path.join(os.tmpdir(), 'switchyard-pooled'),
      limits: { memoryBytes: 512 * 2 ** 20, nanoCpus: 1e9, pids: 128, openFiles: 256 },
    });
    expect(o.engineId).toMatch(new RegExp(`^${os.hostname()}:${process.pid}:\\d+:[0-9a-f]{8}$`));
  });

  it('takes the image from the option, then SWITCHYARD_SANDBOX_IMAGE, then .runtime/sandbox-image.tag', () => {
    fs.mkdirSync(path.join(cwd, '.runtime'));
    fs.writeFileSync(path.join(cwd, '.runtime', 'sandbox-image.tag'), 'switchyard/sandbox:fromfile\n');
    expect(resolvePooledOptions({}, { cwd, env: {} })).toMatchObject({
      image: 'switchyard/sandbox:fromfile',
      imageSource: 'tag-file',
    });
    const env = { SWITCHYARD_SANDBOX_IMAGE: 'switchyard/sandbox:env' };
    expect(resolvePooledOptions({}, { cwd, env })).toMatchObject({
      image: 'switchyard/sandbox:env',
      imageSource: 'env',
    });
    expect(resolvePooledOptions({ image: 'x/y:z' }, { cwd, env })).toMatchObject({
      image: 'x/y:z',
      imageSource: 'option',
    });
  });

  it.each([
    [{ min: -1 }, 'pooled.min'],
    [{ min: 9, max: 8 }, 'pooled.min'],
    [{ max: 0 }, 'pooled.max'],
    [{ acquireTimeoutMs: 1.5 }, 'pooled.acquireTimeoutMs'],
    [{ limits: { pids: 1000 } }, 'pooled.limits.pids'],
    [{ limits: { memoryBytes: 1024 } }, 'pooled.limits.memoryBytes'],
    [{ mountRoot: 'relative/dir' }, 'pooled.mountRoot'],
    [{ mountRoot: '/' }, 'pooled.mountRoot'],
    [{ image: 'bad image name' }, 'pooled.image'],
  ])('refuses %j naming %s', (options, name) => {
    expect(() => resolvePooledOptions(options, { cwd, env: {} })).toThrow(SandboxConfigError);
    expect(() => resolvePooledOptions(options, { cwd, env: {} })).toThrow(`sandbox option ${name}:`);
  });

  it('identifies the engine by host, pid, start time and instance', () => {
    const [host, pid, ticks, instance] = defaultEngineInstanceId().split(':');
    expect([host, pid, ticks]).toEqual([os.hostname(), String(process.pid), processStartTicks(process.pid)]);
    expect(instance).toMatch(/^[0-9a-f]{8}$/);
    expect(defaultEngineInstanceId()).not.toBe(defaultEngineInstanceId()); // two engines in one process never share an id
    expect(processStartTicks(2 ** 22 + 1)).toBeUndefined();
  });
});
