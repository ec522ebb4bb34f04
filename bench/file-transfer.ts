/**
 * File transfer for real sizes, in one run: a 100 MiB and a 1 GiB file uploaded (`PUT …/files/content`) and downloaded
 * (`GET …/files/content`) through the API by `curl`, against two baselines sampled between the API's samples so all
 * see the same machine:
 * - `cp` of the same file between the host's disk and the session's workspace (the same loop-mounted image the API
 *   writes to): what the bytes cost without HTTP, the engine or its checks;
 * - `docker cp` of the same file into and out of a running container of the sandbox image: what moving files into a
 *   sandbox costs elsewhere.
 * Every op starts after a `sync` (not timed), so none pays for the writeback of the one before. Each line: median and
 * p90 wall time with the run count, MB/s at the median, and the API's ratio to each baseline.
 * The engine's RSS (this process: the engine runs in it, `curl` is the client) before, at its peak while transferring
 * and after: it should stay flat however large the file. Called by `run.ts` (`BENCH_ONLY=files`); needs root and
 * Docker with the sandbox image.
 */
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { startEngine, timed } from './engine-client';
import { median, pct } from './stats';

const run = promisify(execFile);
const MiB = 1024 * 1024;
const SIZES = [100 * MiB, 1024 * MiB];
const RUNS = Number(process.env.BENCH_FILE_RUNS ?? 5);

const seconds = (xs: number[]) =>
  `median ${(median(xs) / 1000).toFixed(2)} s   p90 ${(pct(xs, 90) / 1000).toFixed(2)} s`;
const mbps = (bytes: number, msTaken: number) => `${(bytes / 1e6 / (msTaken / 1000)).toFixed(0)} MB/s`;
const mib = (n: number) => `${(n / MiB).toFixed(0)} MiB`;

/** A file of `size` random bytes on the host's disk (written in 16 MiB pieces). */
function randomFile(file: string, size: number): void {
  const fd = fs.openSync(file, 'w');
  try {
    const block = Buffer.alloc(16 * MiB);
    for (let done = 0; done < size; done += block.length) {
      for (let i = 0; i < block.length; i += 4) block.writeUInt32LE((Math.random() * 2 ** 32) >>> 0, i);
      fs.writeSync(fd, block, 0, Math.min(block.length, size - done));
    }
  } finally {
    fs.closeSync(fd);
  }
}

export async function benchFileTransfer(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? RUNS;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-files-'));
  const hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-files-host-'));
  // Room for the API's file, cp's copy and an overwrite's temporary file at 1 GiB.
  const engine = await startEngine(dataDir, { SWITCHYARD_MAX_WORKSPACE_BYTES: String(4096 * MiB) });
  const base = (engine.app.getHttpServer() as { address(): { port: number } }).address().port;
  const api = `http://127.0.0.1:${base}`;
  let container: string | undefined;
  let peak = 0;
  let sampler: NodeJS.Timeout | undefined;
  try {
    const health = (await engine.call('GET', '/health')) as {
      tiers: Record<string, { available: boolean; details?: { image?: string } }>;
    };
    const image = health.tiers.pooled?.details?.image;
    if (!image) throw new Error('bench: no sandbox image (run as root after `npm run sandbox:image`)');
    container = (
      await run('docker', ['run', '-d', '--rm', '--entrypoint', 'sleep', image, 'infinity'])
    ).stdout.trim();
    const sid = await engine.newSession();
    const ws = path.join(dataDir, 'workspaces', sid);
    global.gc?.();
    const before = process.memoryUsage.rss();
    peak = before;
    sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 50);
    console.log(
      `\nfile transfer — ${os.cpus().length} cores, ${runs} runs per median; API through curl, cp into the workspace ` +
        `image, docker cp into a running ${image} container`,
    );

    for (const size of SIZES) {
      const src = path.join(hostDir, `src-${size}.bin`);
      const back = path.join(hostDir, `back-${size}.bin`);
      randomFile(src, size);
      const times: Record<string, number[]> = {};
      const add = (k: string, t: number) => (times[k] ??= []).push(t);
      const curl = (...args: string[]) => run('curl', ['-sS', '--fail', ...args], { maxBuffer: 1024 * 1024 });
      // One warm-up of each, then the samples interleaved.
      for (let i = -1; i < runs; i++) {
        const keep = i >= 0;
        // Each op starts with the page cache's dirty data written back (`sync`, not timed): otherwise whichever op
        // follows a big write pays for its writeback.
        const op = async (fn: () => Promise<unknown>) => {
          await run('sync');
          return timed(fn);
        };
        const t = {
          apiUp: await op(() =>
            curl(
              '-T',
              src,
              '-H',
              'content-type: application/octet-stream',
              `${api}/v1/sessions/${sid}/files/content?path=big.bin`,
            ),
          ),
          cpUp: await op(() => run('cp', [src, path.join(ws, 'cp.bin')])),
          dockerUp: await op(() => run('docker', ['cp', src, `${container}:/tmp/big.bin`])),
          apiDown: await op(() => curl('-o', back, `${api}/v1/sessions/${sid}/files/content?path=big.bin`)),
          cpDown: await op(() => run('cp', [path.join(ws, 'cp.bin'), back])),
          dockerDown: await op(() => run('docker', ['cp', `${container}:/tmp/big.bin`, back])),
        };
        fs.rmSync(path.join(ws, 'cp.bin'), { force: true });
        if (keep) for (const [k, v] of Object.entries(t)) add(k, v);
      }
      if (fs.statSync(back).size !== size) throw new Error('bench: a download came back short');
      console.log(`\n${mib(size)} (${runs} runs each)`);
      for (const [dir, label] of [
        ['Up', 'upload'],
        ['Down', 'download'],
      ] as const) {
        const apiT = times[`api${dir}`];
        for (const k of ['api', 'cp', 'docker']) {
          const xs = times[`${k}${dir}`];
          console.log(
            `  ${`${label} ${k === 'api' ? 'API (curl)' : k === 'cp' ? 'cp' : 'docker cp'}`.padEnd(22)} ${seconds(xs)}   ${mbps(size, median(xs))}`,
          );
        }
        console.log(
          `  ${label} ratio API/cp = ${(median(apiT) / median(times[`cp${dir}`])).toFixed(2)}x (p90 ${(pct(apiT, 90) / pct(times[`cp${dir}`], 90)).toFixed(2)}x)` +
            `   API/docker cp = ${(median(apiT) / median(times[`docker${dir}`])).toFixed(2)}x (p90 ${(pct(apiT, 90) / pct(times[`docker${dir}`], 90)).toFixed(2)}x)`,
        );
      }
      fs.rmSync(src, { force: true });
      fs.rmSync(back, { force: true });
    }
    clearInterval(sampler);
    global.gc?.();
    const after = process.memoryUsage.rss();
    console.log(
      `\nengine RSS (the engine runs in this process; curl is the client): before ${mib(before)}, peak while ` +
        `transferring ${mib(peak)}, after ${mib(after)}, with files of up to 1 GiB moved ${2 * (runs + 1)} times each way`,
    );
  } finally {
    clearInterval(sampler);
    if (container) await run('docker', ['rm', '-f', container]).catch(() => undefined);
    await engine.app.close();
    fs.rmSync(hostDir, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchFileTransfer().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
