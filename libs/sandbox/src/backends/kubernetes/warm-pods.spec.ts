import { Logger } from '@nestjs/common';
import { FakeClock } from '../../../test/fake-clock';
import { FakeKubeClient } from './fake-kube-client.testing';
import type { PodInfo, PodManifest } from './kube-types';
import { KubernetesUnavailableError } from './kubernetes.errors';
import { resolveKubernetesOptions, type ResolvedKubernetesOptions } from './kubernetes.options';
import { type LaunchedPod, PodLauncher } from './pod-launcher';
import type { PodRunner } from './pod-runner';
import { sessionPodManifest } from './pod-spec';
import { WarmPods } from './warm-pods';

const logger = new Logger('warm-pods.spec');
logger.warn = () => undefined;
logger.debug = () => undefined;

const SPEC = 'spec1';

function engine(client: FakeKubeClient, engineId: string): WarmPods {
  const options: ResolvedKubernetesOptions = resolveKubernetesOptions({
    image: 'switchyard/sandbox:t1',
    engineId,
    min: 0,
    max: 4,
  });
  const clock = new FakeClock();
  const launcher = new PodLauncher(client, options, clock, logger, async () => undefined);
  return new WarmPods(
    client,
    launcher,
    options,
    'switchyard/sandbox:t1',
    options.limits.pooled,
    SPEC,
    clock,
    logger,
  );
}

async function warmPod(client: FakeKubeClient, name: string, owner: string, spec = SPEC): Promise<PodInfo> {
  const options = resolveKubernetesOptions({ image: 'switchyard/sandbox:t1', engineId: owner });
  return client.createPod(
    sessionPodManifest({
      name,
      image: 'switchyard/sandbox:t1',
      engineId: owner,
      limits: options.limits.pooled,
      options,
      state: 'warm',
      specHash: spec,
    }),
  );
}

/** A gate that opens once `n` claims wait at it: both racers then compare the same resource version. */
function raceGate(client: FakeKubeClient, n: number): void {
  let arrived = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  client.claimGate = new Promise<void>((resolve) => {
    void gate.then(resolve);
  });
  const original = client.claim.bind(client);
  client.claim = async (...args) => {
    if (++arrived === n) open();
    return original(...args);
  };
}

