/**
 * Container tiers against raw baselines, all measured in one run of a real engine (`createEngineApp`, as `run.ts`
 * does) on the real Docker engine and sandbox image. Called by `run.ts` (`npm run bench`); needs root, Docker and
 * the image (`npm run docker:engine && npm run sandbox:image`).
 *
 * 1. Pooled tier claims: a session's first pooled action takes a warm container (health check + workspace mount).
 *    Claim time as the tier measures it (target p99 <= 5 ms) and the first action's overhead over the session's
 *    next one; pool refill time; memory of an idle warm container.
 * 2. Warm-claim hit rate: new sessions arriving steadily at 1 per (refill time x 1.5 / min), each claim counted as
 *    warm (a container was ready when it asked) or cold (it waited for a start). Target >= 95 %.
 * 3. python `print(1)`: pooled tier through the API vs raw `docker exec` (dockerode) into a running container vs
 *    raw host `spawn`. Target: pooled <= 1.5x raw host spawn.
 * 4. python `print(1)`: one-off tier through the API, and `ContainerTier.run` itself, vs raw dockerode
 *    create -> start -> wait -> remove with the same image, command and HostConfig (runtime included). Target <= 1.15x.
 *    Under both runtimes in the same run, interleaved: gVisor (`runsc`, the default where Docker has it) and runc
 *    (a second engine with SWITCHYARD_CONTAINER_RUNTIME=runc), each against raw dockerode with the same runtime.
 *    Both engines start no containers ahead (SWITCHYARD_CONTAINER_AHEAD_MAX=0): this measures what the tier adds to a
 *    container's whole life; `peers.ts` measures a session's runs with the containers started ahead.
 *
 * Ratios, not absolute times, are what compares across machines; samples are interleaved so drift hits every
 * side alike.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  buildChildEnv,
  buildContainerSpec,
  ContainerTier,
  PooledTier,
  resolveContainerOptions,
  resolveSandboxOptions,
  type TierJob,
} from '@switchyard/sandbox';
import Dockerode from 'dockerode';
import { dockerExecPrint1, sleep, startEngine, timed, until } from './engine-client';
import { interleave } from './interleave';
import { median, ms, pct, PYTHON, timeSpawn } from './stats';

type OneOffRuntime = 'runsc' | 'runc';

const SANDBOX_UID = 10001;
const MiB = 2 ** 20;

export interface ContainerBenchOptions {
  /** Samples per median of pooled print(1). Default `BENCH_RUNS` or 40. */
  runs?: number;
  /** Claims measured one at a time (enough for a p99 that is not just the maximum). Default `BENCH_CLAIMS` or 100. */
  claims?: number;
  /** Samples per median of the one-off tier (each is a container lifecycle). Default `BENCH_ONEOFF_RUNS` or 24. */
  oneOffRuns?: number;
  /** Sessions driven at a steady rate for the hit rate. Default `BENCH_ARRIVALS` or 60. */
  arrivals?: number;
}

interface Sample {
  median: number;
  p99: number;
}

const summary = (xs: number[]): Sample => ({ median: median(xs), p99: pct(xs, 99) });
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
const verdict = (ok: boolean) => (ok ? 'OK' : 'MISSED');

