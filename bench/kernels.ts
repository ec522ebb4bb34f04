/**
 * Session kernels against a raw Jupyter kernel, in one run:
 * - warm stateful python `print(x)` through the API (`state: "session"`, the subprocess tier's kernel) against the
 *   same cell in a raw ipykernel driven by jupyter_client (`execute_interactive`: execute, stream, idle), both after
 *   `x = 41` was defined. Target: API p50 / raw Jupyter p50 <= 1.0.
 * - the same warm cell against today's fresh pooled action (`print(1)`, `tier: "pooled"`). Target: >= 3x faster.
 * - kernel start: the first cell after a kernel restart minus a warm cell (the cost of starting the interpreter in the
 *   session's sandbox), against a raw `python3 -c pass`. Target: p50 <= 1.5x.
 * ipykernel and jupyter_client are installed by this bench into its own venv (`.runtime/bench-venv`, pinned
 * versions). Called by `run.ts`; `node dist/bench/kernels.js` runs it alone.
 */
import 'reflect-metadata';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import { interleave } from './interleave';
import { median, ms, pct, PYTHON, timeSpawn } from './stats';

const IPYKERNEL = 'ipykernel==6.29.5';
const JUPYTER_CLIENT = 'jupyter_client==8.6.3';
const REPO = path.resolve(__dirname, '..', '..');

/**
 * The raw side: a kernel started and driven by jupyter_client, timed inside Python (no process start per sample). It
 * stays up and times one cell per line on its stdin, so its samples interleave with the API's.
 */
const JUPYTER_SCRIPT = `
import sys, time
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name='python3')
def execute(code):
    t = time.perf_counter()
    kc.execute_interactive(code, output_hook=lambda msg: None, timeout=30)
    return (time.perf_counter() - t) * 1000
execute('x = 41')
print('ready', flush=True)
for _ in sys.stdin:
    print(execute('print(x)'), flush=True)
km.shutdown_kernel(now=True)
`;

/** The raw Jupyter kernel as a process that answers one timed sample per request. */
function rawJupyter(python: string): { sample(): Promise<number>; close(): void } {
  const child = spawn(python, ['-c', JUPYTER_SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout });
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (l) => waiting.shift()?.(l));
  const next = () => new Promise<string>((resolve) => waiting.push(resolve));
  const ready = next();
  return {
    async sample() {
      if ((await ready) !== 'ready') throw new Error('the raw Jupyter kernel did not start');
      const answer = next();
      child.stdin.write('\n');
      return Number(await answer);
    },
    close: () => child.stdin.end(),
  };
}

/** A venv with ipykernel and jupyter_client at pinned versions, made once. */
function jupyterPython(): string {
  const venv = path.join(REPO, '.runtime', 'bench-venv');
  const python = path.join(venv, 'bin', 'python');
  const ready = spawnSync(python, ['-c', 'import ipykernel, jupyter_client'], { stdio: 'ignore' });
  if (ready.status === 0) return python;
  console.log('  installing ipykernel and jupyter_client into .runtime/bench-venv (once)');
  execFileSync(PYTHON, ['-m', 'venv', venv], { stdio: 'inherit' });
  execFileSync(python, ['-m', 'pip', 'install', '-q', IPYKERNEL, JUPYTER_CLIENT], { stdio: 'inherit' });
  return python;
}

const line = (label: string, xs: number[]): string =>
  `${label.padEnd(34)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;

export async function benchKernels(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  console.log('\nsession kernels (state: "session") against a raw Jupyter kernel');
  const jupyter = rawJupyter(jupyterPython());

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-kernels-'));
  const app = await createEngineApp(
    loadEngineConfig({
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_LOG_LEVEL: 'error',
      SWITCHYARD_POOL_MIN: '1',
    }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const post = async (url: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${base}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
    });
    return res.json();
  };
  const timed = async (url: string, body: unknown, check: (r: any) => boolean): Promise<number> => {
    const t0 = performance.now();
    const r = await post(url, body);
    const elapsed = performance.now() - t0;
    if (!check(r)) throw new Error(`unexpected answer: ${JSON.stringify(r).slice(0, 300)}`);
    return elapsed;
  };
  try {
    const sid: string = (await post('/v1/sessions')).id;
    const actions = `/v1/sessions/${sid}/actions`;
    const cell = (code: string) => ({ type: 'code', language: 'python', code, state: 'session' });
    const first = await post(actions, cell('x = 41'));
    if (first.status !== 'succeeded') throw new Error(`kernel did not start: ${JSON.stringify(first)}`);
    const kernelId: string = first.output.kernel.id;
    const printsX = (r: any) => r.status === 'succeeded' && r.stdout === '41\n';
    const pooled = { type: 'code', language: 'python', code: 'print(1)', tier: 'pooled' };
    // The warm cell, the raw Jupyter cell and a fresh pooled action, interleaved.
    const {
      warm,
      jupyter: jupyterTimes,
      fresh,
    } = await interleave(runs, {
      warm: () => timed(actions, cell('print(x)'), printsX),
      jupyter: () => jupyter.sample(),
      fresh: () => timed(actions, pooled, (r) => r.status === 'succeeded'),
    });

    // Kernel start: end the kernel, then the cell that starts a fresh interpreter in the session's (running)
    // sandbox, less a warm cell's median; interleaved with a raw `python3 -c pass`.
    let current = kernelId;
    const startTiers = new Set<string>();
    const kernelStart = async (): Promise<number> => {
      await fetch(`${base}/v1/sessions/${sid}/kernels/${current}`, { method: 'DELETE' });
      const t0 = performance.now();
      const r = await post(actions, cell('1'));
      const t = performance.now() - t0;
      if (r.status !== 'succeeded' || r.output.kernel.started !== true) {
        throw new Error(`kernel did not start fresh: ${JSON.stringify(r).slice(0, 300)}`);
      }
      current = r.output.kernel.id;
      startTiers.add(r.output.kernel.tier);
      return Math.max(0, t - median(warm));
    };
    const { starts, rawPython } = await interleave(
      Math.max(10, Math.floor(runs / 2)),
      { starts: kernelStart, rawPython: () => timeSpawn(PYTHON, ['-c', 'pass; print(1)'], dataDir) },
      1,
    );

    console.log(`  ${line('raw Jupyter kernel, print(x)', jupyterTimes)}`);
    console.log(`  ${line('API session kernel, print(x)', warm)}`);
    console.log(`  ${line('API fresh pooled, print(1)', fresh)}`);
    const vsJupyter = median(warm) / median(jupyterTimes);
    const vsFresh = median(fresh) / median(warm);
    console.log(
      `  ratio API kernel / raw Jupyter = ${vsJupyter.toFixed(2)}x (target <= 1.00) ${vsJupyter <= 1 ? 'OK' : 'MISSED'}`,
    );
    console.log(
      `  API kernel is ${vsFresh.toFixed(2)}x faster than a fresh pooled action (target >= 3) ${vsFresh >= 3 ? 'OK' : 'MISSED'}`,
    );
    console.log(
      `  ${line('kernel start (first cell - warm)', starts)}   in the ${[...startTiers].join(', ')} tier`,
    );
    console.log(`  ${line('raw python3 -c pass', rawPython)}`);
    const startRatio = median(starts) / median(rawPython);
    console.log(
      `  ratio kernel start / raw python3 = ${startRatio.toFixed(2)}x (target <= 1.50) ${startRatio <= 1.5 ? 'OK' : 'MISSED'}`,
    );
  } finally {
    jupyter.close();
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchKernels().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