describe('WarmPods claims (optimistic concurrency on the pod labels)', () => {
  it('two engines racing for one warm pod: exactly one wins, the other finds none', async () => {
    const client = new FakeKubeClient();
    await warmPod(client, 'sy-s-warm', 'host-a:1:1:aa');
    const a = engine(client, 'host-a:1:1:aa');
    const b = engine(client, 'host-b:2:2:bb');
    raceGate(client, 2);
    const [ra, rb] = await Promise.all([a.claim('ses-a', 0), b.claim('ses-b', 0)]);

    const winners = [ra, rb].filter((r) => r !== undefined);
    expect(winners).toHaveLength(1);
    const claims = client.callsOf('claim');
    // Both tried the same pod at the same version; the API took exactly one.
    expect(claims).toHaveLength(2);
    expect(new Set(claims.map((c) => (c.detail as { resourceVersion: string }).resourceVersion)).size).toBe(
      1,
    );
    expect(claims.map((c) => (c.detail as { won: boolean }).won).sort()).toEqual([false, true]);
    // The pod is labelled with the winner's session and engine, and nobody else's.
    const pod = client.pods.get('sy-s-warm')!;
    const winnerSession = ra ? 'ses-a' : 'ses-b';
    expect(pod.labels['switchyard.dev/state']).toBe('claimed');
    expect(pod.annotations['switchyard.dev/session-id']).toBe(winnerSession);
    expect(pod.annotations['switchyard.dev/engine-id']).toBe(ra ? 'host-a:1:1:aa' : 'host-b:2:2:bb');
    // The loser re-read the pod and saw it claimed: a lost race, not an error.
    expect(a.stats().lostRaces + b.stats().lostRaces).toBe(1);
    expect(a.stats().warmClaims + b.stats().warmClaims).toBe(1);
  });

  it('many claimers, fewer pods: every pod goes to exactly one session', async () => {
    const client = new FakeKubeClient();
    for (let i = 0; i < 3; i++) await warmPod(client, `sy-s-${i}`, 'host-a:1:1:aa');
    const engines = Array.from({ length: 6 }, (_, i) => engine(client, `host-${i}:${i + 1}:1:x`));
    const results = await Promise.all(engines.map((e, i) => e.claim(`ses-${i}`, 0)));

    const won = results.filter((r) => r !== undefined).map((r) => r.info.name);
    expect(won.sort()).toEqual(['sy-s-0', 'sy-s-1', 'sy-s-2']);
    const sessions = [...client.pods.values()].map((p) => p.annotations['switchyard.dev/session-id']);
    expect(new Set(sessions).size).toBe(3);
  });

  it('a version moved by the kubelet (a status update) is re-read and claimed, not given up', async () => {
    const client = new FakeKubeClient();
    const pod = await warmPod(client, 'sy-s-warm', 'host-b:2:2:bb');
    const a = engine(client, 'host-a:1:1:aa');
    const original = client.listPods.bind(client);
    client.listPods = async (selector) => {
      const pods = await original(selector);
      client.kubeletUpdate('sy-s-warm'); // between the list and the claim
      return pods;
    };
    const claimed = await a.claim('ses-a', 0);

    expect(claimed?.info.name).toBe('sy-s-warm');
    expect(claimed?.fromOtherEngine).toBe(true);
    const claims = client.callsOf('claim').map((c) => c.detail as { resourceVersion: string; won: boolean });
    expect(claims).toHaveLength(2);
    expect(claims[0]).toMatchObject({ resourceVersion: pod.resourceVersion, won: false });
    expect(claims[1].won).toBe(true);
    expect(a.stats().lostRaces).toBe(0);
  });

  it('never claims a pod of another spec, one being deleted, or one already claimed', async () => {
    const client = new FakeKubeClient();
    await warmPod(client, 'sy-s-other-spec', 'host-b:2:2:bb', 'spec2');
    await warmPod(client, 'sy-s-deleting', 'host-b:2:2:bb');
    client.pods.get('sy-s-deleting')!.deleting = true;
    await warmPod(client, 'sy-s-claimed', 'host-b:2:2:bb');
    client.pods.get('sy-s-claimed')!.labels['switchyard.dev/state'] = 'claimed';
    await warmPod(client, 'sy-s-crashing', 'host-b:2:2:bb');
    client.pods.get('sy-s-crashing')!.containers[0].state = 'waiting';

    expect(await engine(client, 'host-a:1:1:aa').claim('ses-a', 0)).toBeUndefined();
    expect(client.callsOf('claim')).toHaveLength(0);
  });

  it('marks what it starts warm only after the runner answered, and a claim takes its own pods first', async () => {
    const client = new FakeKubeClient();
    await warmPod(client, 'sy-s-other', 'host-b:2:2:bb');
    const a = engine(client, 'host-a:1:1:aa');
    // A warm pod of its own, known from a reconcile (the fake has no streams: nothing can be started here).
    await warmPod(client, 'sy-s-own', 'host-a:1:1:aa');
    await a.reconcile();
    expect(a.stats().warm).toBe(1);

    const claimed = await a.claim('ses-a', 0);
    expect(claimed?.info.name).toBe('sy-s-own');
    expect(claimed?.fromOtherEngine).toBe(false);
    expect(client.callsOf('listPods').filter((c) => String(c.detail).includes('state=warm'))).toHaveLength(1);
  });

  it('deletes its warm pods at shutdown only at the version seen: a pod claimed meanwhile survives', async () => {
    const client = new FakeKubeClient();
    await warmPod(client, 'sy-s-1', 'host-a:1:1:aa');
    await warmPod(client, 'sy-s-2', 'host-a:1:1:aa');
    const a = engine(client, 'host-a:1:1:aa');
    const original = client.listPods.bind(client);
    client.listPods = async (selector) => {
      const pods = await original(selector);
      // Another engine claims sy-s-2 after the list, before the delete (it keeps our engine label until then).
      await client.claim('sy-s-2', client.pods.get('sy-s-2')!.resourceVersion, {
        'switchyard.dev/state': 'claimed',
      });
      return pods;
    };
    await a.deleteWarm();

    expect(client.pods.has('sy-s-1')).toBe(false);
    expect(client.pods.has('sy-s-2')).toBe(true);
    expect(
      client.callsOf('deletePod').every((c) => (c.detail as { precondition?: unknown }).precondition),
    ).toBe(true);
  });
});

describe('WarmPods when the cluster cannot run its pods', () => {
  it('a claim waiting for a starting pod that cannot start fails with the cluster’s reason at once', async () => {
    // Pods stay Pending, unbound: a cluster without a scheduler, and no node named.
    class Unscheduled extends FakeKubeClient {
      override async createPod(manifest: PodManifest): Promise<PodInfo> {
        const pod = await super.createPod(manifest);
        const { nodeName: _none, ...stuck } = { ...pod, phase: 'Pending', containers: [] };
        this.pods.set(pod.name, stuck);
        return stuck;
      }
    }
    const client = new Unscheduled();
    const options = resolveKubernetesOptions({
      image: 'switchyard/sandbox:t1',
      engineId: 'host-a:1:1:aa',
      min: 1,
      max: 2,
      podStartTimeoutMs: 2000,
      reconcileIntervalMs: 60_000,
    });
    const clock = new FakeClock();
    const launcher = new PodLauncher(client, options, clock, logger, async (ms) => {
      clock.t += ms;
    });
    const pool = new WarmPods(
      client,
      launcher,
      options,
      'switchyard/sandbox:t1',
      options.limits.pooled,
      SPEC,
      clock,
      logger,
    );
    pool.start();
    const started = Date.now();
    // The claim's own deadline is far off: only the failed start can end its wait this soon.
    const err = await pool.claim('ses-a', clock.t + 3_600_000).catch((e: unknown) => e);
    pool.close();
    expect(err).toBeInstanceOf(KubernetesUnavailableError);
    expect(err).toMatchObject({ code: 'POD_START_TIMEOUT' });
    expect((err as Error).message).toContain('no scheduler bound it to a node');
    expect(Date.now() - started).toBeLessThan(5000);
    expect(pool.stats()).toMatchObject({ consecutiveStartFailures: 1, warm: 0 });
  });
});

