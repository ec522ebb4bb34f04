/**
 * A bystander under a CPU hog (SECURITY.md #21): python `print(1)` through the API in one session, idle, then while
 * another session's subprocess-tier action runs eight busy loops (more than the machine has cores), then while one
 * runs a fork loop (every process forking for ever, spinning on failed forks at the pids limit), then while that
 * session (`maxConcurrentActions: 8`) runs eight busy actions at once, all in one run of a real engine
 * (`createEngineApp`, as `run.ts` does). That engine switches off the risk rules that would route the hogs to a
 * container tier, so they land where they did harm: the subprocess tier, which gives each action a CPU cap
 * (`SWITCHYARD_SUBPROCESS_CPUS`, default 1) under one quota for the whole session (`SWITCHYARD_SESSION_CPUS`,
 * default 1), at a low CPU weight, and niceness 19. Called by `run.ts`; `node dist/bench/bystander.js` runs it alone.
 *
 * Reported: p50/p90/p99 of the bystander idle (sampled in slices between the hogs) and under each hog, with the run counts, and the ratios. Target: p50
 * <= 1.5x idle. A hog may use its session's whole quota, one CPU of this machine's two: a bystander that needs CPU
 * shares the rest with it. Unconfined (nice 0, no quota) the fork loop starved the engine itself: seconds per
 * print(1); with a quota per action only, eight concurrent actions took eight CPUs' worth of quota (p50 x5).
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import { median, ms, pct } from './stats';

/** Each hog: its name, its code, and how many actions of it the hog session runs at once. */
const HOGS: Array<[name: string, code: string, actions: number]> = [
  ['8 busy loops', 'import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    pass', 1],
  ['fork loop', 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass', 1],
  ['8 busy actions', 'while True:\n    pass', 8],
];
const TARGET_P50_RATIO = 1.5;
const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n));

interface ActionAnswer {
  id: string;
  status: string;
  tier?: string;
  stdout?: string;
}

export interface BystanderBenchOptions {
  /** Bystander samples idle and under each hog. Default `BENCH_RUNS` or 40. */
  runs?: number;
}

export async function benchBystander(options: BystanderBenchOptions = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-bystander-'));
  const app = await createEngineApp(
    loadEngineConfig({
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_LOG_LEVEL: 'error',
      SWITCHYARD_RISK_DISABLED_RULES: 'fork-bomb,spawn,unbounded-loop',
    }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const call = async <T>(method: string, url: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await res.json()) as T;
  };
  const session = async (body: object = {}) => (await call<{ id: string }>('POST', '/v1/sessions', body)).id;
  try {
    const bystander = await session();
    const hogSession = await session({ maxConcurrentActions: 8 });
    const print1 = async (): Promise<number> => {
      const t0 = performance.now();
      const r = await call<ActionAnswer>('POST', `/v1/sessions/${bystander}/actions`, {
        type: 'code',
        language: 'python',
        code: 'print(1)',
      });
      if (r.status !== 'succeeded' || r.stdout !== '1\n' || r.tier !== 'subprocess') {
        throw new Error(`bench: bystander print(1) did not succeed: ${JSON.stringify(r)}`);
      }
      return performance.now() - t0;
    };
    const sample = async (n = runs): Promise<number[]> => {
      const xs: number[] = [];
      for (let i = 0; i < n; i++) xs.push(await print1());
      return xs;
    };
    /** The bystander's samples while `actions` runs of `code` burn in the other session throughout. */
    const sampleUnder = async (code: string, actions: number): Promise<number[]> => {
      const hogs: ActionAnswer[] = [];
      for (let i = 0; i < actions; i++) {
        hogs.push(
          await call<ActionAnswer>('POST', `/v1/sessions/${hogSession}/actions`, {
            type: 'code',
            language: 'python',
            code,
            timeoutMs: 300_000,
            wait: false,
          }),
        );
      }
      const urls = hogs.map((h) => `/v1/sessions/${hogSession}/actions/${h.id}`);
      const allRunning = async () =>
        (await Promise.all(urls.map(async (u) => (await call<ActionAnswer>('GET', u)).status))).every(
          (s) => s === 'running',
        );
      for (let i = 0; i < 100 && !(await allRunning()); i++) await sleep(20);
      await sleep(500); // let them spin up
      const xs = await sample();
      const throughout = await allRunning();
      const ended = await Promise.all(urls.map((u) => call<ActionAnswer>('POST', `${u}/cancel`)));
      if (!throughout || ended.some((e) => e.tier !== 'subprocess')) {
        throw new Error(
          `bench: the hog did not burn in the subprocess tier throughout: ${JSON.stringify(ended)}`,
        );
      }
      return xs;
    };

    for (let i = 0; i < 3; i++) await print1(); // warm-up: sandboxes launched ahead, caches
    // A hog cannot start and stop per sample (it takes half a second to spin up), so the idle samples are taken
    // in slices between the hogs (idle, hog, idle, hog, …, idle): drift over the run hits idle as it hits the hogs.
    const slices = HOGS.length + 1;
    const idle = await sample(Math.ceil(runs / slices));
    const loaded: Array<[string, number[]]> = [];
    for (const [k, [name, code, actions]] of HOGS.entries()) {
      loaded.push([name, await sampleUnder(code, actions)]);
      idle.push(
        ...(await sample(Math.ceil((runs * (k + 2)) / slices) - Math.ceil((runs * (k + 1)) / slices))),
      );
    }

    const row = (name: string, xs: number[]) =>
      `  ${name.padEnd(22)} p50 ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}`;
    console.log(
      `bystander python print(1) through the API, ${runs} runs each (idle and under each hog), ` +
        `${os.cpus().length} cores`,
    );
    console.log(row('idle', idle));
    for (const [name, xs] of loaded) console.log(row(`while ${name}`, xs));
    for (const [name, xs] of loaded) {
      const ratio = (p: number) => (pct(xs, p) / pct(idle, p)).toFixed(2);
      const p50 = median(xs) / median(idle);
      console.log(
        `  ratio ${name} / idle: p50 ${p50.toFixed(2)}x, p90 ${ratio(90)}x, p99 ${ratio(99)}x ` +
          `(target p50 <= ${TARGET_P50_RATIO.toFixed(2)}x) ${p50 <= TARGET_P50_RATIO ? 'OK' : 'MISSED'}`,
      );
    }
    console.log('');
  } finally {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

// `node dist/bench/bystander.js` runs this section alone.
if (require.main === module) {
  benchBystander().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
