import { Logger } from '@nestjs/common';
import { PassThrough } from 'node:stream';
import { FakeClock } from '../../../test/fake-clock';
import { FakeKubeClient } from './fake-kube-client.testing';
import type { AttachedStreams, PodInfo, PodManifest } from './kube-types';
import { KubeApiError, KubernetesUnavailableError } from './kubernetes.errors';
import { type KubernetesOptions, resolveKubernetesOptions } from './kubernetes.options';
import { PodLauncher } from './pod-launcher';
import { sessionPodManifest } from './pod-spec';

const logger = new Logger('pod-launcher.spec');
logger.warn = () => undefined;
logger.debug = () => undefined;

/**
 * A cluster whose pod creates fail as the API server answers them, or whose pods stay as `shape` makes them (never
 * running: `Pending` with no container yet by default, or waiting for a reason, or rejected by their node). A pod
 * left running has a runner that answers pings.
 */
class Cluster extends FakeKubeClient {
  createFails?: KubeApiError;
  shape?: (pod: PodInfo) => PodInfo;

  override async attach(): Promise<AttachedStreams> {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    let closed!: () => void;
    const done = new Promise<void>((resolve) => (closed = resolve));
    stdin.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        const { id } = JSON.parse(line) as { id: number };
        stdout.write(`${JSON.stringify({ ev: 'pong', id, ok: true, workspace: [1, 2] })}\n`);
      }
    });
    return { stdin, stdout, stderr: new PassThrough(), close: () => closed(), closed: done };
  }

  override async createPod(manifest: PodManifest): Promise<PodInfo> {
    if (this.createFails) throw this.createFails;
    const pod = await super.createPod(manifest);
    if (!this.shape) return pod;
    const shaped = this.shape(pod);
    this.pods.set(pod.name, shaped);
    return shaped;
  }
}

const pending = (pod: PodInfo): PodInfo => ({ ...pod, phase: 'Pending', containers: [] });

const SETTINGS = {
  namespace: 'SWITCHYARD_K8S_NAMESPACE',
  nodeName: 'SWITCHYARD_K8S_NODE_NAME',
  nodeSelector: 'SWITCHYARD_K8S_NODE_SELECTOR',
  podStartTimeoutMs: 'SWITCHYARD_K8S_POD_START_TIMEOUT_MS',
  image: 'SWITCHYARD_SANDBOX_IMAGE',
  imagePullPolicy: 'SWITCHYARD_K8S_IMAGE_PULL_POLICY',
  cpuRequest: 'SWITCHYARD_K8S_CPU_REQUEST',
  pooledMemoryBytes: 'SWITCHYARD_POOLED_MEMORY_BYTES',
  containerMemoryBytes: 'SWITCHYARD_CONTAINER_MEMORY_BYTES',
  workspaceBytes: 'SWITCHYARD_MAX_WORKSPACE_BYTES',
};

function launcherFor(client: Cluster, overrides: KubernetesOptions = {}) {
  const options = resolveKubernetesOptions({
    image: 'switchyard/sandbox:t1',
    engineId: 'host:1:2:e',
    namespace: 'agents',
    nodeName: 'node-z',
    podStartTimeoutMs: 3000,
    settingNames: SETTINGS,
    ...overrides,
  });
  const clock = new FakeClock();
  // Sleeping moves the clock: the launcher's deadline comes without waiting for it.
  const launcher = new PodLauncher(client, options, clock, logger, async (ms) => {
    clock.t += ms;
  });
  const launch = (image = 'switchyard/sandbox:t1'): Promise<unknown> =>
    launcher.launch(
      sessionPodManifest({
        name: 'sy-session-x',
        image,
        engineId: options.engineId,
        limits: options.limits.pooled,
        options,
        state: 'claimed',
        sessionId: 'ses_x',
        specHash: 'h',
      }),
    );
  return { launcher, launch, clock };
}

const launch = (client: Cluster, overrides: KubernetesOptions = {}): Promise<unknown> =>
  launcherFor(client, overrides).launch();

/** The launch's rejection, awaited after the launcher's bookkeeping of it. */
async function failure(launching: Promise<unknown>): Promise<Error> {
  const err = await launching.then(
    () => {
      throw new Error('the launch succeeded');
    },
    (e: unknown) => e as Error,
  );
  await new Promise((resolve) => setImmediate(resolve));
  return err;
}

