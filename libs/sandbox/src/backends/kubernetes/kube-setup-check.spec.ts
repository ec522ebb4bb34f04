import { Logger } from '@nestjs/common';
import { FakeClock } from '../../../test/fake-clock';
import { FakeKubeClient } from './fake-kube-client.testing';
import { KubeAvailability } from './kube-availability';
import type { AccessAnswer, AccessCheck } from './kube-types';
import { KubeSetupCheck } from './kube-setup-check';
import { KubeApiError, KubernetesSetupError } from './kubernetes.errors';
import { resolveKubernetesOptions } from './kubernetes.options';

/** A cluster as the start-up check and the readiness probe see it: each answer settable. */
class Cluster extends FakeKubeClient {
  pingFails?: KubeApiError;
  namespaceFails?: KubeApiError;
  reviewFails?: KubeApiError;

  override async ping(): Promise<string> {
    if (this.pingFails) throw this.pingFails;
    return super.ping();
  }

  override async namespaceExists(): Promise<boolean> {
    if (this.namespaceFails) throw this.namespaceFails;
    return super.namespaceExists();
  }

  override async reviewAccess(check: AccessCheck): Promise<AccessAnswer> {
    if (this.reviewFails) throw this.reviewFails;
    return super.reviewAccess(check);
  }
}

const options = resolveKubernetesOptions({
  image: 'switchyard/sandbox:t1',
  engineId: 'host:1:2:e',
  namespace: 'agents',
  settingNames: {
    namespace: 'SWITCHYARD_K8S_NAMESPACE',
    kubeconfigPath: 'KUBECONFIG',
    context: 'SWITCHYARD_K8S_CONTEXT',
  },
});

function logger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const l = new Logger('kube-setup-check.spec');
  l.warn = (m: string) => void warnings.push(m);
  l.log = () => undefined;
  return { logger: l, warnings };
}

const unreachable = () =>
  new KubeApiError('KUBE_UNAVAILABLE', 'version: connect ECONNREFUSED 127.0.0.1:1', { retriable: true });

