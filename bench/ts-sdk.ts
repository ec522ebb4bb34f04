/**
 * The TypeScript SDK's call overhead (issue 31): the same request for python `print(1)` through the SDK and as a raw
 * `fetch` (JSON body out, JSON answer parsed), in one run with the samples interleaved (the order alternating each
 * round, so neither side always runs warm):
 *   - `sbx.runCode('print(1)')` (a session kernel cell) vs a raw POST of the same cell,
 *   - `client.actions.run(sid, {fresh print(1)})` vs a raw POST of the same action,
 *   - `sbx.commands.run('echo 1')` vs a raw POST of the same bash action.
 * Each sample checks the answer printed 1. The engine's own time dominates those and varies with the host's load, so
 * the client's cost alone is measured too: both sides against a local HTTP server that answers the engine's recorded
 * answer to the cell at once (`runs` x 25 samples). Target: SDK <= 1.1x raw at the median. Called by `run.ts`
 * (`BENCH_ONLY=ts-sdk`); `node dist/bench/ts-sdk.js` runs it alone.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Sandbox, SwitchyardClient } from '../packages/client/src';
import { startEngine } from './engine-client';
import { printRatio } from './stats';

type Sample = () => Promise<number>;

async function timedCheck(what: string, fn: () => Promise<string>, expected: string): Promise<number> {
  const t0 = performance.now();
  const printed = await fn();
  const elapsed = performance.now() - t0;
  if (printed !== expected) throw new Error(`bench ts-sdk: ${what} printed ${JSON.stringify(printed)}`);
  return elapsed;
}

/** `runs` samples of each side, interleaved, after 3 warm-up rounds. */
async function interleaved(
  runs: number,
  raw: Sample,
  sdk: Sample,
): Promise<{ raw: number[]; sdk: number[] }> {
  for (let i = 0; i < 3; i++) {
    await raw();
    await sdk();
  }
  const out = { raw: [] as number[], sdk: [] as number[] };
  for (let i = 0; i < runs; i++) {
    if (i % 2 === 0) {
      out.raw.push(await raw());
      out.sdk.push(await sdk());
    } else {
      out.sdk.push(await sdk());
      out.raw.push(await raw());
    }
  }
  return out;
}

/** A server that answers at once, after reading the request's body: GET with `get`, anything else with `post`. */
async function cannedServer(get: string, post: string): Promise<{ base: string; server: Server }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = req.method === 'GET' ? get : post;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

export async function benchTsSdk(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  console.log('\nts-sdk: the TypeScript SDK vs a raw fetch of the same request, python print(1)');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-ts-sdk-'));
  const engine = await startEngine(dataDir);
  const base = `http://127.0.0.1:${(engine.app.getHttpServer().address() as AddressInfo).port}`;
  const client = new SwitchyardClient({ baseUrl: base });
  const sbx = await Sandbox.create({ client, metadata: { agent: 'bench-ts-sdk' } });
  const rawPost = async (body: object): Promise<{ status: string; stdout?: string }> => {
    const res = await fetch(`${base}/v1/sessions/${sbx.id}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return (await res.json()) as { status: string; stdout?: string };
  };
  try {
    const cell = { type: 'code', language: 'python', code: 'print(1)', state: 'session' } as const;
    const kernel = await interleaved(
      runs,
      () => timedCheck('raw cell', async () => (await rawPost(cell)).stdout ?? '', '1\n'),
      () => timedCheck('runCode', async () => (await sbx.runCode('print(1)')).logs.stdout, '1\n'),
    );
    printRatio(
      'runCode: a kernel cell (state session)',
      { name: 'raw fetch POST …/actions', times: kernel.raw },
      { name: 'sbx.runCode()', times: kernel.sdk },
      1.1,
    );

    const fresh = { type: 'code', language: 'python', code: 'print(1)' } as const;
    const action = await interleaved(
      runs,
      () => timedCheck('raw action', async () => (await rawPost(fresh)).stdout ?? '', '1\n'),
      () =>
        timedCheck('actions.run', async () => (await client.actions.run(sbx.id, fresh)).stdout ?? '', '1\n'),
    );
    printRatio(
      'actions.run: a fresh interpreter (subprocess tier)',
      { name: 'raw fetch POST …/actions', times: action.raw },
      { name: 'client.actions.run()', times: action.sdk },
      1.1,
    );

    const bash = { type: 'code', language: 'bash', code: 'echo 1' } as const;
    const command = await interleaved(
      runs,
      () => timedCheck('raw bash', async () => (await rawPost(bash)).stdout ?? '', '1\n'),
      () => timedCheck('commands.run', async () => (await sbx.commands.run('echo 1')).stdout, '1\n'),
    );
    printRatio(
      'commands.run: a foreground bash command',
      { name: 'raw fetch POST …/actions', times: command.raw },
      { name: 'sbx.commands.run()', times: command.sdk },
      1.1,
    );

    // The client's cost alone: the engine's answer to the cell, recorded, served at once by a local server.
    const recorded = await rawPost(cell);
    const canned = await cannedServer(JSON.stringify(sbx.session), JSON.stringify(recorded));
    try {
      const cannedSbx = await Sandbox.connect(sbx.id, { baseUrl: canned.base });
      const rawCanned = async (): Promise<string> => {
        const res = await fetch(`${canned.base}/v1/sessions/${sbx.id}/actions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(cell),
        });
        return ((await res.json()) as { stdout?: string }).stdout ?? '';
      };
      const own = await interleaved(
        runs * 25,
        () => timedCheck('raw canned', rawCanned, '1\n'),
        () =>
          timedCheck('runCode canned', async () => (await cannedSbx.runCode('print(1)')).logs.stdout, '1\n'),
      );
      printRatio(
        "the client's own cost: runCode vs raw fetch against a server answering the recorded cell at once",
        { name: 'raw fetch + JSON parse', times: own.raw },
        { name: 'sbx.runCode()', times: own.sdk },
        1.1,
      );
    } finally {
      canned.server.close();
    }
  } finally {
    await sbx.kill().catch(() => undefined);
    await engine.app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchTsSdk().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
