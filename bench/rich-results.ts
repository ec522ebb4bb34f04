/**
 * Rich results (issue 30), in one run with samples interleaved: a `df.describe()` cell (HTML and text back) and a
 * matplotlib cell (a PNG back) through
 *   - the REST API (`state: "session"` in a data-science session's pooled kernel),
 *   - the Jupyter protocol (the session's `/jupyter` gateway: an `execute_request` over its WebSocket, to `execute_reply`
 *     and `status: idle`),
 *   - a raw Jupyter kernel (ipykernel with its own inline matplotlib backend, driven by jupyter_client's
 *     `execute_interactive` in a Python process that stays up: one stdin line per sample, timed inside Python).
 * Each sample checks the answer holds the rich result (the HTML table; the PNG). Targets at p50: REST <= 1.2x raw,
 * gateway <= 1.3x raw. Needs the data-science template (`node scripts/sandbox-image.mjs --template data-science`).
 * Called by `run.ts` (`BENCH_ONLY=rich`); `node dist/bench/rich-results.js` runs it alone.
 */
import 'reflect-metadata';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import WebSocket from 'ws';
import { startEngine } from './engine-client';
import { median, ms, pct, PYTHON } from './stats';

const REPO = path.resolve(__dirname, '..', '..');
// The template's versions (docker/templates/data-science.toml), so both sides draw with the same libraries.
const PACKAGES = [
  'ipykernel==6.29.5',
  'jupyter_client==8.6.3',
  'numpy==2.1.3',
  'pandas==2.2.3',
  'matplotlib==3.9.2',
];

const SETUP =
  'import numpy as np, pandas as pd, matplotlib.pyplot as plt\n' +
  "df = pd.DataFrame(np.random.default_rng(0).normal(size=(1000, 4)), columns=list('abcd'))";
const CELLS = {
  describe: { code: 'df.describe()', mime: 'text/html' },
  chart: { code: "plt.plot(df['a'].cumsum())\nplt.title('a')\nNone", mime: 'image/png' },
} as const;
type CellName = keyof typeof CELLS;

/** The raw side: one kernel, one sample per stdin line; answers the time and the MIME types it displayed. */
const RAW_DRIVER = `
import json, sys, time
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name='python3')
def execute(code):
    mimes = []
    def hook(msg):
        if msg['msg_type'] in ('display_data', 'execute_result'):
            mimes.extend(msg['content']['data'])
    t = time.perf_counter()
    reply = kc.execute_interactive(code, output_hook=hook, timeout=60)
    return (time.perf_counter() - t) * 1000, reply['content']['status'], mimes
for line in sys.stdin:
    print(json.dumps(execute(json.loads(line))), flush=True)
km.shutdown_kernel(now=True)
`;

/** A venv with ipykernel, jupyter_client, pandas and matplotlib at pinned versions, made once. */
function jupyterPython(): string {
  const venv = path.join(REPO, '.runtime', 'bench-rich-venv');
  const python = path.join(venv, 'bin', 'python');
  const probe = 'import ipykernel, jupyter_client, pandas, matplotlib';
  if (spawnSync(python, ['-c', probe], { stdio: 'ignore' }).status === 0) return python;
  console.log(`  installing ${PACKAGES.join(' ')} into .runtime/bench-rich-venv (once)`);
  execFileSync(PYTHON, ['-m', 'venv', venv], { stdio: 'inherit' });
  execFileSync(python, ['-m', 'pip', 'install', '-q', ...PACKAGES], { stdio: 'inherit' });
  return python;
}

/** A raw ipykernel behind a Python driver: `run(code)` is one timed sample. */
async function rawKernel(): Promise<{ run(code: string): Promise<number>; close(): void }> {
  const driver = spawn(jupyterPython(), ['-c', RAW_DRIVER], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: driver.stdout })[Symbol.asyncIterator]();
  const run = async (code: string, mime?: string): Promise<number> => {
    driver.stdin.write(`${JSON.stringify(code)}\n`);
    const next = await lines.next();
    if (next.done) throw new Error('the raw Jupyter driver ended');
    const [elapsed, status, mimes] = JSON.parse(next.value) as [number, string, string[]];
    if (status !== 'ok' || (mime && !mimes.includes(mime))) {
      throw new Error(`raw kernel: ${status}, displayed ${mimes.join(', ') || 'nothing'}`);
    }
    return elapsed;
  };
  await run(SETUP);
  return {
    run: (code) => run(code, Object.values(CELLS).find((c) => c.code === code)?.mime),
    close: () => driver.stdin.end(),
  };
}

