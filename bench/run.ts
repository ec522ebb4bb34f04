/**
 * `npm run bench`: the engine against raw baselines measured in the same run, printed as ratios.
 *
 * 1. python `print(1)`: raw `spawn`, raw bubblewrap (same namespaces, no engine), and a code action through
 *    the API (subprocess tier), interleaved. Target: API ≤ 1.3× raw bubblewrap.
 * 2. file actions: median latency of a write+read pair, and throughput at 16 concurrent clients (in a separate
 *    process) with every action recorded durably in the graph. Target ≥ 1000 actions/s.
 * 3. browser: navigate + extract text through the API vs raw Playwright, and a session's first action
 *    (`bench/browser.ts`). Target: API ≤ 1.3× raw Playwright.
 * 4. context graph: record overhead per action on each store vs a no-op store, and the failure-context query's
 *    p99 at 100k actions on each store (`bench/graph.ts`, with its own Neo4j). Target p99 <= 20 ms.
 * 5. container tiers: pooled claims, refill, warm-claim hit rate, idle memory; print(1) pooled vs raw docker exec vs
 *    raw spawn, one-off vs raw dockerode (`bench/containers.ts`). Targets there.
 * 6. bystander: a session's print(1) p50/p90/p99 while another session's subprocess-tier action burns every core,
 *    as a ratio to idle (`bench/bystander.ts`). Target: p50 <= 1.5x idle.
 * 7. sessions: create and delete p50/p90/p99 through the API with capped workspaces (loop quota) vs
 *    `SWITCHYARD_WORKSPACE_QUOTA=off`, interleaved (`bench/sessions.ts`). Target: each p50 <= 1.5x without.
 * 8. kernels: a warm stateful python cell through the API vs a raw Jupyter kernel, vs a fresh pooled action, and
 *    kernel start vs raw `python3 -c pass` (`bench/kernels.ts`). Targets there.
 *
 * 9. checkpoints: checkpoint, restore and fork of a 100 MB, 10 000-file workspace vs `cp -a` of it, and the disk an
 *    unchanged checkpoint takes (`bench/checkpoints.ts`). Targets there.
 *
 * 10. console: the web console's timeline on a 10 000-action session in headless Chromium, first rows and all rows,
 *    vs a raw Playwright page load and a raw fetch of the timeline (`bench/console.ts`). Target: all rows p90 <= 1 s.
 *
 * 11. kubernetes: the container tiers on the Kubernetes backend (the test cluster, `bash scripts/k8s.sh start`): a warm
 *    pooled print(1) through the API vs a raw client-node exec in the same pod and vs the Docker backend, pod claims
 *    (warm, cold), idle warm pod memory, the one-off tier vs a raw pod, workspace copies (`bench/kubernetes.ts`).
 *    Target: API <= 1.3x raw exec.
 *
 * 12. replicas: actions/s with one and two engine replicas sharing Postgres (clients on the session's replica, and
 *    alternating replicas), what Postgres adds to a request's latency against one engine on SQLite, and Postgres and
 *    Neo4j writes per action (`bench/replicas.ts`).
 *
 * 13. image root: print(1) in the subprocess tier on the sandbox image's exported root vs on the host's /usr, in the
 *    same run, median and p90 (`bench/image-root.ts`). Target: <= 1.10x.
 *
 * 14. box runs: print(1) in the subprocess tier inside a session's box that holds a running process (issue 29's
 *    fresh runs beside a session's servers when there is no pooled tier) vs a fresh sandbox, in the same run
 *    (`bench/box-runs.ts`). Target: <= 1.10x.
 *
 * 15. rich: a df.describe() cell and a matplotlib cell through the REST API and through the Jupyter protocol vs a raw
 *    Jupyter kernel, samples interleaved (`bench/rich-results.ts`). Targets: REST <= 1.2x, gateway <= 1.3x at p50.
 *
 * 16. ts-sdk: python print(1) through the TypeScript SDK (`sbx.runCode`, `client.actions.run`, `sbx.commands.run`) vs
 *    a raw fetch of the same request, samples interleaved (`bench/ts-sdk.ts`). Target: SDK <= 1.1x raw.
 *
 * 17. python-sdk: python print(1) as a kernel cell through the Python SDK (`Sandbox.run_code`, `AsyncSandbox.run_code`)
 *    vs a raw httpx request of the same body from the same Python process, samples interleaved
 *    (`bench/python-sdk.ts`). Target: SDK <= 1.1x raw.
 *
 * 18. files: a 100 MiB and a 1 GiB file up and down through the file transfer API (curl) vs `cp` into the workspace
 *    image and vs `docker cp` into a running container, MB/s and ratios, and the engine's RSS before, at its peak and
 *    after (`bench/file-transfer.ts`).
 *
 * 19. terminals: keystroke echo through a terminal's WebSocket (one character to `cat` in raw mode and back) vs a
 *    raw PTY opened by a Python process in the same container, interleaved (`bench/terminals.ts`). Target: p99 <= 20 ms.
 *
 * 20. ports: a GET of a server in a session (pooled tier) through the engine's proxy vs `docker exec curl` of the same
 *    URL vs a loopback client inside the container, and a WebSocket echo through the proxy vs the same inside, samples
 *    interleaved (`bench/ports.ts`). Target: proxied <= 1.2x the loopback client.
 *
 * 21. profile: where a warm python print(1) spends its time, stage by stage, in the subprocess and pooled tiers vs raw
 *    bwrap with the tier's own flags, host `python3 -c` and raw `docker exec`, interleaved (`bench/profile.ts`).
 *    Targets: subprocess <= 1.15x raw bwrap, pooled <= 1.30x host python3 -c.
 *
 * 22. density: sessions one by one, each holding a warm container and a python kernel, up to 200 or the first error:
 *    engine RSS, container and kernel memory per session, the machine's MemAvailable per session (`bench/density.ts`).
 *
 * 23. bursts: 60 sessions created back to back and 16 at once, each running one pooled print(1), on Docker and (when
 *    the test cluster answers) Kubernetes: warm claims and create -> first result vs a raw docker exec in the same run,
 *    sampled right before and after each burst (a burst is back to back: nothing in between) (`bench/bursts.ts`).
 *    Targets: >= 90 % warm, p50 <= 60 ms, p99 <= 150 ms.
 *
 * 24. peers: one-off print(1) through the API on runc and gVisor vs epicbox and a raw `docker run` (runc, runsc), the
 *    cold cycle (session create + print(1) + delete) vs epicbox, a pooled print(1) vs llm-sandbox and a raw
 *    `docker exec`, samples interleaved (`bench/peers.ts`; needs `bash scripts/peers-venv.sh`).
 *    Targets: one-off runc <= 1.0x epicbox; gVisor <= 1.5x epicbox and <= 0.8x raw runsc `docker run`.
 *
 * 25. spawner: how long launching a process holds the engine's event loop, a fork of the engine itself vs through the
 *    spawner, with the bench process at ~560 MB resident, and launch -> exit of `/bin/true` both ways, interleaved
 *    (`bench/spawner.ts`).
 *
 * Every section samples its sides interleaved, the order rotating (`bench/interleave.ts`), and prints the load
 * average before and after it.
 *
 * `BENCH_ONLY=kernels,sessions` runs only the named sections (core, containers, graph, bystander, sessions, kernels,
 * checkpoints, console, kubernetes, replicas, rootfs, boxruns, rich, ts-sdk, python-sdk, files, terminals, ports,
 * profile, density, bursts, peers, spawner).
 */
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import { detectSystemLayout } from '../libs/sandbox/src/backends/subprocess/bwrap-command';
import { BENCH_SITE_HOST, benchBrowser } from './browser';
import { benchBoxRuns } from './box-runs';
import { benchBursts } from './bursts';
import { benchBystander } from './bystander';
import { benchCheckpoints } from './checkpoints';
import { benchConsole } from './console';
import { benchContainers } from './containers';
import { benchDensity } from './density';
import { benchFileTransfer } from './file-transfer';
import { benchGraph } from './graph';
import { benchImageRoot } from './image-root';
import { benchSpawner } from './spawner';
import { benchKernels } from './kernels';
import { benchRichResults } from './rich-results';
import { benchPorts } from './ports';
import { benchProfile } from './profile';
import { benchTsSdk } from './ts-sdk';
import { benchPythonSdk } from './python-sdk';
import { benchKubernetes } from './kubernetes';
import { benchPeers } from './peers';
import { benchReplicas } from './replicas';
import { benchSessions } from './sessions';
import { benchTerminals } from './terminals';
import { interleave, withLoad } from './interleave';
import { median, ms, pct, PYTHON, timeSpawn } from './stats';

