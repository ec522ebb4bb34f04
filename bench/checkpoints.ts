/**
 * Checkpoints against `cp -a` of the same tree, in one run: a session's workspace of 100 MB in 10 000 files (100
 * directories of 100 files of 10 KB), on the engine's default workspace images (btrfs where it can).
 * - checkpoint: `POST …/checkpoints`. Target: p50 <= 0.1x `cp -a` of the workspace.
 * - restore: after an action's worth of damage (100 files rewritten, 100 deleted, 100 added, one directory gone),
 *   `POST …/checkpoints/:id/restore`. Target: p50 <= 0.3x `cp -a`.
 * - fork: `POST …/fork` (a new session with a copy of the workspace, deleted after each run). Target: p50 <= 0.3x.
 * - disk: what an unchanged checkpoint adds to the workspace image on the host disk. Target: <= 5% of the workspace.
 * Two baselines, sampled between the engine's samples so all see the same machine: `cp -a` of the workspace itself
 * (out of its image to the host's disk), and `cp -a` of an identical tree from the host's disk to the host's disk. Called by `run.ts`;
 * `node dist/bench/checkpoints.js` runs it alone.
 */
import 'reflect-metadata';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import { median, ms, pct } from './stats';

const DIRS = 100;
const FILES_PER_DIR = 100;
const FILE_BYTES = 10_000;
/** The sandbox uid owns workspace files, as if code had written them. */
const SANDBOX_UID = 65534;