/** A Jupyter client of the session's gateway: `run(code)` sends an execute_request and waits for reply and idle. */
async function gatewayKernel(
  base: string,
  sid: string,
): Promise<{ run(code: string): Promise<number>; close(): Promise<void> }> {
  const root = `${base}/v1/sessions/${sid}/jupyter`;
  const created = await fetch(`${root}/api/kernels`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'python3' }),
  });
  const kernel = (await created.json()) as { id: string };
  if (!kernel.id) throw new Error(`gateway: no kernel (${created.status})`);
  const ws = new WebSocket(`${root.replace(/^http/, 'ws')}/api/kernels/${kernel.id}/channels`);
  await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
  let waiting: ((m: any) => void) | undefined;
  ws.on('message', (data: Buffer) => waiting?.(JSON.parse(data.toString('utf8'))));
  let n = 0;
  const run = async (code: string): Promise<number> => {
    const msgId = `bench-${++n}`;
    const mime = Object.values(CELLS).find((c) => c.code === code)?.mime;
    const t0 = performance.now();
    const seen = { reply: '', idle: false, mimes: [] as string[] };
    await new Promise<void>((resolve) => {
      waiting = (m) => {
        if (m.parent_header?.msg_id !== msgId) return;
        if (m.msg_type === 'execute_reply') seen.reply = m.content.status;
        if (m.msg_type === 'display_data' || m.msg_type === 'execute_result')
          seen.mimes.push(...Object.keys(m.content.data));
        if (m.msg_type === 'status' && m.content.execution_state === 'idle') seen.idle = true;
        if (seen.reply && seen.idle) resolve();
      };
      ws.send(
        JSON.stringify({
          header: {
            msg_id: msgId,
            msg_type: 'execute_request',
            session: 'bench',
            username: 'bench',
            version: '5.3',
            date: new Date().toISOString(),
          },
          parent_header: {},
          metadata: {},
          content: {
            code,
            silent: false,
            store_history: true,
            user_expressions: {},
            allow_stdin: false,
            stop_on_error: true,
          },
          channel: 'shell',
          buffers: [],
        }),
      );
    });
    const elapsed = performance.now() - t0;
    if (seen.reply !== 'ok' || (mime && !seen.mimes.includes(mime))) {
      throw new Error(`gateway: ${seen.reply}, displayed ${seen.mimes.join(', ') || 'nothing'}`);
    }
    return elapsed;
  };
  return {
    run,
    close: async () => {
      ws.close();
      await fetch(`${root}/api/kernels/${kernel.id}`, { method: 'DELETE' });
    },
  };
}

const line = (label: string, xs: number[]): string =>
  `${label.padEnd(40)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;

export async function benchRichResults(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  console.log(
    '\nrich results: df.describe() and a matplotlib chart, REST and Jupyter protocol vs a raw Jupyter kernel',
  );
  const raw = await rawKernel();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-rich-'));
  const engine = await startEngine(dataDir, { SWITCHYARD_POOL_MIN: '1' });
  const base = `http://127.0.0.1:${(engine.app.getHttpServer().address() as AddressInfo).port}`;
  try {
    const post = (url: string, body: unknown): Promise<any> => engine.call('POST', url, body);
    const session = await post('/v1/sessions', { template: 'data-science' });
    if (!session.id) throw new Error(`no data-science session: ${JSON.stringify(session)}`);
    const sid: string = session.id;
    const rest = async (code: string): Promise<number> => {
      const mime = Object.values(CELLS).find((c) => c.code === code)?.mime;
      const t0 = performance.now();
      const r = await post(`/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'python',
        code,
        state: 'session',
      });
      const elapsed = performance.now() - t0;
      const mimes = (r.output?.results ?? []).flatMap((x: { data: object }) => Object.keys(x.data));
      if (r.status !== 'succeeded' || (mime && !mimes.includes(mime))) {
        throw new Error(
          `REST: ${r.status}, displayed ${mimes.join(', ') || 'nothing'}: ${JSON.stringify(r.error)}`,
        );
      }
      return elapsed;
    };
    await rest(SETUP); // the session's kernel, which the gateway's python3 kernel shares
    const gateway = await gatewayKernel(base, sid);
    const samples: Record<string, number[]> = {};
    for (const name of Object.keys(CELLS) as CellName[]) {
      const { code } = CELLS[name];
      for (let i = 0; i < 3; i++) for (const f of [raw.run, rest, gateway.run]) await f(code); // warm-up
      const sides = { raw: [] as number[], rest: [] as number[], gateway: [] as number[] };
      for (let i = 0; i < runs; i++) {
        sides.raw.push(await raw.run(code));
        sides.rest.push(await rest(code));
        sides.gateway.push(await gateway.run(code));
      }
      for (const [side, xs] of Object.entries(sides)) samples[`${name} ${side}`] = xs;
      console.log(`  ${line(`${name}: raw Jupyter kernel`, sides.raw)}`);
      console.log(`  ${line(`${name}: REST API`, sides.rest)}`);
      console.log(`  ${line(`${name}: Jupyter protocol (gateway)`, sides.gateway)}`);
      const restRatio = median(sides.rest) / median(sides.raw);
      const gatewayRatio = median(sides.gateway) / median(sides.raw);
      console.log(
        `  ${name}: REST / raw = ${restRatio.toFixed(2)}x (target <= 1.20) ${restRatio <= 1.2 ? 'OK' : 'MISSED'}; ` +
          `gateway / raw = ${gatewayRatio.toFixed(2)}x (target <= 1.30) ${gatewayRatio <= 1.3 ? 'OK' : 'MISSED'}`,
      );
    }
    await gateway.close();
  } finally {
    raw.close();
    await engine.app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchRichResults().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