describe('KubeSetupCheck: the configuration against the cluster, at start-up', () => {
  it('a cluster as configured passes, after one access review per right the backend uses', async () => {
    const client = new Cluster();
    await expect(new KubeSetupCheck(client, options, logger().logger).run()).resolves.toBe('checked');
    expect(client.callsOf('reviewAccess').map((c) => c.detail)).toEqual([
      'create pods',
      'get pods',
      'list pods',
      'patch pods',
      'delete pods',
      'get pods/attach',
      'create pods/attach',
      'get pods/exec',
      'create pods/exec',
      'get networkpolicies',
      'create networkpolicies',
      'get namespaces',
      'list nodes',
    ]);
  });

  it('a namespace that does not exist stops start-up, naming SWITCHYARD_K8S_NAMESPACE', async () => {
    const client = new Cluster();
    client.namespacePresent = false;
    const err = await new KubeSetupCheck(client, options, logger().logger).run().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubernetesSetupError);
    expect(err).toMatchObject({ setting: 'namespace', variable: 'SWITCHYARD_K8S_NAMESPACE' });
    expect((err as Error).message).toBe(
      'namespace agents does not exist in the cluster at https://fake-apiserver:6443: create it (with its default ' +
        'ServiceAccount) or set SWITCHYARD_K8S_NAMESPACE to one that does',
    );
  });

  it('rights the account lacks stop start-up, naming them, the account and KUBECONFIG', async () => {
    const client = new Cluster();
    client.denied.add('create pods').add('create pods/exec');
    const err = await new KubeSetupCheck(client, options, logger().logger).run().catch((e: unknown) => e);
    expect(err).toMatchObject({ setting: 'kubeconfigPath', variable: 'KUBECONFIG' });
    expect((err as Error).message).toBe(
      "the engine's Kubernetes account (fake-user, from KUBECONFIG /fake/kubeconfig, context fake) may not create " +
        'pods (session and one-off pods); create pods/exec (file transfer, workspace copies) in namespace agents: ' +
        'grant them (docs/kubernetes.md, "When the cluster is not right", has a Role), set KUBECONFIG (or ' +
        'SWITCHYARD_K8S_CONTEXT) to an account that has them, or SWITCHYARD_K8S_NAMESPACE to a namespace where it ' +
        'does',
    );
  });

  it('rights missing in a namespace it may not read either: the message asks whether the namespace exists', async () => {
    const client = new Cluster();
    client.namespaceFails = new KubeApiError('KUBE_FORBIDDEN', 'read namespace: forbidden', { status: 403 });
    for (const r of ['create pods', 'get pods', 'list pods']) client.denied.add(r);
    await expect(new KubeSetupCheck(client, options, logger().logger).run()).rejects.toMatchObject({
      variable: 'KUBECONFIG',
      message: expect.stringMatching(
        /a namespace where it does \(it may not read namespace agents either: does it exist\?\)$/,
      ),
    });
  });

  it('optional rights missing (NetworkPolicy, nodes) are a warning, not a refusal', async () => {
    const client = new Cluster();
    client.denied.add('list nodes').add('create networkpolicies');
    const { logger: l, warnings } = logger();
    await expect(new KubeSetupCheck(client, options, l).run()).resolves.toBe('checked');
    expect(warnings).toEqual([
      "the engine's Kubernetes account may not create networkpolicies (the deny-all NetworkPolicy); list nodes " +
        '(readiness: a Ready node, the image on it): going on without',
    ]);
  });

  it('credentials the server refuses (401) stop start-up, naming KUBECONFIG', async () => {
    const client = new Cluster();
    client.pingFails = new KubeApiError('KUBE_FORBIDDEN', 'version: Unauthorized; the API server …', {
      status: 401,
    });
    await expect(new KubeSetupCheck(client, options, logger().logger).run()).rejects.toMatchObject({
      setting: 'kubeconfigPath',
      variable: 'KUBECONFIG',
      message: 'version: Unauthorized; the API server …',
    });
  });

  it('a server that does not answer lets the engine start (deferred), saying so', async () => {
    const client = new Cluster();
    client.pingFails = unreachable();
    const { logger: l, warnings } = logger();
    await expect(new KubeSetupCheck(client, options, l).run()).resolves.toBe('deferred');
    expect(warnings[0]).toMatch(
      /^version: connect ECONNREFUSED 127\.0\.0\.1:1\. Starting anyway: \/health is not/,
    );
    // Likewise when it goes away between the checks, and when it answers 5xx.
    const flaky = new Cluster();
    flaky.reviewFails = new KubeApiError('KUBE_API', 'access review: etcdserver: request timed out', {
      status: 500,
      retriable: true,
    });
    await expect(new KubeSetupCheck(flaky, options, logger().logger).run()).resolves.toBe('deferred');
  });

  it('a server that will not review access, or show the namespace, is not a refusal: those checks are skipped', async () => {
    const client = new Cluster();
    client.reviewFails = new KubeApiError('KUBE_FORBIDDEN', 'access review: forbidden', { status: 403 });
    client.namespaceFails = new KubeApiError('KUBE_FORBIDDEN', 'read namespace: forbidden', { status: 403 });
    const { logger: l, warnings } = logger();
    await expect(new KubeSetupCheck(client, options, l).run()).resolves.toBe('checked');
    expect(warnings).toEqual([
      'cannot tell whether namespace agents exists (read namespace: forbidden); a pod create will say',
      "cannot review the engine's rights in the cluster (access review: forbidden); not checked",
    ]);
  });
});

