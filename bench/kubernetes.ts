/**
 * The Kubernetes backend (`SWITCHYARD_SANDBOX_BACKEND=kubernetes`) against raw `@kubernetes/client-node` baselines and
 * against the Docker backend, all measured in one run of real engines (`createEngineApp`, as `run.ts` does) on the
 * test cluster (`bash scripts/k8s.sh start`: KUBECONFIG, default `.runtime/k8s/kubeconfig`; namespace
 * SWITCHYARD_K8S_NAMESPACE, default `switchyard-test`) and the local Docker engine. Called by `run.ts`
 * (`BENCH_ONLY=kubernetes`); needs root for the pods' cgroups.
 *
 * 1. python `print(1)` on a warm session pod, the pooled tier through the API: Kubernetes vs the Docker backend in
 *    the same run, samples interleaved (A, B, A, B; `BENCH_K8S_API_RUNS` each, default 100), median, p90 and p99, the
 *    load average before and after, and the CPU the bench process spent per action (both engines and their HTTP
 *    client run in it; each sample's `process.cpuUsage()`). Target: Kubernetes <= 1.5x Docker at the median. Then
 *    where the time goes, in one loop (interleaved, the order rotating): the API again, a raw client-node `Exec` of
 *    `python3 -c 'print(1)'` in the same pod (container `runner`; the pod found from the action's
 *    `sandbox.containerId`; target API <= 1.3x it), a raw `docker exec` into the Docker engine's container, the
 *    tier's run alone (`KubernetesPooledTier.run`) and one workspace snapshot (the API takes one before and one after
 *    every code action to find the files it changed: on Kubernetes the pod's runner walks the workspace itself, and
 *    the one after a run comes with the run's exit, so an action makes one snapshot request).
 * 2. Pod claims, one at a time, each with the pool full (the bench waits for the refill before the next session, so
 *    the arrival rate never outruns it). The API opens a session's workspace when it creates the session, and on
 *    Kubernetes that is the session pod's: a warm claim is `POST /v1/sessions`, timed through the API, with the claim
 *    inside it as the library times it (`KubernetesSandbox.stats().lastClaimMs`: the optimistic label patch, attach,
 *    runner ping). Also the session's first print(1) after it, and the pool's refill. Cold claims (no warm
 *    pod: one started for the session) on a second engine without a pool.
 * 3. Memory of an idle warm pod, from the pod's memory cgroup on the node (this host; cgroup v1 or v2): usage, RSS,
 *    and the working set (usage - inactive file) the kubelet reports. The kubelet's summary API is not used: the test
 *    cluster's API server does not proxy to a node on loopback.
 * 4. python `print(1)` on the one-off tier through the API vs raw client-node with the one-off pod's own manifest
 *    (image, limits, security settings): create -> Running -> exec `python3 -c 'print(1)'` -> delete requested (what
 *    the tier does, with exec for its runner), and the pod as a job (its command is the code) create -> Succeeded ->
 *    log -> delete requested. Polls every 40 ms. Interleaved, each sample after the previous pod is gone and a random
 *    0-1 s pause (the kubelet's 1 s relist quantises pod starts); no target (the tier also copies the workspace in and
 *    back); its parts from the library.
 * 5. The workspace copies of the one-off tier and checkpoints, in the library: `tarOut` / `tarIn` (replace) of a
 *    10 MiB, 1000-file workspace. No baseline.
 *
 * The bench's engines give their pods a node selector the node matches anyway (`kubernetes.io/hostname`,
 * `kubernetes.io/os`): it changes their spec hash, so engines of other runs in the namespace (tests) neither claim
 * this bench's warm pods nor hand it theirs, and the pool-less engine never claims the main engine's.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import {
  buildChildEnv,
  K8S_LABELS,
  KubernetesPooledTier,
  KubernetesSandbox,
  labelValue,
  oneOffPodManifest,
  resolveSandboxOptions,
  type TierJob,
} from '@switchyard/sandbox';
import Dockerode from 'dockerode';
import {
  type BenchEngine as Engine,
  dockerExecPrint1,
  sleep,
  startEngine,
  timed,
  until,
} from './engine-client';
import { SessionWorkspaces } from '../apps/engine/src/session/workspaces/session-workspaces';
import { mean, median, ms, pct } from './stats';

const REPO = path.resolve(__dirname, '..', '..');
const MiB = 2 ** 20;
const RUNNER = 'runner';
const PRINT1 = ['python3', '-c', 'print(1)'];

export interface KubernetesBenchOptions {
  /** Samples per side of where the time goes on a warm pod (five sides). Default `BENCH_RUNS` or 40. */
  runs?: number;
  /** Samples per side of print(1) through the API, Kubernetes vs Docker. Default `BENCH_K8S_API_RUNS` or 100. */
  apiRuns?: number;
  /**
   * Warm claims, one at a time, each after the pool's refill (enough for a p99 that is not just the maximum). Default
   * `BENCH_K8S_CLAIMS` or 100.
   */
  claims?: number;
  /** Cold claims (a pod started for the session). Default `BENCH_K8S_COLD_CLAIMS` or 5. */
  coldClaims?: number;
  /** Samples per side of the one-off tier (each a pod lifecycle). Default `BENCH_K8S_ONEOFF_RUNS` or 10. */
  oneOffRuns?: number;
}

