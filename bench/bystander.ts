/**
 * A bystander under a CPU hog (SECURITY.md #21): python `print(1)` through the API in one session, idle, then while
 * another session's subprocess-tier action runs eight busy loops (more than the machine has cores), then while one
 * runs a fork loop (every process forking for ever, spinning on failed forks at the pids limit), all in one run of
 * a real engine (`createEngineApp`, as `run.ts` does). That engine switches off the risk rules that would route the
 * hogs to a container tier, so they land where they did harm: the subprocess tier, which gives each action a CPU
 * quota (`SWITCHYARD_SUBPROCESS_CPUS`, default 1) and niceness 19. Called by `run.ts`; `node dist/bench/bystander.js`
 * runs it alone.
 *
 * Reported: p50/p90/p99 of the bystander idle and under each hog, and the ratios. Target: p50 <= 2x idle. A hog may
 * use its whole quota, one CPU of this machine's two: a bystander that needs CPU shares the rest with it, at worst
 * half as fast. Unconfined (nice 0, no quota) the fork loop starved the engine itself: seconds per print(1).
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/config/engine-config';
import { median, ms, pct } from './stats';

const HOGS: Array<[name: string, code: string]> = [
  ['8 busy loops', 'import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    pass'],
  ['fork loop', 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass'],
];
const TARGET_P50_RATIO = 2;
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
  const session = async () => (await call<{ id: string }>('POST', '/v1/sessions', {})).id;
  try {
    const bystander = await session();
    const hogSession = await session();
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
    const sample = async (): Promise<number[]> => {
      const xs: number[] = [];
      for (let i = 0; i < runs; i++) xs.push(await print1());
      return xs;
    };
    /** The bystander's samples while `code` runs in the other session, which must burn throughout. */
    const sampleUnder = async (code: string): Promise<number[]> => {
      const hog = await call<ActionAnswer>('POST', `/v1/sessions/${hogSession}/actions`, {
        type: 'code',
        language: 'python',
        code,
        timeoutMs: 300_000,
        wait: false,
      });
      const url = `/v1/sessions/${hogSession}/actions/${hog.id}`;
      const status = async () => (await call<ActionAnswer>('GET', url)).status;
      for (let i = 0; i < 100 && (await status()) !== 'running'; i++) await sleep(20);
      await sleep(500); // let it spin up
      const xs = await sample();
      const throughout = (await status()) === 'running';
      const ended = await call<ActionAnswer>('POST', `${url}/cancel`);
      if (!throughout || ended.tier !== 'subprocess') {
        throw new Error(
          `bench: the hog did not burn in the subprocess tier throughout: ${JSON.stringify(ended)}`,
        );
      }
      return xs;
    };

    for (let i = 0; i < 3; i++) await print1(); // warm-up: sandboxes launched ahead, caches
    const idle = await sample();
    const loaded: Array<[string, number[]]> = [];
    for (const [name, code] of HOGS) loaded.push([name, await sampleUnder(code)]);

    const row = (name: string, xs: number[]) =>
      `  ${name.padEnd(18)} p50 ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}`;
    console.log(`bystander python print(1) through the API, ${runs} runs each, ${os.cpus().length} cores`);
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