describe('PodLauncher: a cluster that is not what the engine was configured for', () => {
  it('a create answered 404 is the namespace missing: unavailable (503), naming the setting', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError('KUBE_NOT_FOUND', 'namespaces "agents" not found', { status: 404 });
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesUnavailableError);
    expect(err).toMatchObject({ code: 'KUBERNETES_NAMESPACE_MISSING', kind: 'unavailable', retriable: true });
    expect((err as Error).message).toBe(
      'namespace agents does not exist in the cluster at https://fake-apiserver:6443: create it (with its default ' +
        'ServiceAccount) or set SWITCHYARD_K8S_NAMESPACE to one that does',
    );
  });

  it('a create answered 403 is the cluster refusing the engine: unavailable, with the server’s words', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError(
      'KUBE_FORBIDDEN',
      'create pod sy-session-x: pods is forbidden: User "u" cannot create resource "pods"; the cluster refuses ' +
        "the engine's account (from KUBECONFIG /k) this right: grant it…",
      { status: 403 },
    );
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'KUBERNETES_FORBIDDEN', kind: 'unavailable' });
    expect((err as Error).message).toMatch(
      /^the cluster refuses to create the engine's pods in namespace agents: create pod sy-session-x: pods is forbidden: User "u" cannot create/,
    );
  });

  it('a create refused for a missing default ServiceAccount says so, and what makes one', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError(
      'KUBE_FORBIDDEN',
      'create pod sy-session-x: pods "sy-session-x" is forbidden: error looking up service account agents/default: ' +
        'serviceaccount "default" not found; the cluster refuses…',
      { status: 403 },
    );
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'KUBERNETES_FORBIDDEN', kind: 'unavailable' });
    expect((err as Error).message).toBe(
      'namespace agents has no default ServiceAccount, which every pod needs (create pod sy-session-x: pods ' +
        '"sy-session-x" is forbidden: error looking up service account agents/default: serviceaccount "default" not ' +
        "found): create it (a cluster's kube-controller-manager makes one in every namespace), or set " +
        'SWITCHYARD_K8S_NAMESPACE to a namespace that has one',
    );
  });

  it('a service account as the engine’s user is not the namespace’s default ServiceAccount missing', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError(
      'KUBE_FORBIDDEN',
      'create pod p: pods is forbidden: User "system:serviceaccount:agents:engine" cannot create resource "pods"',
      { status: 403 },
    );
    const err = await launch(client).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(
      /^the cluster refuses to create the engine's pods in namespace agents/,
    );
  });

  it('other API failures stay what they were', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError('KUBE_INVALID', 'spec.containers: Required value', { status: 422 });
    await expect(launch(client)).rejects.toMatchObject({ code: 'KUBE_INVALID', kind: 'internal' });
  });

  it('a pod still Pending on its node at its start timeout is POD_START_TIMEOUT, naming node and settings; it is deleted', async () => {
    const client = new Cluster();
    client.shape = pending;
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

  it('a pod no scheduler bound to a node says that the cluster needs SWITCHYARD_K8S_NODE_NAME without one', async () => {
    const client = new Cluster();
    client.shape = (pod) => {
      const { nodeName: _unbound, ...rest } = pending(pod);
      return rest;
    };
    const err = await launch(client, { nodeName: undefined }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'POD_START_TIMEOUT', kind: 'unavailable' });
    expect((err as Error).message).toBe(
      'pod sy-session-x was not running within 3000 ms: no scheduler bound it to a node (still Pending, not ' +
        'scheduled): a cluster without a running kube-scheduler needs SWITCHYARD_K8S_NODE_NAME (the node to bind ' +
        'pods to), or raise SWITCHYARD_K8S_POD_START_TIMEOUT_MS',
    );
    expect((err as KubernetesUnavailableError).details).toMatchObject({ waiting: 'Unscheduled' });
  });

  it('a pod the scheduler cannot place gives its words and the settings behind what the pod asks for', async () => {
    const client = new Cluster();
    client.shape = (pod) => {
      const { nodeName: _unbound, ...rest } = pending(pod);
      return {
        ...rest,
        scheduled: {
          status: 'False',
          reason: 'Unschedulable',
          message: '0/1 nodes are available: 1 node(s) didn\u2019t match Pod\u2019s node affinity/selector. ',
        },
      };
    };
    const err = await launch(client, { nodeName: undefined, nodeSelector: { disk: 'ssd' } }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'POD_START_TIMEOUT', kind: 'unavailable' });
    expect((err as Error).message).toBe(
      'pod sy-session-x was not running within 3000 ms: no node can take it (0/1 nodes are available: 1 node(s) ' +
        'didn\u2019t match Pod\u2019s node affinity/selector.): check SWITCHYARD_K8S_NODE_SELECTOR (does a Ready node ' +
        'have those labels?); each pod asks for SWITCHYARD_K8S_CPU_REQUEST CPUs, SWITCHYARD_POOLED_MEMORY_BYTES of ' +
        'memory and its workspace on disk (SWITCHYARD_MAX_WORKSPACE_BYTES): lower them, or add nodes, or raise ' +
        'SWITCHYARD_K8S_POD_START_TIMEOUT_MS',
    );
  });

  it('a node that keeps rejecting the pod (no room) is POD_START_TIMEOUT at the deadline, not an engine fault', async () => {
    const client = new Cluster();
    client.shape = (pod) => ({
      ...pod,
      phase: 'Failed',
      reason: 'OutOfmemory',
      message: 'Pod was rejected: Node didn\u2019t have enough resource: memory',
      containers: [],
    });
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesUnavailableError);
    expect(err).toMatchObject({ code: 'POD_START_TIMEOUT', kind: 'unavailable' });
    const message = (err as Error).message;
    expect(message).toMatch(/^pod sy-session-x-r\d+ ended before it ran: OutOfmemory \(Pod was rejected/);
    expect(message).toContain('node node-z (SWITCHYARD_K8S_NODE_NAME) had no room for it within 3000 ms');
    expect(message).toMatch(/it asks for cpu 100m, memory 536870912, ephemeral-storage \d+\)/);
    expect(message).toContain('SWITCHYARD_POOLED_MEMORY_BYTES of memory');
    // Every rejected pod was deleted (each retry is a new pod).
    const created = client.callsOf('createPod').map((c) => c.name);
    expect(created.length).toBeGreaterThan(1);
    for (const name of created) expect(client.pods.has(name!)).toBe(false);
  });

  it('a retry still Pending at the deadline after its node rejected the others says the node had no room', async () => {
    const client = new Cluster();
    let made = 0;
    client.shape = (pod) =>
      ++made === 1
        ? { ...pod, phase: 'Failed', reason: 'OutOfcpu', message: 'Pod was rejected: no cpu', containers: [] }
        : pending(pod);
    const err = await launch(client).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'POD_START_TIMEOUT', kind: 'unavailable' });
    expect((err as Error).message).toMatch(
      /^pod sy-session-x ended before it ran: OutOfcpu \(Pod was rejected: no cpu\); node node-z \(SWITCHYARD_K8S_NODE_NAME\) had no room for it within 3000 ms/,
    );
    expect(made).toBe(2);
  });

  it('a node refusing the pod for good (NodeAffinity) is POD_REJECTED at once, naming the selector', async () => {
    const client = new Cluster();
    client.shape = (pod) => ({
      ...pod,
      phase: 'Failed',
      reason: 'NodeAffinity',
      message:
        "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
      containers: [],
    });
    const { launch: start, clock } = launcherFor(client, { nodeSelector: { disk: 'ssd' } });
    const err = await start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesUnavailableError);
    expect(err).toMatchObject({ code: 'POD_REJECTED', kind: 'unavailable' });
    expect((err as Error).message).toBe(
      'pod sy-session-x ended before it ran: NodeAffinity (Pod was rejected: Predicate NodeAffinity failed: ' +
        "node(s) didn't match Pod's node affinity/selector): SWITCHYARD_K8S_NODE_SELECTOR asks for labels node " +
        'node-z does not have (SWITCHYARD_K8S_NODE_NAME binds every pod to it): change either',
    );
    expect(clock.t).toBeLessThan(100);
    expect(client.callsOf('createPod')).toHaveLength(1);
  });

  it('a pod whose runner ran and ended is not a refusal by the node', async () => {
    const client = new Cluster();
    client.shape = (pod) => ({
      ...pod,
      phase: 'Failed',
      reason: 'Error',
      containers: [{ name: 'runner', ready: false, restartCount: 0, state: 'terminated', reason: 'Error' }],
    });
    await expect(launch(client)).rejects.toMatchObject({ code: 'POD_START', kind: 'internal' });
  });

  it.each([
    ['ErrImageNeverPull', 'Container image "switchyard/sandbox:t1" is not present with pull policy of Never'],
    ['ImagePullBackOff', 'Back-off pulling image "switchyard/sandbox:t1"'],
    ['ErrImagePull', 'failed to resolve reference "docker.io/switchyard/sandbox:t1"'],
  ])(
    'a container waiting with %s is SANDBOX_IMAGE_MISSING at once, naming the image settings',
    async (reason, words) => {
      const client = new Cluster();
      client.shape = (pod) => ({
        ...pod,
        phase: 'Pending',
        containers: [
          { name: 'runner', ready: false, restartCount: 0, state: 'waiting', reason, message: words },
        ],
      });
      const { launch: start, clock } = launcherFor(client);
      const err = await start().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KubernetesUnavailableError);
      expect(err).toMatchObject({ code: 'SANDBOX_IMAGE_MISSING', kind: 'unavailable', retriable: true });
      expect((err as Error).message).toBe(
        `pod sy-session-x cannot start: node node-z cannot have image switchyard/sandbox:t1 (${reason}: ${words}); ` +
          'SWITCHYARD_K8S_IMAGE_PULL_POLICY is Never, so the image must already be on the node: import it into ' +
          "the node's container runtime (scripts/k8s.sh does for the sandbox image), or set " +
          'SWITCHYARD_K8S_IMAGE_PULL_POLICY to IfNotPresent for a registry the nodes reach; or set ' +
          'SWITCHYARD_SANDBOX_IMAGE to an image the nodes have',
      );
      // At once: the first poll saw it, long before the start timeout.
      expect(clock.t).toBeLessThan(100);
      expect(client.pods.size).toBe(0);
    },
  );

  it('an init container that cannot have the image (the runner waits PodInitializing) is SANDBOX_IMAGE_MISSING too', async () => {
    const client = new Cluster();
    client.shape = (pod) => ({
      ...pod,
      phase: 'Pending',
      initContainers: [
        { name: 'reserve', ready: false, restartCount: 0, state: 'waiting', reason: 'ErrImageNeverPull' },
      ],
      containers: [
        { name: 'runner', ready: false, restartCount: 0, state: 'waiting', reason: 'PodInitializing' },
      ],
    });
    const { launch: start, clock } = launcherFor(client);
    await expect(start()).rejects.toMatchObject({
      code: 'SANDBOX_IMAGE_MISSING',
      message: expect.stringContaining('cannot have image switchyard/sandbox:t1 (ErrImageNeverPull)'),
    });
    expect(clock.t).toBeLessThan(100);
  });

  it('with a pull policy that pulls, an image that will not come says the node must reach a registry', async () => {
    const client = new Cluster();
    client.shape = (pod) => ({
      ...pod,
      phase: 'Pending',
      containers: [
        { name: 'runner', ready: false, restartCount: 0, state: 'waiting', reason: 'ErrImagePull' },
      ],
    });
    const err = await launch(client, { imagePullPolicy: 'IfNotPresent' }).catch((e: unknown) => e);
    expect((err as Error).message).toContain(
      '(ErrImagePull); SWITCHYARD_K8S_IMAGE_PULL_POLICY is IfNotPresent: the node must reach a registry that has it',
    );
  });
});

