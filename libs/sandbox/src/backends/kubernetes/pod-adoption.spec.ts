import * as os from 'node:os';
import { PassThrough } from 'node:stream';
import { Logger } from '@nestjs/common';
import { FakeClock } from '../../../test/fake-clock';
import { RunnerConnection } from '../../core/runner/runner-connection';
import { RUNNER_PROTOCOL, type RunnerResynced } from '../../core/runner/runner-protocol';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import { FakeKubeClient } from './fake-kube-client.testing';
import { KubeReaper } from './kube-reaper';
import { K8S_ANNOTATIONS, K8S_LABELS } from './kubernetes.constants';
import { resolveKubernetesOptions } from './kubernetes.options';
import { PodAdoption, type Reattach } from './pod-adoption';
import { PodRunner } from './pod-runner';
import { labelValue, oneOffPodManifest, sessionPodManifest } from './pod-spec';
import { SessionPods } from './session-pods';

const logger = new Logger('pod-adoption.spec');
logger.log = () => undefined;
logger.warn = () => undefined;
logger.debug = () => undefined;

const host =
  os
    .hostname()
    .replace(/[^A-Za-z0-9_.-]/g, '_')
    .slice(0, 64) || 'host';
/** A pid no process has (above the kernel's pid_max). */
const DEAD_PID = 4_194_305;
const DEAD_HERE = `${host}:${DEAD_PID}:12345:aa`;
const OTHER_HOST = `some-other-host-xyz:${DEAD_PID}:1:bb`;

const STATE: RunnerResynced = {
  protocol: RUNNER_PROTOCOL,
  pid: 42,
  workspace: [2049, 77],
  kernels: [
    {
      kernel: 'krn_0123456789abcdef',
      language: 'python',
      pid: 50,
      count: 2,
      busy: false,
      meta: { startedAt: '2026-01-01T00:00:00.000Z', workspaceDir: '/workspace', baseEnv: { A: '1' } },
    },
  ],
  procs: [
    { proc: 'prc_0123456789abcdef', pid: 60, meta: { name: 'web', command: 'python3 -m http.server' } },
  ],
};

async function sessionPod(
  client: FakeKubeClient,
  name: string,
  engineId: string,
  sessionId?: string,
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
      ...(sessionId !== undefined && { sessionId }),
    }),
  );
}

/** A runner that answers as a resynced one would: a live connection over in-memory streams. */
function fakeReattach(attached: string[], fail?: Set<string>): Reattach {
  return async (_client, podName) => {
    attached.push(podName);
    if (fail?.has(podName)) throw new Error('the runner did not resync');
    const connection = new RunnerConnection({
      stdin: new PassThrough(),
      stdout: new PassThrough(),
      closed: new Promise(() => undefined),
      close: () => undefined,
    });
    const runner = new PodRunner(podName, connection, undefined, false, ['2049', '77'], undefined, () => '');
    return { runner, state: STATE };
  };
}

function adoption(client: FakeKubeClient, engineId: string, reattach: Reattach) {
  const options = resolveKubernetesOptions({ image: 'img:1', engineId });
  return new PodAdoption(client, options, new FakeClock(), logger, reattach);
}

const dead = (owner: string) => owner === DEAD_HERE;