describe('WarmPods: a target that follows the claims, and bounded parallel starts', () => {
  /** Starts pods in the fake cluster when the test says so (or at once), counting how many run together. */
  class FakeLauncher {
    running = 0;
    mostRunning = 0;
    private readonly gate: Array<() => void> = [];

    constructor(
      private readonly client: FakeKubeClient,
      private readonly clock: FakeClock,
      public instant = true,
    ) {}

    async launch(manifest: PodManifest): Promise<LaunchedPod> {
      this.running++;
      this.mostRunning = Math.max(this.mostRunning, this.running);
      await new Promise<void>((resolve) => (this.instant ? setImmediate(resolve) : this.gate.push(resolve)));
      this.clock.t += 100; // a pod start takes time
      const info = await this.client.createPod(manifest);
      this.running--;
      return {
        info,
        runner: { hello: { pid: 7, protocol: 1 }, close: () => undefined } as unknown as PodRunner,
      };
    }

    async remove(): Promise<void> {}

    /** Starts waiting for `finishStarts`. */
    get waiting(): number {
      return this.gate.length;
    }

    finishStarts(): number {
      const n = this.gate.length;
      for (const go of this.gate.splice(0)) go();
      return n;
    }
  }

  const eventually = async (check: () => boolean, withinMs = 3000) => {
    const deadline = Date.now() + withinMs;
    while (!check()) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 2));
    }
  };

  const make = (instant = true) => {
    const client = new FakeKubeClient();
    const clock = new FakeClock(1_000_000);
    const options = resolveKubernetesOptions({
      image: 'switchyard/sandbox:t1',
      engineId: 'host-a:1:1:aa',
      min: 2,
      max: 16,
      starts: 3,
      demandWindowMs: 60_000,
    });
    const launcher = new FakeLauncher(client, clock, instant);
    const pool = new WarmPods(
      client,
      launcher as unknown as PodLauncher,
      options,
      'switchyard/sandbox:t1',
      options.limits.pooled,
      SPEC,
      clock,
      logger,
    );
    return { client, clock, launcher, pool };
  };
  const burst = (pool: WarmPods, n: number, clock: FakeClock) =>
    Promise.all(Array.from({ length: n }, (_, i) => pool.claim(`ses-${clock.t}-${i}`, clock.t)));

  it('after a burst of claims keeps the floor plus the burst, so the next burst like it is warm', async () => {
    const { clock, pool } = make();
    await pool.reconcile();
    await eventually(() => pool.stats().warm === 2);
    // 6 at once, 2 warm: the other 4 get no pod (their sessions start their own).
    const first = await burst(pool, 6, clock);
    expect(first.filter((c) => c !== undefined)).toHaveLength(2);
    expect(pool.stats()).toMatchObject({ warmClaims: 2, min: 2, target: 8 });
    await eventually(() => pool.stats().warm === 8);
    const second = await burst(pool, 6, clock);
    expect(second.every((c) => c !== undefined)).toBe(true);
    expect(pool.stats()).toMatchObject({ warmClaims: 8, waitedClaims: 0 });
  });

  it('starts at most `starts` pods at once', async () => {
    const { launcher, pool } = make(false);
    await pool.reconcile();
    await eventually(() => launcher.waiting === 2);
    expect(launcher.finishStarts()).toBe(2);
    await eventually(() => pool.stats().warm === 2);
    await burst(pool, 4, new FakeClock(0)); // 2 warm claims, 2 without a pod: target 6, 6 to start
    await eventually(() => launcher.waiting === 3);
    expect(pool.stats()).toMatchObject({ target: 6, starting: 3 });
    expect(launcher.finishStarts()).toBe(3);
    await eventually(() => launcher.waiting === 3);
    expect(launcher.finishStarts()).toBe(3);
    await eventually(() => pool.stats().warm === 6);
    expect(launcher.mostRunning).toBe(3);
  });

  it('deletes the warm pods above the target once the burst left the window', async () => {
    const { client, clock, pool } = make();
    await pool.reconcile();
    await eventually(() => pool.stats().warm === 2);
    await burst(pool, 4, clock);
    await eventually(() => pool.stats().warm === 6);
    clock.t += 60_001;
    await pool.reconcile();
    expect(pool.stats()).toMatchObject({ target: 2, warm: 2 });
    const warmLeft = () =>
      [...client.pods.values()].filter((p) => p.labels['switchyard.dev/state'] === 'warm').length;
    await eventually(() => warmLeft() === 2);
    expect(
      client.callsOf('deletePod').every((c) => (c.detail as { precondition?: unknown }).precondition),
    ).toBe(true);
  });
});