describe('PodLauncher.lastFailure: what /health reports', () => {
  it('remembers why the latest pod of the sandbox image did not start, until one does', async () => {
    const client = new Cluster();
    client.shape = pending;
    const { launcher, launch: start, clock } = launcherFor(client);
    expect(launcher.lastFailure()).toBeUndefined();
    const err = await failure(start());
    expect(launcher.lastFailure()).toEqual({
      code: 'POD_START_TIMEOUT',
      message: err.message,
      at: new Date(clock.t).toISOString(),
    });
    client.shape = undefined;
    const started = (await start()) as { runner: { close(): void } };
    started.runner.close();
    await new Promise((resolve) => setImmediate(resolve));
    expect(launcher.lastFailure()).toBeUndefined();
  });

  it('a failure on the engine’s side (not the cluster’s) neither sets nor clears it', async () => {
    const client = new Cluster();
    client.shape = pending;
    const { launcher, launch: start } = launcherFor(client);
    await failure(start());
    client.shape = undefined;
    client.attach = () =>
      Promise.reject(new KubeApiError('KUBE_STREAM', 'the stream broke', { retriable: true }));
    await expect(start()).rejects.toMatchObject({ code: 'KUBE_STREAM' });
    expect(launcher.lastFailure()).toMatchObject({ code: 'POD_START_TIMEOUT' });
  });

  it('forgets it once a pod started, and after a minute at the latest', async () => {
    const client = new Cluster();
    client.createFails = new KubeApiError('KUBE_NOT_FOUND', 'namespaces "agents" not found', { status: 404 });
    const { launcher, launch: start, clock } = launcherFor(client);
    await failure(start());
    expect(launcher.lastFailure()).toMatchObject({ code: 'KUBERNETES_NAMESPACE_MISSING' });
    clock.t += 59_000;
    expect(launcher.lastFailure()).toBeDefined();
    clock.t += 2_000;
    expect(launcher.lastFailure()).toBeUndefined();
  });

  it('a session image that fails says nothing about the cluster', async () => {
    const client = new Cluster();
    client.shape = (pod) => ({
      ...pod,
      phase: 'Pending',
      containers: [
        { name: 'runner', ready: false, restartCount: 0, state: 'waiting', reason: 'ErrImageNeverPull' },
      ],
    });
    const { launcher, launch: start } = launcherFor(client);
    await failure(start('example/template:1'));
    expect(launcher.lastFailure()).toBeUndefined();
    await failure(start());
    expect(launcher.lastFailure()).toMatchObject({ code: 'SANDBOX_IMAGE_MISSING' });
  });
});
