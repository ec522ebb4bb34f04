/**
 * Bursts of new sessions (issue 34, item 1: a warm pool that keeps up), on the Docker backend and, when the test
 * cluster answers (`bash scripts/k8s.sh start`), on the Kubernetes backend, each on a real engine with its default
 * pool settings (`createEngineApp`, as `run.ts` does). Called by `run.ts` (`BENCH_ONLY=bursts`); needs root, Docker
 * and the sandbox image.
 *
 * A sample is one session's create -> first result: `POST /v1/sessions`, then one python `print(1)` action routed to
 * the pooled tier, timed from before the create to the action's answer. Two bursts, each `BENCH_BURST_ROUNDS` times
 * (default 2), the first round on a fresh engine (its pool at rest, at `min`), the next within the pool's demand window
 * of the earlier bursts; each burst begins with no start in flight:
 * - back to back: `BENCH_BURST_SESSIONS` (default 60) sessions one after another, the next created as soon as the
 *   previous one's result is in; each session is ended right after its result, without waiting for the end (the
 *   ends are awaited after the burst);
 * - at once: `BENCH_BURST_TOGETHER` (default 16) sessions created concurrently, each with its print(1).
 * A claim is warm when the container (pod) it took was ready before the claim asked (`warmClaims` of the pool's
 * stats); the rest waited for a start. Printed per burst: warm %, create -> first result p50/p90/p99 and run count,
 * the pool's idle containers when it began, the load average before and after. Baseline in the same run: a raw
 * `docker exec` of print(1) in a running container of the sandbox image (dockerode), `BENCH_BURST_RAW` samples
 * (default 20) right before and right after each burst (not inside it: a burst is back to back by definition).
 * Also where a sample's time went: its `POST /v1/sessions` and its action; and the machine's CPU per session (all of
 * the host's busy time from the burst's start until the pool has refilled, over the sessions): divided by the cores,
 * the shortest average a stream of sessions can reach on this host, whatever the pool does.
 * `BENCH_BURST_K8S=0` skips Kubernetes.
 * Targets (issue 34): >= 90 % warm, p50 <= 60 ms, p99 <= 150 ms.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { KubernetesSandbox, PooledTier } from '@switchyard/sandbox';
import Dockerode from 'dockerode';
import { type BenchEngine, dockerExecPrint1, startEngine, timed, until } from './engine-client';
import { loadAverage, machineCpuMs } from './interleave';
import { median, ms, pct } from './stats';

const REPO = path.resolve(__dirname, '..', '..');

export interface BurstBenchOptions {
  /** Sessions of the back-to-back burst. Default `BENCH_BURST_SESSIONS` or 60. */
  sessions?: number;
  /** Sessions of the burst created at once. Default `BENCH_BURST_TOGETHER` or 16. */
  together?: number;
  /** Rounds of both bursts. Default `BENCH_BURST_ROUNDS` or 2. */
  rounds?: number;
  /** Raw docker exec samples before and after each burst. Default `BENCH_BURST_RAW` or 20. */
  raw?: number;
}

/** One backend's engine, seen by the bench: its claim counters and whether its pool is at rest. */
interface Backend {
  name: string;
  engine: BenchEngine;
  /** Warm claims so far (every sample claims once). */
  warmClaims(): number;
  /** Idle warm containers (pods) now. */
  idle(): number;
  /** Nothing starting, at least the pool's floor warm. */
  settled(): boolean;
}

const verdict = (ok: boolean) => (ok ? 'OK' : 'MISSED');
const line = (label: string, xs: number[]) =>
  `  ${label.padEnd(34)} p50 ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (n=${xs.length})`;