const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const THROUGHPUT_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CLIENTS = 16;
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const wanted = (section: string): boolean => !ONLY || ONLY.includes(section);
/** A bare bubblewrap sandbox with the tier's namespaces and system mounts, none of the engine's bookkeeping. */
function rawBwrapArgs(workspace: string): string[] {
  return [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--uid',
    '65534',
    '--gid',
    '65534',
    ...detectSystemLayout().args,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    '--bind',
    workspace,
    '/workspace',
    '--chdir',
    '/workspace',
    PYTHON,
    '-c',
    'print(1)',
  ];
}

/** Runs the clients in a separate process: a real agent's requests do not share the engine's event loop. */
function runLoadClient(
  base: string,
  seconds: number,
  sessions: string[],
): Promise<{ succeeded: number; failed: number; seconds: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(__dirname, 'load-client.js'), base, String(seconds), ...sessions],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(JSON.parse(out) as { succeeded: number; failed: number; seconds: number })
        : reject(new Error(`load client exit ${code}`)),
    );
  });
}

async function sample(n: number, fn: () => Promise<number>): Promise<number[]> {
  for (let i = 0; i < 3; i++) await fn(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < n; i++) xs.push(await fn());
  return xs;
}

async function main(): Promise<void> {
  if (wanted('core')) await withLoad('core', () => benchCore());
  if (wanted('containers')) await withLoad('containers', () => benchContainers({ runs: RUNS }));
  if (wanted('graph')) await withLoad('graph', () => benchGraph({ runs: RUNS }));
  if (wanted('bystander')) await withLoad('bystander', () => benchBystander({ runs: RUNS }));
  if (wanted('sessions')) await withLoad('sessions', () => benchSessions());
  if (wanted('kernels')) await withLoad('kernels', () => benchKernels({ runs: RUNS }));
  if (wanted('checkpoints')) await withLoad('checkpoints', () => benchCheckpoints({ runs: RUNS }));
  if (wanted('console')) await withLoad('console', () => benchConsole({ runs: RUNS }));
  if (wanted('kubernetes')) await withLoad('kubernetes', () => benchKubernetes({ runs: RUNS }));
  if (wanted('replicas')) await withLoad('replicas', () => benchReplicas({ runs: RUNS }));
  if (wanted('rootfs')) await withLoad('rootfs', () => benchImageRoot({ runs: RUNS }));
  if (wanted('boxruns')) await withLoad('boxruns', () => benchBoxRuns({ runs: RUNS }));
  if (wanted('rich')) await withLoad('rich', () => benchRichResults({ runs: RUNS }));
  if (wanted('ts-sdk')) await withLoad('ts-sdk', () => benchTsSdk({ runs: RUNS }));
  if (wanted('python-sdk')) await withLoad('python-sdk', () => benchPythonSdk({ runs: RUNS }));
  if (wanted('files')) await withLoad('files', () => benchFileTransfer());
  if (wanted('terminals')) await withLoad('terminals', () => benchTerminals({ runs: RUNS }));
  if (wanted('ports')) await withLoad('ports', () => benchPorts({ runs: RUNS }));
  if (wanted('profile')) await withLoad('profile', () => benchProfile({ runs: RUNS }));
  if (wanted('density')) await withLoad('density', () => benchDensity());
  if (wanted('bursts')) await withLoad('bursts', () => benchBursts());
  if (wanted('peers')) await withLoad('peers', () => benchPeers());
  if (wanted('spawner')) await withLoad('spawner', () => benchSpawner({ runs: RUNS }));
}

