import { SandboxConfigError } from '../../core/sandbox.errors';
import { resolveKubernetesOptions } from './kubernetes.options';

const MiB = 2 ** 20;

describe('resolveKubernetesOptions', () => {
  it('applies documented defaults', () => {
    const o = resolveKubernetesOptions({ image: 'switchyard/sandbox:t1' });
    expect(o).toMatchObject({
      namespace: 'switchyard',
      imageSource: 'option',
      imagePullPolicy: 'Never',
      min: 2,
      max: 16,
      demandWindowMs: 60_000,
      maxSessions: 16,
      hostname: 'sandbox',
    });
    expect(o.limits.pooled).toEqual({
      memoryBytes: 512 * MiB,
      cpus: 1,
      cpuRequest: 0.1,
      workspaceBytes: 1024 * MiB,
      ephemeralStorageBytes: 1152 * MiB,
      tmpBytes: 64 * MiB,
      openFiles: 256,
      fileSizeBytes: 64 * MiB,
    });
    expect(o.engineId.split(':')).toHaveLength(4);
    expect(o.settingNames.max).toBe('kubernetes.max');
  });

  it('derives ephemeral storage from a workspace cap given alone', () => {
    const o = resolveKubernetesOptions({ limits: { container: { workspaceBytes: 10 * MiB } } });
    expect(o.limits.container.ephemeralStorageBytes).toBe(138 * MiB);
    expect(o.limits.pooled.workspaceBytes).toBe(1024 * MiB);
  });

  it('requests no more CPU than the limit', () => {
    const o = resolveKubernetesOptions({ limits: { pooled: { cpus: 0.05 } } });
    expect(o.limits.pooled).toMatchObject({ cpus: 0.05, cpuRequest: 0.05 });
  });

  it.each([
    [{ limits: { pooled: { cpus: 0.5, cpuRequest: 1 } } }, 'kubernetes.limits.pooled.cpuRequest'],
    [{ min: 3, max: 2 }, 'kubernetes.min'],
    [{ max: 0 }, 'kubernetes.max'],
    [{ starts: 65 }, 'kubernetes.starts'],
    [{ namespace: 'Not_A_Namespace' }, 'kubernetes.namespace'],
    [{ hostname: 'a.b' }, 'kubernetes.hostname'],
    [{ image: 'bad image' }, 'kubernetes.image'],
    [{ imagePullPolicy: 'Sometimes' as 'Never' }, 'kubernetes.imagePullPolicy'],
    [{ kubeconfigPath: 'relative/kubeconfig' }, 'kubernetes.kubeconfigPath'],
    [{ nodeName: 'UPPER' }, 'kubernetes.nodeName'],
    [{ runtimeClassName: 'a b' }, 'kubernetes.runtimeClassName'],
    [{ nodeSelector: { 'a b': 'x' } }, 'kubernetes.nodeSelector'],
    [{ limits: { pooled: { cpus: 0 } } }, 'kubernetes.limits.pooled.cpus'],
    [{ limits: { pooled: { memoryBytes: 1024 } } }, 'kubernetes.limits.pooled.memoryBytes'],
    [
      { limits: { container: { workspaceBytes: 10 * MiB, ephemeralStorageBytes: 10 * MiB } } },
      'kubernetes.limits.container.ephemeralStorageBytes',
    ],
    [
      { limits: { pooled: { memoryBytes: 64 * MiB, tmpBytes: 60 * MiB } } },
      'kubernetes.limits.pooled.tmpBytes',
    ],
    [{ acquireTimeoutMs: 1.5 }, 'kubernetes.acquireTimeoutMs'],
  ])('refuses %j naming %s', (input, option) => {
    let caught: unknown;
    try {
      resolveKubernetesOptions(input);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SandboxConfigError);
    expect((caught as SandboxConfigError).details.option).toBe(option);
  });
});