const line = (label: string, xs: number[]): string =>
  `${label.padEnd(30)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;

const verdict = (label: string, ratio: number, target: number): string =>
  `  ratio ${label} = ${ratio.toFixed(3)}x (target <= ${target}) ${ratio <= target ? 'OK' : 'MISSED'}`;

/** 10 000 files of distinct contents in 100 directories, owned by the sandbox uid. */
function populate(workspace: string): void {
  const block = Buffer.alloc(FILE_BYTES);
  for (let d = 0; d < DIRS; d++) {
    const dir = path.join(workspace, `d${d}`);
    fs.mkdirSync(dir);
    for (let f = 0; f < FILES_PER_DIR; f++) {
      block.fill(d * FILES_PER_DIR + f);
      block.write(`${d}/${f}`);
      fs.writeFileSync(path.join(dir, `f${f}.bin`), block);
    }
  }
  execFileSync('chown', ['-R', `${SANDBOX_UID}:${SANDBOX_UID}`, workspace]);
  execFileSync('sync', ['-f', workspace]);
}

/** What a failed action leaves: 100 files rewritten, 100 deleted, 100 new ones, one directory gone. */
function damage(workspace: string, round: number): void {
  for (let f = 0; f < 100; f++) {
    fs.writeFileSync(path.join(workspace, 'd1', `f${f}.bin`), `rewritten ${round}`);
    fs.rmSync(path.join(workspace, 'd2', `f${f}.bin`), { force: true });
    fs.writeFileSync(path.join(workspace, `new-${f}.txt`), `new ${round}`);
  }
  fs.rmSync(path.join(workspace, 'd3'), { recursive: true, force: true });
}

/**
 * `cp -a` of the workspace to a fresh directory on the host's disk, as a copy-based checkpoint would. Spawned, not
 * run synchronously: the engine shares this process, and a blocked event loop would stall its connections.
 */
async function timeCopy(tree: string, scratch: string): Promise<number> {
  const dest = path.join(scratch, 'copy');
  await settle();
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn('cp', ['-a', tree, dest], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`cp -a exited ${code}`))));
  });
  const t = performance.now() - t0;
  await fs.promises.rm(dest, { recursive: true, force: true });
  return t;
}

/**
 * Writes back what earlier samples left dirty (untimed), before every sample of the engine and of the baselines:
 * without it each `cp -a` pays for the one before (100 MB of dirty pages, throttled to the disk's speed), and the
 * copies grow from under a second to 7 s.
 */
async function settle(): Promise<void> {
  await new Promise<void>((resolve) => spawn('sync', { stdio: 'ignore' }).on('close', () => resolve()));
}

/** Blocks the image file holds on the host disk. */
function allocated(file: string): number {
  return fs.statSync(file).blocks * 512;
}

export async function benchCheckpoints(options: { runs?: number } = {}): Promise<void> {
  const runs = Math.max(5, Math.floor((options.runs ?? Number(process.env.BENCH_RUNS ?? 40)) / 2));
  console.log(
    `\ncheckpoints of a ${(DIRS * FILES_PER_DIR * FILE_BYTES) / 1e6} MB, ${DIRS * FILES_PER_DIR}-file workspace vs cp -a`,
  );
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-checkpoints-'));
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-cp-'));
  const app = await createEngineApp(
    loadEngineConfig({
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'error',
      SWITCHYARD_MAX_CHECKPOINTS: '1000',
    }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const call = async (method: string, url: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : undefined;
  };
  const timed = async (method: string, url: string, body?: unknown): Promise<[number, any]> => {
    await settle();
    const t0 = performance.now();
    const answer = await call(method, url, body);
    return [performance.now() - t0, answer];
  };
  try {
    const sid: string = (await call('POST', '/v1/sessions')).id;
    const workspace = path.join(dataDir, 'workspaces', sid);
    populate(workspace);
    const kind = fs.existsSync(path.join(dataDir, 'workspaces.images', '.roots'))
      ? 'btrfs snapshots'
      : 'copies';
    console.log(`  workspace images: ${kind}`);
    const checkpoints = `/v1/sessions/${sid}/checkpoints`;

    // Disk: the image's blocks on the host before and after an unchanged checkpoint.
    const image = path.join(dataDir, 'workspaces.images', `${sid}.img`);
    execFileSync('sync', ['-f', workspace]);
    const before = allocated(image);
    const [, first] = await timed('POST', checkpoints, { label: 'disk' });
    execFileSync('sync', ['-f', workspace]);
    const extra = allocated(image) - before;

    // The second baseline: the same tree copied from the host's disk to the host's disk (no loop device on
    // either side), the cheapest `cp -a` this machine does.
    const hostTree = path.join(scratch, 'tree');
    execFileSync('cp', ['-a', workspace, hostTree]);
    const copy: number[] = [];
    const hostCopy: number[] = [];
    const baselines = async (): Promise<void> => {
      copy.push(await timeCopy(workspace, scratch));
      hostCopy.push(await timeCopy(hostTree, scratch));
    };
    const take: number[] = [];
    for (let i = 0; i < 2; i++) await timed('POST', checkpoints); // warm
    for (let i = 0; i < runs; i++) {
      await baselines();
      take.push((await timed('POST', checkpoints))[0]);
    }

    const restore: number[] = [];
    for (let i = 0; i < runs; i++) {
      damage(workspace, i);
      const [t, answer] = await timed('POST', `${checkpoints}/${first.id}/restore`);
      if (answer.restored.removed < 100) throw new Error(`restore did not undo: ${JSON.stringify(answer)}`);
      restore.push(t);
      await baselines();
    }

    const fork: number[] = [];
    for (let i = 0; i < runs; i++) {
      const [t, forked] = await timed('POST', `/v1/sessions/${sid}/fork`);
      fork.push(t);
      await call('DELETE', `/v1/sessions/${forked.id}`);
      await baselines();
    }

    const bytes = DIRS * FILES_PER_DIR * FILE_BYTES;
    console.log(`  ${line('cp -a of the workspace', copy)}`);
    console.log(`  ${line('cp -a host disk to host disk', hostCopy)}`);
    console.log(`  ${line('API checkpoint', take)}`);
    console.log(`  ${line('API restore (after damage)', restore)}`);
    console.log(`  ${line('API fork', fork)}`);
    console.log(verdict('checkpoint / cp -a', median(take) / median(copy), 0.1));
    console.log(verdict('restore / cp -a', median(restore) / median(copy), 0.3));
    console.log(verdict('fork / cp -a', median(fork) / median(copy), 0.3));
    console.log(verdict('checkpoint / host cp -a', median(take) / median(hostCopy), 0.1));
    console.log(verdict('restore / host cp -a', median(restore) / median(hostCopy), 0.3));
    console.log(verdict('fork / host cp -a', median(fork) / median(hostCopy), 0.3));
    const share = extra / bytes;
    console.log(
      `  extra disk for an unchanged checkpoint: ${(extra / 1024).toFixed(0)} KiB = ${(share * 100).toFixed(2)}% ` +
        `of the workspace (target <= 5%) ${share <= 0.05 ? 'OK' : 'MISSED'}`,
    );
  } finally {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchCheckpoints().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
