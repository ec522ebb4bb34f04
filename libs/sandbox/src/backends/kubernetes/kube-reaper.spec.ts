import * as os from 'node:os';
import { Logger } from '@nestjs/common';
import { FakeClock } from '../../../test/fake-clock';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import { FakeKubeClient } from './fake-kube-client.testing';
import { KubeAvailability, normalizeImageRef } from './kube-availability';
import { KubeReaper } from './kube-reaper';
import { resolveKubernetesOptions, type KubernetesOptions } from './kubernetes.options';
import { claimLabels, oneOffPodManifest, sessionPodManifest } from './pod-spec';

const logger = new Logger('kube-reaper.spec');
logger.log = () => undefined;
logger.warn = () => undefined;

const host =
  os
    .hostname()
    .replace(/[^A-Za-z0-9_.-]/g, '_')
    .slice(0, 64) || 'host';
/** A pid no process has (above the kernel's pid_max). */
const DEAD_PID = 4_194_305;

async function pod(
  client: FakeKubeClient,
  name: string,
  engineId: string,
  state: 'warm' | 'claimed' = 'claimed',
) {
  const options = resolveKubernetesOptions({ image: 'img:1', engineId });
  await client.createPod(
    sessionPodManifest({
      name,
      image: 'img:1',
      engineId,
      limits: options.limits.pooled,
      options,
      state,
      specHash: 's',
    }),
  );
}

describe('KubeReaper', () => {
  it('deletes pods of dead engines of this host and of its own id, never those of live or other hosts', async () => {
    const client = new FakeKubeClient();
    const own = defaultEngineInstanceId();
    const live = defaultEngineInstanceId(1); // pid 1 runs (the reaper cannot see its ticks change)
    await pod(client, 'dead-here', `${host}:${DEAD_PID}:12345:aa`);
    await pod(client, 'own-leftover', own);
    await pod(client, 'live-here', live);
    await pod(client, 'other-host', `some-other-host-xyz:${DEAD_PID}:1:bb`);
    await pod(client, 'odd-id', 'not an engine id');
    const removed = await new KubeReaper(client, own, logger).reapDead();

    expect(removed.sort()).toEqual(['dead-here', 'own-leftover']);
    expect([...client.pods.keys()].sort()).toEqual(['live-here', 'odd-id', 'other-host']);
    // Deleted only at the version listed: a claim by a live engine in between would have won.
    expect(
      client.callsOf('deletePod').every((c) => (c.detail as { precondition?: object }).precondition),
    ).toBe(true);
  });

  it("deletes every pod of a replica declared dead, on any host, and only that replica's", async () => {
    const client = new FakeKubeClient();
    const dead = `some-other-host-xyz:${DEAD_PID}:1:bb`;
    const survivor = defaultEngineInstanceId();
    await pod(client, 'dead-claimed', dead);
    await pod(client, 'dead-warm', dead, 'warm');
    await pod(client, 'survivor-claimed', survivor);
    await pod(client, 'third-replica', `third-host:${DEAD_PID}:1:cc`);
    const removed = await new KubeReaper(client, survivor, logger).reapEngine(dead);

    expect(removed.sort()).toEqual(['dead-claimed', 'dead-warm']);
    expect([...client.pods.keys()].sort()).toEqual(['survivor-claimed', 'third-replica']);
  });

  it('retries a delete whose version only moved (a kubelet status update)', async () => {
    const client = new FakeKubeClient();
    await pod(client, 'dead-pending', `${host}:${DEAD_PID}:12345:aa`);
    const original = client.listPods.bind(client);
    client.listPods = async (s) => {
      const listed = await original(s);
      client.kubeletUpdate('dead-pending');
      return listed;
    };
    expect(await new KubeReaper(client, defaultEngineInstanceId(), logger).reapDead()).toEqual([
      'dead-pending',
    ]);
    expect(client.callsOf('deletePod')).toHaveLength(2);
  });

  it('does not undo a claim made between its list and its delete', async () => {
    const client = new FakeKubeClient();
    const dead = `${host}:${DEAD_PID}:12345:aa`;
    await pod(client, 'warm-of-dead', dead, 'warm');
    const original = client.listPods.bind(client);
    client.listPods = async (s) => {
      const listed = await original(s);
      // A live engine claims it in between: the labels and the owner change.
      const { labels, annotations } = claimLabels(defaultEngineInstanceId(1), 'ses-live');
      await client.claim(
        'warm-of-dead',
        client.pods.get('warm-of-dead')!.resourceVersion,
        labels,
        annotations,
      );
      return listed;
    };
    expect(await new KubeReaper(client, defaultEngineInstanceId(), logger).reapDead()).toEqual([]);
    expect(client.pods.has('warm-of-dead')).toBe(true);
  });

  it('at shutdown deletes every pod of its engine: claimed ones outright, warm ones at the version seen', async () => {
    const client = new FakeKubeClient();
    const own = defaultEngineInstanceId();
    await pod(client, 'mine-claimed', own);
    await pod(client, 'mine-warm', own, 'warm');
    const options = resolveKubernetesOptions({ image: 'img:1', engineId: own });
    await client.createPod(
      oneOffPodManifest({
        name: 'mine-one-off',
        image: 'img:1',
        engineId: own,
        limits: options.limits.container,
        options,
        sessionId: 's',
        actionId: 'a',
        activeDeadlineSeconds: 60,
      }),
    );
    await pod(client, 'someone-elses', defaultEngineInstanceId(1));
    const removed = await new KubeReaper(client, own, logger).removeAll();

    expect(removed.sort()).toEqual(['mine-claimed', 'mine-one-off', 'mine-warm']);
    expect([...client.pods.keys()]).toEqual(['someone-elses']);
    const preconditions = Object.fromEntries(
      client.callsOf('deletePod').map((c) => [c.name, (c.detail as { precondition?: object }).precondition]),
    );
    expect(preconditions['mine-claimed']).toBeUndefined();
    expect(preconditions['mine-warm']).toEqual({ resourceVersion: expect.any(String) });
  });

  it("deletes every pod labelled with an ended session, whichever engine made it, and no other session's", async () => {
    const client = new FakeKubeClient();
    const own = defaultEngineInstanceId();
    const otherReplica = `some-other-host-xyz:${DEAD_PID}:1:bb`;
    const oneOff = async (name: string, engineId: string, sessionId: string) => {
      const options = resolveKubernetesOptions({ image: 'img:1', engineId });
      await client.createPod(
        oneOffPodManifest({
          name,
          image: 'img:1',
          engineId,
          limits: options.limits.container,
          options,
          sessionId,
          actionId: 'a',
          activeDeadlineSeconds: 60,
        }),
      );
    };
    await oneOff('ended-elsewhere', otherReplica, 'ses_ended');
    await oneOff('ended-here', own, 'ses_ended');
    await oneOff('kept', otherReplica, 'ses_kept');
    // A session id whose label is a hash: the annotation is what names it.
    const long = `ses_${'x'.repeat(80)}`;
    await oneOff('ended-long', otherReplica, long);
    await pod(client, 'warm', otherReplica, 'warm');
    const reaper = new KubeReaper(client, own, logger);

    expect((await reaper.removeSession('ses_ended')).sort()).toEqual(['ended-elsewhere', 'ended-here']);
    expect(await reaper.removeSession(long)).toEqual(['ended-long']);
    expect([...client.pods.keys()].sort()).toEqual(['kept', 'warm']);
  });

  it('never throws at shutdown when the API server is gone', async () => {
    const client = new FakeKubeClient();
    client.down = true;
    await expect(new KubeReaper(client, 'x', logger).removeAll()).resolves.toEqual([]);
  });
});

