import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { SANDBOX_TIERS } from '../../core/sandbox.constants';
import { SandboxModule } from '../../sandbox.module';
import type { SandboxTier } from '../../core/sandbox-tier.port';
import { FakeKubeClient } from './fake-kube-client.testing';
import {
  KUBE_CLIENT,
  KUBERNETES_ONE_OFF_TIER,
  KUBERNETES_POOLED_TIER,
  KUBERNETES_SESSION_PODS,
} from './kubernetes.constants';
import { KubernetesSetupError } from './kubernetes.errors';
import { KubernetesSandboxModule } from './kubernetes.module';
import { KubernetesSandbox } from './kubernetes-sandbox';
import { KubernetesOneOffTier, KubernetesPooledTier } from './kubernetes-tiers';
import { SessionPods } from './session-pods';

describe('KubernetesSandboxModule', () => {
  beforeAll(() => Logger.overrideLogger(['error']));
  afterAll(() => Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose']));

  it('provides the client, the session pods and both tiers under their own tokens', async () => {
    const fake = new FakeKubeClient();
    const moduleRef = await Test.createTestingModule({
      imports: [KubernetesSandboxModule.forRoot({ image: 'switchyard/sandbox:t1', min: 0 }, fake)],
    }).compile();
    await moduleRef.init();
    expect(moduleRef.get(KUBE_CLIENT)).toBe(fake);
    const backend = moduleRef.get(KubernetesSandbox);
    expect(moduleRef.get(KUBERNETES_SESSION_PODS)).toBeInstanceOf(SessionPods);
    expect(moduleRef.get(KUBERNETES_SESSION_PODS)).toBe(backend.sessions);
    const pooled = moduleRef.get<KubernetesPooledTier>(KUBERNETES_POOLED_TIER);
    const oneOff = moduleRef.get<KubernetesOneOffTier>(KUBERNETES_ONE_OFF_TIER);
    expect(pooled.name).toBe('pooled');
    expect(pooled.stateful).toBe(backend.boxes);
    expect(oneOff.name).toBe('container');
    await backend.start();
    // Start-up made the deny-all policy and reaped (listed) leftovers.
    expect(fake.policies.has('switchyard-sandbox-deny-all')).toBe(true);
    expect(fake.callsOf('listPods').length).toBeGreaterThan(0);
    expect(await pooled.availability()).toMatchObject({ available: true });
    await moduleRef.close();
    expect(await pooled.availability()).toMatchObject({ available: false });
  });

  it('registers with the sandbox module as its pooled and container tiers', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        SandboxModule.forRoot(
          {},
          {
            imports: [
              KubernetesSandboxModule.forRoot(
                { image: 'switchyard/sandbox:t1', min: 0 },
                new FakeKubeClient(),
              ),
            ],
            tiers: [KubernetesPooledTier, KubernetesOneOffTier],
          },
        ),
      ],
    }).compile();
    const tiers = moduleRef.get<SandboxTier[]>(SANDBOX_TIERS);
    expect(tiers.map((t) => t.name)).toEqual(['subprocess', 'pooled', 'container']);
    expect(tiers[1]).toBeInstanceOf(KubernetesPooledTier);
    expect(tiers[2]).toBeInstanceOf(KubernetesOneOffTier);
    await moduleRef.close();
  });

  it('checks the configuration against the cluster while the application is made: a wrong one never starts', async () => {
    const fake = new FakeKubeClient();
    fake.namespacePresent = false;
    const made = Test.createTestingModule({
      imports: [
        KubernetesSandboxModule.forRoot(
          {
            image: 'switchyard/sandbox:t1',
            min: 0,
            namespace: 'nowhere',
            settingNames: { namespace: 'SWITCHYARD_K8S_NAMESPACE' },
          },
          fake,
        ),
      ],
    }).compile();
    await expect(made).rejects.toBeInstanceOf(KubernetesSetupError);
    await expect(made).rejects.toMatchObject({ variable: 'SWITCHYARD_K8S_NAMESPACE' });
    // Before anything was reaped or started.
    expect(fake.callsOf('listPods')).toHaveLength(0);
    expect(fake.callsOf('createPod')).toHaveLength(0);
  });

  it('a kubeconfig that cannot be read is the setting at fault, named as the operator sets it', async () => {
    const made = Test.createTestingModule({
      imports: [
        KubernetesSandboxModule.forRoot({
          image: 'switchyard/sandbox:t1',
          min: 0,
          kubeconfigPath: '/nonexistent/kubeconfig',
          settingNames: { kubeconfigPath: 'KUBECONFIG' },
        }),
      ],
    }).compile();
    await expect(made).rejects.toBeInstanceOf(KubernetesSetupError);
    await expect(made).rejects.toMatchObject({
      variable: 'KUBECONFIG',
      message: expect.stringContaining(
        'cannot load the Kubernetes configuration /nonexistent/kubeconfig: ENOENT',
      ),
    });
  });
});