const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
const verdict = (ok: boolean) => (ok ? 'OK' : 'MISSED');
const line = (label: string, xs: number[], extra = ''): string =>
  `  ${label.padEnd(50)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (n=${xs.length})${extra}`;

/** The node refused a raw pod at admission (`OutOfcpu`, `OutOfmemory`…). */
class NodeRejected extends Error {}

/** A raw client-node exec of `command` in the pod's runner container; throws unless it printed 1 and succeeded. */
function rawExec(exec: k8s.Exec, namespace: string, pod: string, command: string[]): Promise<void> {
  let out = '';
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      out += chunk.toString('utf8');
      done();
    },
  });
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench: raw exec in ${pod} timed out`)), 30_000);
    exec
      .exec(namespace, pod, RUNNER, command, stdout, null, null, false, (status) => {
        clearTimeout(timer);
        if (status.status === 'Success' && out === '1\n') resolve();
        else reject(new Error(`bench: raw exec in ${pod}: ${status.message ?? status.status} ${out}`));
      })
      .catch((err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      });
  });
}

/** A pod's memory cgroup on this host (v1 or v2, cgroupfs or systemd driver), or undefined. */
function podCgroup(uid: string): { dir: string; v2: boolean } | undefined {
  const u = uid.replace(/-/g, '_');
  for (const [root, v2] of [
    ['/sys/fs/cgroup/memory', false],
    ['/sys/fs/cgroup', true],
  ] as const) {
    for (const rel of [
      `kubepods/pod${uid}`,
      `kubepods/burstable/pod${uid}`,
      `kubepods/besteffort/pod${uid}`,
      `kubepods.slice/kubepods-pod${u}.slice`,
      `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${u}.slice`,
      `kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${u}.slice`,
    ]) {
      const dir = path.join(root, rel);
      if (fs.existsSync(path.join(dir, v2 ? 'memory.current' : 'memory.usage_in_bytes'))) return { dir, v2 };
    }
  }
  return undefined;
}

/** Usage, RSS (anon) and working set (usage - inactive file, as the kubelet counts it) of a pod's cgroup, in bytes. */
function podMemory(uid: string): { usage: number; rss: number; workingSet: number; dir: string } | undefined {
  const cg = podCgroup(uid);
  if (!cg) return undefined;
  const stat = Object.fromEntries(
    fs
      .readFileSync(path.join(cg.dir, 'memory.stat'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' ')),
  ) as Record<string, string>;
  const usage = Number(
    fs.readFileSync(path.join(cg.dir, cg.v2 ? 'memory.current' : 'memory.usage_in_bytes'), 'utf8'),
  );
  const rss = Number(cg.v2 ? stat.anon : stat.total_rss);
  const inactiveFile = Number(cg.v2 ? stat.inactive_file : stat.total_inactive_file);
  return { usage, rss, workingSet: Math.max(0, usage - inactiveFile), dir: cg.dir };
}

export async function benchKubernetes(options: KubernetesBenchOptions = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  const apiRuns = options.apiRuns ?? Number(process.env.BENCH_K8S_API_RUNS ?? 100);
  const claimRuns = options.claims ?? Number(process.env.BENCH_K8S_CLAIMS ?? 100);
  const coldRuns = options.coldClaims ?? Number(process.env.BENCH_K8S_COLD_CLAIMS ?? 5);
  const oneOffRuns = options.oneOffRuns ?? Number(process.env.BENCH_K8S_ONEOFF_RUNS ?? 10);
  const out = (text = '') => console.log(text);

  const kubeconfig = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
  const namespace = process.env.SWITCHYARD_K8S_NAMESPACE ?? 'switchyard-test';
  if (!fs.existsSync(kubeconfig)) {
    throw new Error(
      `bench: no kubeconfig at ${kubeconfig}: start the test cluster (\`bash scripts/k8s.sh start\`)`,
    );
  }
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const podsLabelled = async (selector: string) =>
    (await core.listNamespacedPod(namespace, undefined, undefined, undefined, undefined, selector)).body
      .items;
  const nodes = await core.listNode().catch((err: Error) => {
    throw new Error(`bench: the cluster does not answer (${err.message}): run \`bash scripts/k8s.sh start\``);
  });
  const node = nodes.body.items[0]?.metadata?.name;
  if (!node) throw new Error('bench: the cluster has no node');
  const k8sEnv = (selector: string): Record<string, string> => ({
    SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
    KUBECONFIG: kubeconfig,
    SWITCHYARD_K8S_NAMESPACE: namespace,
    SWITCHYARD_K8S_NODE_SELECTOR: selector,
  });

  const dirs = ['k8s', 'k8s-cold', 'docker'].map((n) =>
    fs.mkdtempSync(path.join(os.tmpdir(), `switchyard-bench-${n}-`)),
  );
  const engines: Engine[] = [];
  try {
    // The main engine (default pool), one without a pool (cold claims, the one-off tier), one on Docker.
    const kube = await startEngine(dirs[0], k8sEnv(`kubernetes.io/hostname=${node}`));
    engines.push(kube);
    const cold = await startEngine(dirs[1], {
      ...k8sEnv('kubernetes.io/os=linux'),
      SWITCHYARD_POOL_MIN: '0',
    });
    engines.push(cold);
    const dockerEngine = await startEngine(dirs[2], { SWITCHYARD_POOL_MIN: '1' });
    engines.push(dockerEngine);
    for (const [name, engine, tiers] of [
      ['Kubernetes', kube, ['pooled', 'container']],
      ['Kubernetes (no pool)', cold, ['pooled', 'container']],
      ['Docker', dockerEngine, ['pooled']],
    ] as const) {
      for (const tier of tiers) {
        const h = await engine.health(tier);
        if (!h.available) {
          throw new Error(
            `bench: the ${name} engine's ${tier} tier is unavailable (${h.reason ?? 'unknown'})`,
          );
        }
      }
    }
    const sb = kube.app.get(KubernetesSandbox, { strict: false });
    const coldSb = cold.app.get(KubernetesSandbox, { strict: false });
    const min = sb.options.min;
    const warmStats = () => sb.warm!.stats();
    const poolFull = () => warmStats().warm >= min && warmStats().starting === 0;
    await until(poolFull, 120_000, 'a full warm pool', 10);
    out(
      `\nKubernetes backend — node ${node}, namespace ${namespace}, image ${sb.options.image}, pool min ${min}`,
    );

    // 3 (first: nothing ran yet). Idle warm pod memory from the pods' cgroups.
    await sleep(1000); // start-up allocations settle
    const warmPods = await podsLabelled(
      [
        `${K8S_LABELS.engine}=${labelValue(sb.options.engineId)}`,
        `${K8S_LABELS.tier}=session`,
        `${K8S_LABELS.state}=warm`,
      ].join(','),
    );
    const mems = warmPods.flatMap((p) => {
      const m = podMemory(p.metadata!.uid!);
      return m ? [m] : [];
    });
    out(
      `idle warm pod memory (the pod's memory cgroup on the node, ${mems.length} pods; cgroup dir e.g. ${mems[0]?.dir ?? 'n/a'})`,
    );
    if (mems.length === 0) {
      out("  n/a: the pods' cgroups are not on this host (a remote node)");
    } else {
      const mib = (xs: number[]) =>
        `${(median(xs) / MiB).toFixed(1)} MiB (${xs.map((x) => (x / MiB).toFixed(1)).join(', ')})`;
      out(`  usage        median ${mib(mems.map((m) => m.usage))}`);
      out(`  rss          median ${mib(mems.map((m) => m.rss))}`);
      out(
        `  working set  median ${mib(mems.map((m) => m.workingSet))}   (usage - inactive file, what the kubelet reports)`,
      );
    }

    // 1. print(1) on a warm pod through the API, Kubernetes vs Docker, samples interleaved (A, B, A, B), with the
    // CPU the bench process (both engines and their client, in-process) spent on each sample.
    const sid = await kube.newSession();
    const pod = await kube.sandboxOf(sid, await kube.print1(sid, 'pooled'));
    const dsid = await dockerEngine.newSession();
    const container = await dockerEngine.sandboxOf(dsid, await dockerEngine.print1(dsid, 'pooled'));
    type Side = { name: string; samples: number[]; cpu: number[]; fn: () => Promise<unknown> };
    const sideOf = (name: string, fn: () => Promise<unknown>): Side => ({ name, samples: [], cpu: [], fn });
    const sample = async (s: Side) => {
      const cpu0 = process.cpuUsage();
      s.samples.push(await timed(s.fn));
      const cpu = process.cpuUsage(cpu0);
      s.cpu.push((cpu.user + cpu.system) / 1000);
    };
    const ab = [
      sideOf('api-k8s', () => kube.print1(sid, 'pooled')),
      sideOf('api-docker', () => dockerEngine.print1(dsid, 'pooled')),
    ];
    for (let i = 0; i < 5; i++) for (const s of ab) await s.fn();
    const loadBefore = os.loadavg();
    for (let i = 0; i < apiRuns; i++)
      for (let k = 0; k < ab.length; k++) await sample(ab[(i + k) % ab.length]);
    const loadAfter = os.loadavg();
    const [apiK8s, apiDocker] = ab.map((s) => s.samples);
    const apiRatio = median(apiK8s) / median(apiDocker);
    const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
    out(
      `python print(1), pooled tier through the API on a warm pod, Kubernetes vs Docker, interleaved A,B,A,B`,
    );
    out(`  load average before ${load(loadBefore)}, after ${load(loadAfter)} (${os.cpus().length} cores)`);
    out(line('API pooled tier, Kubernetes', apiK8s));
    out(line('API pooled tier, Docker', apiDocker));
    out(
      `  ratio API Kubernetes / API Docker = ${apiRatio.toFixed(2)}x at the median, ` +
        `${ratio(pct(apiK8s, 90), pct(apiDocker, 90))} at p90, ${ratio(pct(apiK8s, 99), pct(apiDocker, 99))} at p99 ` +
        `(target <= 1.50 at the median) ${verdict(apiRatio <= 1.5)}`,
    );
    out(
      `  CPU of the bench process per action (engine + its HTTP client, in-process): Kubernetes median ` +
        `${ms(median(ab[0].cpu))}, mean ${ms(mean(ab[0].cpu))}; Docker median ${ms(median(ab[1].cpu))}, ` +
        `mean ${ms(mean(ab[1].cpu))}`,
    );

    // Where the API's time goes on Kubernetes, and the raw baselines: a raw client-node exec in the same pod, a raw
    // docker exec into the Docker engine's container, the tier's run alone (library) and one workspace snapshot (the
    // API takes one before and one after every code action to find the files it changed; on Kubernetes the pod's
    // runner walks the workspace itself, and the one after a run comes with the run's exit). Interleaved, the order
    // rotating.
    const exec = new k8s.Exec(kc);
    const docker = new Dockerode();
    const tier = kube.app.get(KubernetesPooledTier, { strict: false });
    const workspaces = kube.app.get(SessionWorkspaces, { strict: false });
    const job: TierJob = {
      actionId: 'bench-k8s-tier',
      sessionId: sid,
      language: 'python',
      code: 'print(1)',
      env: buildChildEnv({}, 'python'),
      timeoutMs: 30_000,
      workspaceDir: '/unused',
      output: resolveSandboxOptions({}).output,
    };
    const sides: Side[] = [
      sideOf('api-k8s', () => kube.print1(sid, 'pooled')),
      sideOf('raw-exec', () => rawExec(exec, namespace, pod, PRINT1)),
      sideOf('raw-docker', () => dockerExecPrint1(docker, container)),
      sideOf('tier', async () => {
        const r = await tier.run(job);
        if (r.stdout !== '1\n' || r.containerId !== pod)
          throw new Error(`bench: tier run ${JSON.stringify(r)}`);
      }),
      sideOf('snapshot', () => workspaces.snapshot(sid)),
    ];
    for (let i = 0; i < 3; i++) for (const s of sides) await s.fn();
    for (let i = 0; i < runs; i++)
      for (let k = 0; k < sides.length; k++) await sample(sides[(i + k) % sides.length]);
    await kube.endSession(sid);
    await dockerEngine.endSession(dsid);
    const [apiK8s2, rawK8s, rawDocker, tierRuns, snapshots] = sides.map((s) => s.samples);
    const k8sRatio = median(apiK8s2) / median(rawK8s);
    out(`  where the API's time goes on Kubernetes (pod ${pod}, one loop, interleaved)`);
    out(line('API pooled tier, Kubernetes', apiK8s2));
    out(line('raw client-node Exec in the same pod', rawK8s));
    out(line('raw docker exec (dockerode), Docker engine container', rawDocker));
    out(
      line(
        'KubernetesPooledTier.run alone (library)',
        tierRuns,
        `  ${ratio(median(tierRuns), median(rawK8s))} raw exec`,
      ),
    );
    out(line("one workspace snapshot request (the runner's walk)", snapshots));
    out(
      `  API - 1 snapshot request - tier run = ${ms(median(apiK8s2) - median(snapshots) - median(tierRuns))} ` +
        '(HTTP, routing, recording, by medians: a code action asks for the snapshot before its run; the one after ' +
        "comes with the run's exit)",
    );
    out(
      `  ratio API Kubernetes / raw client-node exec = ${k8sRatio.toFixed(2)}x (target <= 1.30) ${verdict(k8sRatio <= 1.3)}`,
    );
    out(`  ratio raw client-node exec / raw docker exec = ${ratio(median(rawK8s), median(rawDocker))}`);

    // 2. Warm claims, one at a time with a full pool. The API opens a session's workspace when it creates the session,
    // and on Kubernetes the workspace is the session pod's: `POST /v1/sessions` is where the claim happens.
    const creates: number[] = [];
    const claims: number[] = [];
    const firsts: number[] = [];
    const refills: number[] = [];
    const before = warmStats();
    (globalThis as { gc?: () => void }).gc?.();
    for (let i = 0; i < claimRuns; i++) {
      await until(poolFull, 60_000, 'the pool to refill', 10);
      await sleep(20);
      const t0 = performance.now();
      const s = await kube.newSession();
      creates.push(performance.now() - t0);
      claims.push(sb.stats().lastClaimMs!);
      firsts.push(await timed(() => kube.print1(s, 'pooled')));
      await kube.endSession(s);
      await until(poolFull, 60_000, 'the pool to refill', 10);
      refills.push(performance.now() - t0);
    }
    const after = warmStats();
    const warmClaims = after.warmClaims - before.warmClaims;
    const others = after.otherEngineClaims - before.otherEngineClaims;
    out(`warm pod claims (${claimRuns}, one at a time, each with the pool full again)`);
    out(line('session create with its pod claimed (API)', creates));
    out(line('the claim inside it (library: patch+attach+ping)', claims));
    out(line("the session's first print(1) then (API)", firsts));
    out(line(`pool refill after a claim (to min=${min})`, refills));
    out(
      `  ${warmClaims} of ${claimRuns} claims took a warm pod${others ? ` (${others} another engine's)` : ''}; ` +
        `lost races ${after.lostRaces - before.lostRaces}`,
    );

    // Cold claims: no warm pod, a pod started for the session (the engine without a pool).
    const colds: number[] = [];
    const coldClaims: number[] = [];
    for (let i = 0; i < coldRuns; i++) {
      const t0 = performance.now();
      const s = await cold.newSession();
      colds.push(performance.now() - t0);
      coldClaims.push(coldSb.stats().lastClaimMs!);
      await cold.endSession(s);
    }
    out(line('cold: session create, no warm pod (API)', colds));
    out(line('cold: the claim inside it (create->Running->ping)', coldClaims));

    // 4. One-off tier through the API vs a raw pod lifecycle with client-node, interleaved.
    const osid = await cold.newSession();
    await cold.print1(osid, 'pooled'); // its session pod (cold) is there before the samples
    const o = coldSb.options;
    const oneOffsGone = async () =>
      (await podsLabelled(`${K8S_LABELS.engine}=${labelValue(o.engineId)},${K8S_LABELS.tier}=container`))
        .length === 0;
    let rawCount = 0;
    /** The one-off pod's manifest (image, limits, security settings, labels of the engine), under a raw name. */
    const rawManifest = () => {
      const name = `sy-c-bench-raw-${process.pid}-${rawCount++}`;
      const manifest = oneOffPodManifest({
        name,
        image: o.image!,
        engineId: o.engineId,
        limits: o.limits.container,
        options: o,
        sessionId: osid,
        actionId: name,
        activeDeadlineSeconds: 600,
      });
      return { name, manifest };
    };
    /** Polls (every 40 ms, as the engine's first poll) until the pod's phase is `phase`. */
    const waitPhase = async (name: string, phase: 'Running' | 'Succeeded') => {
      for (;;) {
        const status = (await core.readNamespacedPod(name, namespace)).body.status;
        const running = status?.containerStatuses?.[0]?.state?.running !== undefined;
        if (status?.phase === phase && (phase !== 'Running' || running)) return;
        if (status?.phase === 'Failed' && /^OutOf/.test(status.reason ?? '')) {
          // The node refused it (another workload's pods hold its CPU or memory): not a sample, tried again.
          await core.deleteNamespacedPod(name, namespace, undefined, undefined, 1);
          throw new NodeRejected(`${name}: ${status.reason}`);
        }
        if (status?.phase === 'Failed' || (phase === 'Running' && status?.phase === 'Succeeded')) {
          throw new Error(
            `bench: raw pod ${name} ended: ${status?.phase} ${status?.reason ?? ''} ${status?.message ?? ''}`,
          );
        }
        await sleep(40);
      }
    };
    // The pod as a job: its command is the code; done when the kubelet reports it Succeeded; stdout from its log.
    const rawJobPod = async () => {
      const { name, manifest } = rawManifest();
      const [runner] = manifest.spec.containers;
      const body = {
        ...manifest,
        spec: {
          ...manifest.spec,
          containers: [{ ...runner, command: ['/usr/bin/python3', '-c', 'print(1)'], stdin: false }],
        },
      } as unknown as k8s.V1Pod;
      await core.createNamespacedPod(namespace, body);
      await waitPhase(name, 'Succeeded');
      // client-node parses the body as JSON when it can: "1\n" comes back as the number 1.
      const log = String((await core.readNamespacedPodLog(name, namespace, RUNNER)).body).trim();
      await core.deleteNamespacedPod(name, namespace, undefined, undefined, 1);
      if (log !== '1') throw new Error(`bench: raw one-off pod printed ${JSON.stringify(log)}`);
    };
    // The pod as the tier uses it: the same manifest (its runner waits for a wake byte), Running, then the code by
    // exec.
    const rawExecPod = async () => {
      const { name, manifest } = rawManifest();
      await core.createNamespacedPod(namespace, manifest);
      await waitPhase(name, 'Running');
      await rawExec(exec, namespace, name, PRINT1);
      await core.deleteNamespacedPod(name, namespace, undefined, undefined, 1);
    };
    const parts: Array<NonNullable<typeof coldSb.oneOff.last>> = [];
    const oneOffSides: Side[] = [
      sideOf('api', async () => {
        await cold.print1(osid, 'container');
        parts.push({ ...coldSb.oneOff.last! });
      }),
      sideOf('raw-exec', rawExecPod),
      sideOf('raw-job', rawJobPod),
    ];
    for (const side of oneOffSides) {
      await side.fn();
      await until(oneOffsGone, 60_000, 'the one-off pods to be gone', 10);
    }
    parts.length = 0;
    const rejected: string[] = [];
    for (let i = 0; i < oneOffRuns; i++) {
      for (let k = 0; k < oneOffSides.length; k++) {
        const side = oneOffSides[(i + k) % oneOffSides.length];
        for (;;) {
          // The kubelet notices a started container at its next relist (every 1 s): a pod reads `Running` 1 or 2 s
          // after its creation depending on where in that second it started. A random pause decorrelates the sides
          // from that tick (a fixed loop would give one side a lucky phase every time).
          await sleep(Math.random() * 1000);
          try {
            side.samples.push(await timed(side.fn));
            break;
          } catch (err) {
            if (!(err instanceof NodeRejected)) throw err;
            rejected.push(err.message);
          } finally {
            await until(oneOffsGone, 60_000, 'the one-off pods to be gone', 10);
          }
        }
      }
    }
    const [apiOneOff, rawExecPods, rawJobPods] = oneOffSides.map((s) => s.samples);
    const part = (key: keyof (typeof parts)[number]) => median(parts.map((p) => p[key])).toFixed(0);
    out('python print(1), one-off tier, interleaved (each after the previous pod is gone)');
    out(line('raw client-node: create->Running->exec->delete', rawExecPods));
    out(line('raw client-node: pod runs it, ->Succeeded->log', rawJobPods));
    out(line('API one-off tier, Kubernetes', apiOneOff));
    out(
      `  ratio API one-off / raw create->Running->exec->delete = ${ratio(median(apiOneOff), median(rawExecPods))}`,
    );
    out(
      `  ratio API one-off / raw pod as a job                  = ${ratio(median(apiOneOff), median(rawJobPods))}`,
    );
    if (rejected.length > 0) {
      out(
        `  raw pods refused by the node and tried again (not samples): ${rejected.length} (${rejected.join('; ')})`,
      );
    }
    out(
      `  its parts (library, medians, ms): launch ${part('launchMs')} (copy out ${part('copyOutMs')} meanwhile), ` +
        `copy in ${part('copyInMs')}, run ${part('runMs')}, copy back ${part('copyBackMs')}, delete ${part('deleteMs')}; ` +
        `the tier's total ${median(parts.map((p) => p.totalMs + p.deleteMs)).toFixed(0)} (the rest of the API's time: ` +
        'its two workspace snapshots, HTTP, recording)',
    );

    // 5. Workspace copies (library), a 10 MiB / 1000-file workspace in the one-off session's pod.
    const made = await coldSb.sessions.runInPod(osid, {
      language: 'bash',
      code: 'mkdir -p d; for i in $(seq 1 1000); do head -c 10240 /dev/urandom > d/f$i; done',
      timeoutMs: 60_000,
      capBytes: 4096,
    });
    if (made.exitCode !== 0)
      throw new Error(`bench: could not fill the workspace: ${made.stderr.toString()}`);
    const tarOuts: number[] = [];
    const tarIns: number[] = [];
    let tar: Buffer = Buffer.alloc(0);
    for (let i = 0; i < 5; i++) {
      tarOuts.push(await timed(async () => (tar = await coldSb.sessions.tarOut(osid))));
      tarIns.push(await timed(() => coldSb.sessions.tarIn(osid, tar, { replace: true })));
    }
    await cold.endSession(osid);
    out(`workspace copies of ${(tar.length / MiB).toFixed(1)} MiB in 1000 files (library)`);
    out(line('tarOut', tarOuts));
    out(line('tarIn (replace)', tarIns));
  } finally {
    for (const engine of engines.reverse()) await engine.app.close();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  }
}