/** Memory of a container from its cgroup (v1 or v2), and as `docker stats` reports it (usage minus page cache). */
async function containerMemory(
  docker: Dockerode,
  id: string,
): Promise<{ usage?: number; rss?: number; dockerStats: number }> {
  let usage: number | undefined;
  let rss: number | undefined;
  const v1 = `/sys/fs/cgroup/memory/docker/${id}`;
  const v2 = [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`].find((d) =>
    fs.existsSync(`${d}/memory.current`),
  );
  const statOf = (file: string) =>
    Object.fromEntries(
      fs
        .readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ')),
    ) as Record<string, string>;
  if (fs.existsSync(`${v1}/memory.usage_in_bytes`)) {
    usage = Number(fs.readFileSync(`${v1}/memory.usage_in_bytes`, 'utf8'));
    rss = Number(statOf(`${v1}/memory.stat`).rss);
  } else if (v2) {
    usage = Number(fs.readFileSync(`${v2}/memory.current`, 'utf8'));
    rss = Number(statOf(`${v2}/memory.stat`).anon);
  }
  const stats = (await docker.getContainer(id).stats({ stream: false })) as unknown as {
    memory_stats: { usage: number; stats?: { cache?: number; inactive_file?: number } };
  };
  const cache = stats.memory_stats.stats?.cache ?? stats.memory_stats.stats?.inactive_file ?? 0;
  return { usage, rss, dockerStats: stats.memory_stats.usage - cache };
}

export async function benchContainers(options: ContainerBenchOptions = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  const oneOffRuns = options.oneOffRuns ?? Number(process.env.BENCH_ONEOFF_RUNS ?? 24);
  const claimRuns = options.claims ?? Number(process.env.BENCH_CLAIMS ?? 100);
  const arrivals = options.arrivals ?? Number(process.env.BENCH_ARRIVALS ?? 60);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-containers-'));
  const runcDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-runc-'));
  const rawWs = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-raw-'));
  fs.chownSync(rawWs, SANDBOX_UID, SANDBOX_UID);
  const docker = new Dockerode();
  const engine = await startEngine(dataDir, { SWITCHYARD_CONTAINER_AHEAD_MAX: '0' });
  const { app } = engine;
  // The one-off tier on runc, beside the default engine's gVisor; no warm pool of its own.
  const runcEngine = await startEngine(runcDataDir, {
    SWITCHYARD_CONTAINER_RUNTIME: 'runc',
    SWITCHYARD_POOL_MIN: '0',
    SWITCHYARD_CONTAINER_AHEAD_MAX: '0',
  });
  const out = (line = '') => console.log(line);
  try {
    const health = (await engine.call('GET', '/health')) as {
      tiers: Record<
        string,
        { available: boolean; reason?: string; details?: { image?: string; runtime?: string } }
      >;
    };
    for (const t of ['pooled', 'container']) {
      if (!health.tiers[t]?.available) {
        throw new Error(
          `bench: the ${t} tier is unavailable (${health.tiers[t]?.reason ?? 'unknown'}); run as root after ` +
            '`npm run docker:engine && npm run sandbox:image`',
        );
      }
    }
    const pooled = app.get(PooledTier, { strict: false });
    const min = pooled.stats().min;
    // Full: at its target (the floor, raised for a while by recent claims) with no start in flight to compete.
    const poolFull = () => {
      const s = pooled.stats();
      return s.available >= Math.max(min, s.target) && s.starting === 0;
    };
    await until(poolFull, 60_000, 'a full warm pool');
    const image = health.tiers.pooled.details!.image!;
    out(`\ncontainer tiers — image ${image}, pool min ${min}`);

    // 1. Idle warm container memory, before anything ran in it.
    const warm = pooled.containers().find((c) => c.state === 'warm')!;
    await sleep(500); // its start-up allocations settle
    const mem = await containerMemory(docker, warm.id);
    out('idle warm container memory');
    out(
      `  cgroup usage ${mem.usage === undefined ? 'n/a' : `${(mem.usage / MiB).toFixed(1)} MiB`}, ` +
        `rss ${mem.rss === undefined ? 'n/a' : `${(mem.rss / MiB).toFixed(1)} MiB`}, ` +
        `docker stats (usage - cache) ${(mem.dockerStats / MiB).toFixed(1)} MiB`,
    );

    // 2. Claims, one at a time with a full pool; refill time after each.
    const claims: number[] = [];
    const overheads: number[] = [];
    const refills: number[] = [];
    // Garbage of earlier sections (run.ts runs them in this process) is not the claims' to collect (`--expose-gc`).
    (globalThis as { gc?: () => void }).gc?.();
    // Stalls of this process (GC, other work) show up in claims too; this tells them from slow Docker or runners.
    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    for (let i = 0; i < claimRuns; i++) {
      await until(poolFull, 30_000, 'the pool to refill');
      await sleep(20); // the refill's last docker calls settle
      const sid = await engine.newSession();
      const t0 = performance.now();
      const first = await timed(() => engine.print1(sid, 'pooled'));
      claims.push(pooled.stats().lastClaimMs!);
      await until(poolFull, 30_000, 'the pool to refill');
      refills.push(performance.now() - t0);
      const steady = await timed(() => engine.print1(sid, 'pooled'));
      overheads.push(first - steady);
      await engine.endSession(sid);
    }
    loopDelay.disable();
    const claim = summary(claims);
    const overhead = summary(overheads);
    const refill = summary(refills);
    out(`pooled claims (${claimRuns}, one at a time, warm pool)`);
    out(
      `  claim (health check + workspace mount)  median ${ms(claim.median)}   p90 ${ms(pct(claims, 90))}   ` +
        `p99 ${ms(claim.p99)}   (target p99 <= 5 ms) ${verdict(claim.p99 <= 5)}; ` +
        `over 5 ms: ${claims.filter((c) => c > 5).length} of ${claims.length}`,
    );
    out(
      `  (event-loop delay of this process meanwhile: p99 ${ms(loopDelay.percentile(99) / 1e6)}, ` +
        `max ${ms(loopDelay.max / 1e6)})`,
    );
    out(`  first action over the next one (API)    median ${ms(overhead.median)}   p99 ${ms(overhead.p99)}`);
    out(`  pool refill after a claim (to its target) median ${ms(refill.median)}   p99 ${ms(refill.p99)}`);

    // 3. Hit rate at a steady arrival rate below the refill rate. The pool refills its `min` containers at once,
    // which is slower than one alone, and in a steady state sessions also end (their containers are removed) while it
    // refills: its refill rate is min / (time to refill all of them while those sessions end).
    const poolRefills: number[] = [];
    for (let i = 0; i < 5; i++) {
      await until(poolFull, 30_000, 'the pool to refill');
      await sleep(20);
      const sids = await Promise.all(Array.from({ length: min }, () => engine.newSession()));
      const t0 = performance.now();
      await Promise.all(
        sids.map(async (sid) => {
          await engine.print1(sid, 'pooled');
          await engine.endSession(sid);
        }),
      );
      await until(poolFull, 30_000, 'the pool to refill');
      poolRefills.push(performance.now() - t0);
    }
    const poolRefill = median(poolRefills);
    out(`  pool refill after ${min} claims at once, their sessions ending   median ${ms(poolRefill)}`);
    const interval = (poolRefill * 1.5) / min;
    const before = pooled.stats();
    const firsts: number[] = [];
    const sessionsDone: Array<Promise<void>> = [];
    await until(poolFull, 30_000, 'the pool to refill');
    const t0 = performance.now();
    for (let i = 0; i < arrivals; i++) {
      await sleep(Math.max(0, t0 + i * interval - performance.now()));
      sessionsDone.push(
        (async () => {
          const sid = await engine.newSession();
          firsts.push(await timed(() => engine.print1(sid, 'pooled')));
          await engine.endSession(sid);
        })(),
      );
      sessionsDone.at(-1)!.catch(() => undefined); // reported by the Promise.all below, not as unhandled meanwhile
    }
    await Promise.all(sessionsDone);
    const after = pooled.stats();
    const hits = after.warmClaims - before.warmClaims;
    const colds = after.coldClaims - before.coldClaims;
    const rate = hits / (hits + colds);
    out(`warm-claim hit rate, ${arrivals} sessions, 1 every ${ms(interval)} (pool refill x 1.5 / min)`);
    out(
      `  ${hits} warm, ${colds} waited for a start: ${(rate * 100).toFixed(1)} % (target >= 95 %) ${verdict(rate >= 0.95)}; ` +
        `first action median ${ms(median(firsts))}, p99 ${ms(pct(firsts, 99))}`,
    );

    // 4. python print(1): pooled through the API vs raw docker exec vs raw host spawn.
    const sid = await engine.newSession();
    await engine.print1(sid, 'pooled');
    const held = pooled.containers().find((c) => c.sessionId === sid)!;
    const {
      api: viaApi,
      exec: viaExec,
      host: viaHost,
    } = await interleave(runs, {
      api: () => timed(() => engine.print1(sid, 'pooled')),
      exec: () => timed(() => dockerExecPrint1(docker, held.id)),
      host: () => timeSpawn(PYTHON, ['-c', 'print(1)'], rawWs),
    });
    await engine.endSession(sid);
    const [p, e, h] = [median(viaApi), median(viaExec), median(viaHost)];
    out(`python print(1), pooled tier, median of ${runs}, interleaved`);
    out(`  raw host spawn        median ${ms(h)}`);
    out(`  raw docker exec       median ${ms(e)}   (${ratio(e, h)} raw host spawn)`);
    out(`  API pooled tier       median ${ms(p)}   p99 ${ms(pct(viaApi, 99))}`);
    out(`  ratio API pooled / raw host spawn  = ${ratio(p, h)} (target <= 1.50) ${verdict(p / h <= 1.5)}`);
    out(`  ratio API pooled / raw docker exec = ${ratio(p, e)}`);

    // 5. python print(1): one-off tier through the API and ContainerTier.run vs raw dockerode, per runtime.
    const runtimeOf = async (e: typeof engine) =>
      ((await e.call('GET', '/health')) as typeof health).tiers.container?.details?.runtime;
    const defaultRuntime = await runtimeOf(engine);
    if ((await runtimeOf(runcEngine)) !== 'runc') throw new Error('bench: the runc engine does not run runc');
    if (defaultRuntime !== 'runsc') {
      out(
        `  (the Docker engine has no runsc runtime: the one-off tier runs ${defaultRuntime}; ` +
          'register gVisor with `npm run docker:engine` to measure it)',
      );
    }
    const runtimes: OneOffRuntime[] = defaultRuntime === 'runsc' ? ['runsc', 'runc'] : ['runc'];
    const job: TierJob = {
      actionId: 'bench-one-off',
      sessionId: 'bench-one-off',
      language: 'python',
      code: 'print(1)',
      env: buildChildEnv({}, 'python'),
      timeoutMs: 30_000,
      workspaceDir: rawWs,
      output: resolveSandboxOptions({}).output,
    };
    /** Raw dockerode with the HostConfig the tier gives a container of this runtime (runtime, seccomp, limits). */
    const rawWith = (runtime: OneOffRuntime) => {
      const spec = buildContainerSpec({
        job,
        image,
        options: resolveContainerOptions({}),
        runtime,
        hostsFile: '/etc/hosts',
      });
      return async () => {
        const c = await docker.createContainer({
          Image: image,
          Cmd: ['/usr/bin/python3', '-c', 'print(1)'],
          User: spec.User,
          WorkingDir: spec.WorkingDir,
          Env: spec.Env,
          Labels: spec.Labels,
          NetworkDisabled: spec.NetworkDisabled,
          HostConfig: spec.HostConfig,
        });
        await c.start();
        const { StatusCode } = (await c.wait()) as { StatusCode: number };
        await c.remove({ force: true });
        if (StatusCode !== 0) throw new Error(`raw one-off (${runtime}) exit ${StatusCode}`);
      };
    };
    const tierOf = (runtime: OneOffRuntime) =>
      (runtime === 'runc' ? runcEngine : engine).app.get(ContainerTier, { strict: false });
    const viaTier = (runtime: OneOffRuntime) => async () => {
      const r = await tierOf(runtime).run(job);
      if (r.stdout !== '1\n' || r.runtime !== runtime)
        throw new Error(`ContainerTier.run: ${JSON.stringify(r)}`);
    };
    const sessions = new Map<OneOffRuntime, string>();
    for (const runtime of runtimes) {
      sessions.set(runtime, await (runtime === 'runc' ? runcEngine : engine).newSession());
    }
    const oneOffApi = (runtime: OneOffRuntime) => () =>
      (runtime === 'runc' ? runcEngine : engine).print1(sessions.get(runtime)!, 'container');
    type Side = { runtime: OneOffRuntime; name: string; samples: number[]; fn: () => Promise<unknown> };
    const sides: Side[] = runtimes.flatMap((runtime) => [
      { runtime, name: 'api', samples: [], fn: oneOffApi(runtime) },
      { runtime, name: 'tier', samples: [], fn: viaTier(runtime) },
      { runtime, name: 'raw', samples: [], fn: rawWith(runtime) },
    ]);
    for (const side of sides) await side.fn();
    for (let i = 0; i < oneOffRuns; i++) {
      // Rotate the order so no side always runs right after another's removal; both runtimes share the drift.
      for (let k = 0; k < sides.length; k++) {
        const side = sides[(i + k) % sides.length];
        side.samples.push(await timed(side.fn));
      }
    }
    for (const runtime of runtimes) {
      await (runtime === 'runc' ? runcEngine : engine).endSession(sessions.get(runtime)!);
    }
    const stat = (runtime: OneOffRuntime, name: string) => {
      const xs = sides.find((x) => x.runtime === runtime && x.name === name)!.samples;
      return { median: median(xs), p90: pct(xs, 90), p99: pct(xs, 99), n: xs.length };
    };
    const line = (label: string, x: ReturnType<typeof stat>, extra = '') =>
      out(
        `  ${label.padEnd(43)} median ${ms(x.median)}   p90 ${ms(x.p90)}   p99 ${ms(x.p99)}   (n=${x.n})${extra}`,
      );
    const apiMedians = new Map<OneOffRuntime, number>();
    for (const runtime of runtimes) {
      const [api1, tier1, raw1] = ['api', 'tier', 'raw'].map((name) => stat(runtime, name));
      apiMedians.set(runtime, api1.median);
      out(`python print(1), one-off tier on ${runtime === 'runsc' ? 'gVisor (runsc)' : 'runc'}, interleaved`);
      line(`raw dockerode create->start->wait->remove`, raw1);
      line(`ContainerTier.run`, tier1, `  ${ratio(tier1.median, raw1.median)} raw`);
      line(`API one-off tier`, api1);
      out(
        `  ratio API one-off / raw dockerode (${runtime}) = ${ratio(api1.median, raw1.median)} ` +
          `(target <= 1.15) ${verdict(api1.median / raw1.median <= 1.15)}`,
      );
    }
    const gvisor = apiMedians.get('runsc');
    const runc = apiMedians.get('runc')!;
    if (gvisor !== undefined) {
      out(
        `  ratio API one-off gVisor / API one-off runc = ${ratio(gvisor, runc)} (the cost of gVisor per action)`,
      );
    }
    out(`  ratio API pooled / API one-off (${runtimes[0]})    = ${ratio(p, apiMedians.get(runtimes[0])!)}`);
  } finally {
    await runcEngine.app.close();
    await app.close();
    fs.rmSync(runcDataDir, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(rawWs, { recursive: true, force: true });
  }
}