/** Sections 1–3: print(1), file actions, the browser (one engine). */
async function benchCore(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-'));
  const rawWs = path.join(dataDir, 'raw-ws');
  mkdirSync(rawWs);
  const app = await createEngineApp(
    loadEngineConfig({
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_LOG_LEVEL: 'error',
      // The browser section serves its page there.
      SWITCHYARD_BROWSER_ALLOWLIST: BENCH_SITE_HOST,
    }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const post = async (url: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${base}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.json();
  };

  try {
    console.log(
      `Switchyard bench — node ${process.version}, ${os.cpus().length} cores, ${RUNS} runs per median\n`,
    );

    // 1. python print(1)
    const sid: string = (await post('/v1/sessions')).id;
    // Interleaved, the order rotating, so the machine's load hits the three sides alike.
    const { raw, bwrap, api } = await interleave(RUNS, {
      raw: () => timeSpawn(PYTHON, ['-c', 'print(1)'], rawWs),
      bwrap: () => timeSpawn('bwrap', rawBwrapArgs(rawWs), rawWs),
      api: async () => {
        const t0 = performance.now();
        const r = await post(`/v1/sessions/${sid}/actions`, {
          type: 'code',
          language: 'python',
          code: 'print(1)',
        });
        if (r.status !== 'succeeded' || r.stdout !== '1\n' || r.tier !== 'subprocess') {
          throw new Error(`code action did not succeed: ${JSON.stringify(r)}`);
        }
        return performance.now() - t0;
      },
    });
    console.log('python print(1)');
    const row = (xs: number[]) =>
      `median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}`;
    console.log(`  raw spawn            ${row(raw)}   (${RUNS} runs, interleaved)`);
    console.log(
      `  raw bubblewrap       ${row(bwrap)}   (${(median(bwrap) / median(raw)).toFixed(2)}x raw spawn)`,
    );
    console.log(`  API subprocess tier  ${row(api)}`);
    const ratio = median(api) / median(bwrap);
    console.log(
      `  ratio API / raw bubblewrap = ${ratio.toFixed(2)}x (target <= 1.30) ${ratio <= 1.3 ? 'OK' : 'MISSED'}`,
    );
    console.log(`  ratio API / raw spawn      = ${(median(api) / median(raw)).toFixed(2)}x\n`);

    // 2. file write + read pair
    const fsid: string = (await post('/v1/sessions')).id;
    const pair = await sample(RUNS * 5, async () => {
      const t0 = performance.now();
      const w = await post(`/v1/sessions/${fsid}/actions`, {
        type: 'file',
        op: 'write',
        path: 'a.txt',
        content: 'hello',
      });
      const r = await post(`/v1/sessions/${fsid}/actions`, { type: 'file', op: 'read', path: 'a.txt' });
      if (w.status !== 'succeeded' || r.output?.content !== 'hello') throw new Error('file pair failed');
      return performance.now() - t0;
    });
    console.log('file write+read pair (one client)');
    console.log(`  median ${ms(median(pair))}   p99 ${ms(pct(pair, 99))}\n`);

    // 3. throughput, 16 clients, each on its own session, every action recorded
    const sessions: string[] = [];
    for (let i = 0; i < CLIENTS; i++) sessions.push((await post('/v1/sessions')).id);
    const load = await runLoadClient(base, THROUGHPUT_SECONDS, sessions);
    const done = load.succeeded;
    const failed = load.failed;
    const elapsed = load.seconds;
    let recorded = 0;
    for (const s of sessions) {
      let cursor: string | undefined;
      do {
        const page = (await (
          await fetch(`${base}/v1/sessions/${s}/actions?limit=1000${cursor ? `&cursor=${cursor}` : ''}`)
        ).json()) as { actions: unknown[]; nextCursor?: string };
        recorded += page.actions.length;
        cursor = page.nextCursor;
      } while (cursor);
    }
    const rate = done / elapsed;
    console.log(`file actions, ${CLIENTS} concurrent clients, ${THROUGHPUT_SECONDS} s`);
    console.log(
      `  ${rate.toFixed(0)} actions/s (target >= 1000) ${rate >= 1000 ? 'OK' : 'MISSED'}; failed ${failed}`,
    );
    console.log(
      `  recorded in the graph: ${recorded} of ${done + failed} ${recorded === done + failed ? '(all)' : '(MISSING)'}`,
    );
    console.log('');

    // Browser (header item 3, bench/browser.ts)
    await benchBrowser(post, RUNS);
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
