/**
 * The Python SDK's call overhead (issue 31): python `print(1)` as a session-kernel cell through `sbx.run_code` (sync
 * `Sandbox` and async `AsyncSandbox`) vs a raw HTTP request of the same body with httpx, from the same Python process
 * against the same engine, samples interleaved in alternating order (`bench/python_sdk_driver.py`). Target: SDK <=
 * 1.1x raw.
 * Needs the SDK's venv (`bash scripts/python-sdk.sh`). Called by `run.ts` (`BENCH_ONLY=python-sdk`);
 * `node dist/bench/python-sdk.js` runs it alone.
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { startEngine } from './engine-client';
import { printRatio } from './stats';

const REPO = path.resolve(__dirname, '..', '..');
const RUNTIME_DIR = process.env.SWITCHYARD_RUNTIME_DIR ?? path.join(REPO, '.runtime');
const VENV_PYTHON = path.join(RUNTIME_DIR, 'python-sdk-venv', 'bin', 'python');

export async function benchPythonSdk(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  console.log('\npython sdk: print(1) as a kernel cell, sbx.run_code vs a raw httpx request, same process');
  if (!fs.existsSync(VENV_PYTHON)) throw new Error(`no ${VENV_PYTHON}: run bash scripts/python-sdk.sh first`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-python-sdk-'));
  const engine = await startEngine(dataDir);
  const base = `http://127.0.0.1:${(engine.app.getHttpServer().address() as AddressInfo).port}`;
  try {
    const { stdout } = await promisify(execFile)(
      VENV_PYTHON,
      [path.join(REPO, 'bench', 'python_sdk_driver.py'), base, String(runs)],
      // The SDK from the checkout's sources, as the wheel packs them.
      { env: { ...process.env, PYTHONPATH: path.join(REPO, 'packages', 'python', 'src') }, timeout: 600_000 },
    );
    const s = JSON.parse(stdout) as Record<
      'raw' | 'sdk' | 'raw_get' | 'sdk_get' | 'raw_async' | 'sdk_async',
      number[]
    >;
    printRatio(
      '  sync: Sandbox.run_code vs httpx.Client.post',
      { name: 'raw httpx request', times: s.raw },
      { name: 'Sandbox.run_code', times: s.sdk },
      1.1,
    );
    printRatio(
      '  a cheap call: Switchyard.sessions.get vs httpx.Client.get (GET /v1/sessions/:id)',
      { name: 'raw httpx GET', times: s.raw_get },
      { name: 'sessions.get', times: s.sdk_get },
      1.1,
    );
    printRatio(
      '  async: AsyncSandbox.run_code vs httpx.AsyncClient.post',
      { name: 'raw httpx request (async)', times: s.raw_async },
      { name: 'AsyncSandbox.run_code', times: s.sdk_async },
      1.1,
    );
  } finally {
    await engine.app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchPythonSdk().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