describe('KubeAvailability: the same causes while the engine runs, as /health reports them', () => {
  const probe = (client: Cluster, clock = new FakeClock()) => new KubeAvailability(client, options, clock);

  it('rights missing: not available, KUBERNETES_FORBIDDEN, the same words as at start-up', async () => {
    const client = new Cluster();
    client.denied.add('create pods/attach');
    const a = await probe(client).current();
    expect(a).toMatchObject({ available: false, code: 'KUBERNETES_FORBIDDEN' });
    expect(a.reason).toMatch(
      /^the engine's Kubernetes account \(fake-user, from KUBECONFIG .*\) may not create pods\/attach/,
    );
  });

  it('rights are reviewed again while any is missing, else once a minute', async () => {
    const client = new Cluster();
    const clock = new FakeClock(1);
    const p = probe(client, clock);
    client.denied.add('delete pods');
    expect((await p.current()).available).toBe(false);
    client.denied.clear();
    expect((await p.current()).available).toBe(true);
    const reviews = client.callsOf('reviewAccess').length;
    clock.t += 3000; // past the positive answer's 2 s, within the rights' minute
    expect((await p.current()).available).toBe(true);
    expect(client.callsOf('reviewAccess').length).toBe(reviews);
    client.denied.add('delete pods');
    clock.t += 60_000;
    expect(await p.current()).toMatchObject({ available: false, code: 'KUBERNETES_FORBIDDEN' });
  });

  it('a namespace that does not exist, credentials refused, a server that does not answer: each its code', async () => {
    const gone = new Cluster();
    gone.namespacePresent = false;
    expect(await probe(gone).current()).toMatchObject({
      available: false,
      code: 'KUBERNETES_NAMESPACE_MISSING',
      reason: expect.stringContaining('set SWITCHYARD_K8S_NAMESPACE to one that does'),
    });
    const refused = new Cluster();
    refused.pingFails = new KubeApiError('KUBE_FORBIDDEN', 'version: Unauthorized', { status: 401 });
    expect(await probe(refused).current()).toMatchObject({ available: false, code: 'KUBERNETES_FORBIDDEN' });
    const down = new Cluster();
    down.pingFails = unreachable();
    expect(await probe(down).current()).toMatchObject({
      available: false,
      code: 'KUBERNETES_UNAVAILABLE',
      reason: 'version: connect ECONNREFUSED 127.0.0.1:1',
    });
  });

  it('a namespace it may not read is not a reason to be unavailable', async () => {
    const client = new Cluster();
    client.namespaceFails = new KubeApiError('KUBE_FORBIDDEN', 'read namespace: forbidden', { status: 403 });
    expect(await probe(client).current()).toMatchObject({
      available: true,
      details: { namespaceExists: 'unknown: no permission to get the namespace' },
    });
  });
});

describe('KubeAvailability: no action waits on the API server for a recent answer', () => {
  it('past 2 s a positive answer still answers while the cluster is asked again; past 10 s the caller waits', async () => {
    let asked = 0;
    const client = new (class extends Cluster {
      override ping(): Promise<string> {
        asked++; // a refused ping is no call the fake records
        return super.ping();
      }
    })();
    const clock = new FakeClock(1);
    const p = new KubeAvailability(client, options, clock);
    expect((await p.current()).available).toBe(true);
    const pings = () => asked;
    expect(pings()).toBe(1);
    clock.t += 1000;
    await p.current();
    expect(pings()).toBe(1); // within the TTL: no call at all

    // Past the TTL: the cached answer, and one probe in the background (the cluster went away meanwhile).
    clock.t += 2000;
    client.pingFails = unreachable();
    const answers = await Promise.all([p.current(), p.current()]);
    expect(answers.map((a) => a.available)).toEqual([true, true]);
    expect(pings()).toBe(2); // one probe for both callers
    await new Promise((resolve) => setImmediate(resolve));
    // Its negative answer is not kept: the next caller asks the cluster itself and waits for it.
    expect(await p.current()).toMatchObject({ available: false, code: 'KUBERNETES_UNAVAILABLE' });
    expect(pings()).toBe(3);

    // An answer older than 10 s is not given out: the caller waits for the probe.
    client.pingFails = undefined;
    expect((await p.current()).available).toBe(true);
    clock.t += 11_000;
    client.pingFails = unreachable();
    expect(await p.current()).toMatchObject({ available: false, code: 'KUBERNETES_UNAVAILABLE' });
  });
});