export async function benchBursts(options: BurstBenchOptions = {}): Promise<void> {
  const sessions = options.sessions ?? Number(process.env.BENCH_BURST_SESSIONS ?? 60);
  const together = options.together ?? Number(process.env.BENCH_BURST_TOGETHER ?? 16);
  const rounds = options.rounds ?? Number(process.env.BENCH_BURST_ROUNDS ?? 2);
  const rawRuns = options.raw ?? Number(process.env.BENCH_BURST_RAW ?? 20);
  const docker = new Dockerode();
  const dirs: string[] = [];
  const engines: BenchEngine[] = [];
  const newDir = (name: string) => {
    dirs.push(fs.mkdtempSync(path.join(os.tmpdir(), `switchyard-bench-bursts-${name}-`)));
    return dirs.at(-1)!;
  };
  let raw: Dockerode.Container | undefined;
  try {
    const dockerEngine = await startEngine(newDir('docker'));
    engines.push(dockerEngine);
    const tier = dockerEngine.app.get(PooledTier, { strict: false });
    const backends: Backend[] = [
      {
        name: 'Docker',
        engine: dockerEngine,
        warmClaims: () => tier.stats().warmClaims,
        idle: () => tier.stats().available,
        settled: () => {
          const s = tier.stats();
          return s.available >= s.min && s.size === s.available && s.pending === 0;
        },
      },
    ];
    const kube = process.env.BENCH_BURST_K8S === '0' ? undefined : await kubernetesEngine(newDir('k8s'));
    if (kube) {
      engines.push(kube.engine);
      backends.push(kube);
    } else if (process.env.BENCH_BURST_K8S !== '0') {
      console.log(
        '\nbursts: the test cluster does not answer; Kubernetes skipped (`bash scripts/k8s.sh start`)',
      );
    }
    const image = (
      (await dockerEngine.call('GET', '/health')) as { tiers: { pooled: { details: { image: string } } } }
    ).tiers.pooled.details.image;
    raw = await docker.createContainer({ Image: image, Cmd: ['sleep', 'infinity'], User: '10001' });
    await raw.start();
    const rawExec = () => timed(() => dockerExecPrint1(docker, raw!.id));
    for (let i = 0; i < 3; i++) await rawExec();

    console.log(
      `\nbursts — ${os.cpus().length} cores, ${sessions} sessions back to back and ${together} at once, ` +
        `${rounds} round(s), each sample POST /v1/sessions + one pooled print(1)`,
    );
    for (const backend of backends) {
      await until(backend.settled, 120_000, `${backend.name}: a pool at rest`, 10);
      for (let round = 1; round <= rounds; round++) {
        for (const kind of ['back to back', 'at once'] as const) {
          await until(backend.settled, 120_000, `${backend.name}: no start in flight`, 10);
          const raws: number[] = [];
          for (let i = 0; i < rawRuns; i++) raws.push(await rawExec());
          const loadBefore = loadAverage();
          const idle = backend.idle();
          const before = backend.warmClaims();
          const busyBefore = machineCpuMs().busy;
          const samples =
            kind === 'back to back'
              ? await backToBack(backend.engine, sessions)
              : await atOnce(backend.engine, together);
          const firsts = samples.map((x) => x.ms);
          const warm = backend.warmClaims() - before;
          const loadAfter = loadAverage();
          // The CPU a session costs the machine: its create, action and end, and the refill it causes (awaited).
          await until(backend.settled, 120_000, `${backend.name}: the refill after the burst`, 10);
          const cpuPerSession = (machineCpuMs().busy - busyBefore) / samples.length;
          for (let i = 0; i < rawRuns; i++) raws.push(await rawExec());
          const all = firsts.length;
          const rate = all === 0 ? 0 : warm / all;
          const p50 = median(firsts);
          const p99 = pct(firsts, 99);
          console.log(
            `${backend.name}, round ${round}: ${firsts.length} sessions ${kind} (pool: ${idle} idle when it began)`,
          );
          console.log(line('create -> first result', firsts));
          console.log(
            line(
              '  of which POST /v1/sessions',
              samples.map((x) => x.createMs),
            ),
          );
          console.log(
            line(
              '  of which the print(1) action',
              samples.map((x) => x.ms - x.createMs),
            ),
          );
          console.log(line('raw docker exec print(1)', raws));
          console.log(
            `  warm claims ${warm} of ${all}: ${(rate * 100).toFixed(1)} % (target >= 90 %) ${verdict(rate >= 0.9)}; ` +
              `p50 ${verdict(p50 <= 60)} (<= 60 ms), p99 ${verdict(p99 <= 150)} (<= 150 ms); ` +
              `p50 ${(p50 / median(raws)).toFixed(2)}x raw docker exec`,
          );
          console.log(
            `  machine CPU per session (create, print(1), end, and the refill after): ${cpuPerSession.toFixed(0)} ms; ` +
              `on ${os.cpus().length} cores no stream of sessions averages under ` +
              `${(cpuPerSession / os.cpus().length).toFixed(0)} ms each`,
          );
          console.log(`  load average before ${loadBefore}, after ${loadAfter}`);
        }
      }
      console.log('');
    }
  } finally {
    await raw?.remove({ force: true }).catch(() => undefined);
    for (const engine of engines.reverse()) await engine.app.close();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** One sample: create -> first result, and its two requests' parts. */
interface Sample {
  sid: string;
  ms: number;
  createMs: number;
}

async function sample(engine: BenchEngine): Promise<Sample> {
  const t0 = performance.now();
  const sid = await engine.newSession();
  const createMs = performance.now() - t0;
  await engine.print1(sid, 'pooled');
  return { sid, ms: performance.now() - t0, createMs };
}

/** `n` sessions one after another; each ended, unawaited, right after its first result. */
async function backToBack(engine: BenchEngine, n: number): Promise<Sample[]> {
  const samples: Sample[] = [];
  const ends: Array<Promise<unknown>> = [];
  for (let i = 0; i < n; i++) {
    samples.push(await sample(engine));
    ends.push(engine.endSession(samples[i].sid));
  }
  await Promise.all(ends);
  return samples;
}

/** `n` sessions created at once, each with its print(1); ended after all answered. */
async function atOnce(engine: BenchEngine, n: number): Promise<Sample[]> {
  const samples = await Promise.all(Array.from({ length: n }, () => sample(engine)));
  await Promise.all(samples.map((d) => engine.endSession(d.sid)));
  return samples;
}

/** An engine on the test cluster with its default pool, or undefined when the cluster does not answer. */
async function kubernetesEngine(dir: string): Promise<Backend | undefined> {
  const kubeconfig = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
  if (!fs.existsSync(kubeconfig)) return undefined;
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const node = await kc
    .makeApiClient(k8s.CoreV1Api)
    .listNode()
    .then((r) => r.body.items[0]?.metadata?.name)
    .catch(() => undefined);
  if (!node) return undefined;
  // A node selector the node matches anyway gives this engine's pods their own spec hash: no other engine of the
  // namespace (tests, other benches) claims them or hands this one theirs.
  const engine = await startEngine(dir, {
    SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
    KUBECONFIG: kubeconfig,
    SWITCHYARD_K8S_NAMESPACE: process.env.SWITCHYARD_K8S_NAMESPACE ?? 'switchyard-test',
    SWITCHYARD_K8S_NODE_SELECTOR: `kubernetes.io/hostname=${node}`,
  });
  const sb = engine.app.get(KubernetesSandbox, { strict: false });
  return {
    name: 'Kubernetes',
    engine,
    // A session claims its pod when it is created; a pod started for it, or one it waited for, is not warm.
    warmClaims: () => sb.warm!.stats().warmClaims,
    idle: () => sb.warm!.stats().warm,
    settled: () => {
      const s = sb.warm!.stats();
      return s.warm >= s.min && s.starting === 0;
    },
  };
}