describe('KubeAvailability', () => {
  const base = { image: 'switchyard/sandbox:t1', namespace: 'switchyard-test' };

  it('is available with a Ready node that has the image', async () => {
    const a = new KubeAvailability(new FakeKubeClient(), resolveKubernetesOptions(base), new FakeClock());
    expect(await a.current()).toMatchObject({
      available: true,
      details: { server: 'v1.34.4', readyNodes: ['node-a'] },
    });
  });

  const cases: Array<[string, KubernetesOptions, (c: FakeKubeClient) => void, string]> = [
    ['no image configured', {}, () => undefined, 'SANDBOX_IMAGE_MISSING'],
    ['the API server is down', base, (c: FakeKubeClient) => void (c.down = true), 'KUBERNETES_UNAVAILABLE'],
    [
      'no node is Ready',
      base,
      (c: FakeKubeClient) => void (c.nodeList[0].ready = false),
      'KUBERNETES_NO_READY_NODE',
    ],
    [
      'the configured node is not there',
      { ...base, nodeName: 'node-b' },
      () => undefined,
      'KUBERNETES_NO_READY_NODE',
    ],
    [
      'the image is on no node',
      base,
      (c: FakeKubeClient) => void (c.nodeList[0].images = []),
      'SANDBOX_IMAGE_MISSING',
    ],
  ];
  it.each(cases)('is unavailable when %s', async (_why, input, breakIt, code) => {
    const client = new FakeKubeClient();
    breakIt(client);
    const result = await new KubeAvailability(
      client,
      resolveKubernetesOptions(input),
      new FakeClock(),
    ).current();
    expect(result.available).toBe(false);
    expect(result.code).toBe(code);
    expect(result.reason).toEqual(expect.any(String));
  });

  it('does not check for the image when pods may pull it', async () => {
    const client = new FakeKubeClient();
    client.nodeList[0].images = [];
    const o = resolveKubernetesOptions({ ...base, imagePullPolicy: 'IfNotPresent' });
    expect((await new KubeAvailability(client, o, new FakeClock()).current()).available).toBe(true);
  });

  it('normalises image references as kubelets report them', () => {
    expect(normalizeImageRef('switchyard/sandbox:t1')).toBe('docker.io/switchyard/sandbox:t1');
    expect(normalizeImageRef('python')).toBe('docker.io/library/python:latest');
    expect(normalizeImageRef('registry.local:5000/a/b:2')).toBe('registry.local:5000/a/b:2');
    expect(normalizeImageRef('localhost/x@sha256:abc')).toBe('localhost/x@sha256:abc');
  });
});