describe('PodAdoption', () => {
  it("claims the session's pod of a dead engine at its version and re-attaches to its runner", async () => {
    const client = new FakeKubeClient();
    const me = defaultEngineInstanceId();
    await sessionPod(client, 'pod-a', DEAD_HERE, 'ses_a');
    await sessionPod(client, 'pod-b', DEAD_HERE, 'ses_b');
    const attached: string[] = [];
    const adopted = await adoption(client, me, fakeReattach(attached)).adopt('ses_a', dead);

    expect(adopted?.pod).toMatchObject({ name: 'pod-a', sessionId: 'ses_a', adopted: true, runnerPid: 42 });
    expect(adopted?.pod.workspace).toEqual(['2049', '77']);
    expect(adopted?.state.kernels.map((k) => k.kernel)).toEqual(['krn_0123456789abcdef']);
    expect(attached).toEqual(['pod-a']);
    const now = client.pods.get('pod-a')!;
    expect(now.annotations[K8S_ANNOTATIONS.engine]).toBe(me);
    expect(now.labels[K8S_LABELS.engine]).toBe(labelValue(me));
    expect(now.labels[K8S_LABELS.state]).toBe('claimed');
    // The other session's pod is not touched.
    expect(client.pods.get('pod-b')!.annotations[K8S_ANNOTATIONS.engine]).toBe(DEAD_HERE);
  });

  it('of two engines adopting one pod at once, exactly one wins', async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'pod-a', DEAD_HERE, 'ses_a');
    let open!: () => void;
    client.claimGate = new Promise((resolve) => (open = resolve));
    const one = adoption(client, defaultEngineInstanceId(), fakeReattach([]));
    const two = adoption(client, `${host}:1:1:zz`, fakeReattach([]));
    const racing = Promise.all([one.adopt('ses_a', dead), two.adopt('ses_a', dead)]);
    await new Promise((r) => setTimeout(r, 20));
    open();
    const results = await racing;
    expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    expect(client.callsOf('claim').filter((c) => (c.detail as { won: boolean }).won)).toHaveLength(1);
  });

  it('leaves the pods of live engines, of other sessions, and warm pods alone', async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'live', defaultEngineInstanceId(1), 'ses_a');
    await sessionPod(client, 'other-host', OTHER_HOST, 'ses_a');
    await sessionPod(client, 'warm', DEAD_HERE, undefined, 'warm');
    const attached: string[] = [];
    expect(
      await adoption(client, defaultEngineInstanceId(), fakeReattach(attached)).adopt('ses_a', dead),
    ).toBe(undefined);
    expect(attached).toEqual([]);
    expect(client.callsOf('claim')).toHaveLength(0);
    // A replica declared dead is adoptable once named.
    const fromReplica = (owner: string) => owner === OTHER_HOST;
    const adopted = await adoption(client, defaultEngineInstanceId(), fakeReattach(attached)).adopt(
      'ses_a',
      fromReplica,
    );
    expect(adopted?.pod.name).toBe('other-host');
  });

  it('deletes a pod whose runner does not resync, and answers none (the session gets a fresh pod)', async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'pod-a', DEAD_HERE, 'ses_a');
    const adopted = await adoption(
      client,
      defaultEngineInstanceId(),
      fakeReattach([], new Set(['pod-a'])),
    ).adopt('ses_a', dead);
    expect(adopted).toBeUndefined();
    expect(client.pods.has('pod-a')).toBe(false);
  });

  it('answers none, without throwing, when the API server is down', async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'pod-a', DEAD_HERE, 'ses_a');
    client.down = true;
    const a = adoption(client, defaultEngineInstanceId(), fakeReattach([]));
    await expect(a.adopt('ses_a', dead)).resolves.toBeUndefined();
    await expect(a.reapOrphans(new Set(), dead)).resolves.toEqual([]);
  });

  it('reaps the session pods of adoptable engines whose session is unknown, and only those', async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'known', DEAD_HERE, 'ses_known');
    await sessionPod(client, 'ended', DEAD_HERE, 'ses_ended');
    await sessionPod(client, 'live-engine', defaultEngineInstanceId(1), 'ses_other');
    const me = defaultEngineInstanceId();
    await sessionPod(client, 'mine', me, 'ses_mine');
    const removed = await adoption(client, me, fakeReattach([])).reapOrphans(new Set(['ses_known']), dead);
    expect(removed).toEqual(['ended']);
    expect([...client.pods.keys()].sort()).toEqual(['known', 'live-engine', 'mine']);
  });
});

describe('KubeReaper at start-up, with sessions to adopt', () => {
  it("keeps the dead engines' session pods, and reaps their warm and one-off pods", async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'session', DEAD_HERE, 'ses_a');
    await sessionPod(client, 'warm', DEAD_HERE, undefined, 'warm');
    const options = resolveKubernetesOptions({ image: 'img:1', engineId: DEAD_HERE });
    await client.createPod(
      oneOffPodManifest({
        name: 'one-off',
        image: 'img:1',
        engineId: DEAD_HERE,
        sessionId: 'ses_a',
        actionId: 'act_1',
        limits: options.limits.container,
        options,
        activeDeadlineSeconds: 60,
      }),
    );
    const removed = await new KubeReaper(client, defaultEngineInstanceId(), logger).reapDead();
    expect(removed.sort()).toEqual(['one-off', 'warm']);
    expect([...client.pods.keys()]).toEqual(['session']);
  });
});

describe('SessionPods with adoption', () => {
  it("tells the listener of the adopted pod's kernels and processes before the session's podFor resolves", async () => {
    const client = new FakeKubeClient();
    await sessionPod(client, 'pod-a', DEAD_HERE, 'ses_a');
    const options = resolveKubernetesOptions({ image: 'img:1', engineId: defaultEngineInstanceId() });
    const clock = new FakeClock();
    const unused = undefined as never;
    const pods = new SessionPods(
      client,
      options,
      unused,
      undefined,
      unused,
      unused,
      clock,
      logger,
      new PodAdoption(client, options, clock, logger, fakeReattach([])),
    );
    const heard: string[] = [];
    pods.onAdopted(({ pod, state }) => heard.push(`${pod.name}:${state.procs.length}`));
    const pod = await pods.podFor('ses_a', undefined, { adopt: true });
    expect(pod.adopted).toBe(true);
    expect(heard).toEqual(['pod-a:1']);
    expect(pods.list()).toMatchObject([{ sessionId: 'ses_a', pod: 'pod-a', alive: true }]);
    expect(pods.adoptable(DEAD_HERE)).toBe(true);
    expect(pods.adoptable(OTHER_HOST)).toBe(false);
    pods.adoptFrom(OTHER_HOST);
    expect(pods.adoptable(OTHER_HOST)).toBe(true);
  });
});
