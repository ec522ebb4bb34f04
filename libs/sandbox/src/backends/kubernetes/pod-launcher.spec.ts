import { Logger } from '@nestjs/common';
import { FakeClock } from '../../../test/fake-clock';
import { FakeKubeClient } from './fake-kube-client.testing';
import type { PodInfo, PodManifest } from './kube-types';
import { KubeApiError, KubernetesUnavailableError } from './kubernetes.errors';
import { resolveKubernetesOptions } from './kubernetes.options';
import { PodLauncher } from './pod-launcher';
import { sessionPodManifest } from './pod-spec';

const logger = new Logger('pod-launcher.spec');
logger.warn = () => undefined;
logger.debug = () => undefined;

/** A cluster whose pod creates fail as the API server answers them, or whose pods never leave `Pending`. */
class Cluster extends FakeKubeClient {
  createFails?: KubeApiError;
  pending = false;

  override async createPod(manifest: PodManifest): Promise<PodInfo> {
    if (this.createFails) throw this.createFails;
    const pod = await super.createPod(manifest);
    if (this.pending) {
      const stuck = { ...pod, phase: 'Pending', containers: [] };
      this.pods.set(pod.name, stuck);
      return stuck;
    }
    return pod;
  }
}

const options = resolveKubernetesOptions({
  image: 'switchyard/sandbox:t1',
  engineId: 'host:1:2:e',
  namespace: 'agents',
  nodeName: 'node-z',
  podStartTimeoutMs: 3000,
  settingNames: {
    namespace: 'SWITCHYARD_K8S_NAMESPACE',
    nodeName: 'SWITCHYARD_K8S_NODE_NAME',
    podStartTimeoutMs: 'SWITCHYARD_K8S_POD_START_TIMEOUT_MS',
  },
});

function launch(client: Cluster): Promise<unknown> {
  const clock = new FakeClock();
  // Sleeping moves the clock: the launcher's deadline comes without waiting for it.
  const launcher = new PodLauncher(client, options, clock, logger, async (ms) => {
    clock.t += ms;
  });
  const manifest = sessionPodManifest({
    name: 'sy-session-x',
    image: 'switchyard/sandbox:t1',
    engineId: options.engineId,
    limits: options.limits.pooled,
    options,
    state: 'claimed',
    sessionId: 'ses_x',
    specHash: 'h',
  });
  return launcher.launch(manifest);
}

describe('PodLauncher: a cluster that is not what the engine was configured for', () => {
  it('a create answered 404 is the namespace missing: unavailable (503), naming the setting', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError('KUBE_NOT_FOUND', 'namespaces "agents" not found', { status: 404 });
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesUnavailableError);
    expect(err).toMatchObject({ code: 'KUBERNETES_NAMESPACE_MISSING', kind: 'unavailable', retriable: true });
    expect((err as Error).message).toBe(
      'namespace agents does not exist in the cluster: create it (with its default ServiceAccount) or set ' +
        'SWITCHYARD_K8S_NAMESPACE to one that does',
    );
  });

  it('a create answered 403 is the cluster refusing the engine: unavailable, with the server’s words', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError('KUBE_FORBIDDEN', 'serviceaccount "default" not found', {
      status: 403,
    });
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'KUBERNETES_FORBIDDEN', kind: 'unavailable' });
    expect((err as Error).message).toContain('serviceaccount "default" not found');
  });

  it('other API failures stay what they were', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError('KUBE_INVALID', 'spec.containers: Required value', { status: 422 });
    await expect(launch(client)).rejects.toMatchObject({ code: 'KUBE_INVALID', kind: 'internal' });
  });

  it('a pod still Pending at its start timeout is POD_START_TIMEOUT, unavailable, naming node and settings; it is deleted', async () => {
    const client = new Cluster();
    client.pending = true;
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesUnavailableError);
    expect(err).toMatchObject({ code: 'POD_START_TIMEOUT', kind: 'unavailable', retriable: true });
    expect((err as Error).message).toBe(
      'pod sy-session-x was not running within 3000 ms (still Pending): check that node node-z ' +
        '(SWITCHYARD_K8S_NODE_NAME) exists, is Ready and has the sandbox image, or raise ' +
        'SWITCHYARD_K8S_POD_START_TIMEOUT_MS',
    );
    expect(client.calls.some((c) => c.op === 'deletePod' && c.name === 'sy-session-x')).toBe(true);
  });
});
