/**
 * Session create and delete through the API with capped workspaces (`SWITCHYARD_WORKSPACE_QUOTA=loop`: each
 * workspace its own loop-mounted ext4 image) against the same engine without (`off`): two engines
 * (`createEngineApp`, as `run.ts` does) in one run, their samples interleaved so that drift hits both alike. Each
 * sample creates a session (timed), writes one small file through the file API (not timed, so the delete has
 * something to remove) and deletes the session (timed). Sessions arrive one at a time, `gapMs` apart: the capped
 * side's background work (replacing the spare image a create took, deleting a removed image) is done before the
 * next sample of either side, so that neither pays for the other's. Needs root, `mkfs.ext4` and loop devices.
 * Called by `run.ts`; `node dist/bench/sessions.js` runs it alone.
 *
 * A third sample, on the capped engine, is the delete of a session that ran a pooled `print(1)` (its own container,
 * bind-mounted workspace): a delete answers once the session is durably ended, and its container, mounts and image go
 * in the background; the time until that teardown has finished is reported beside it (not on the answer's path), and
 * waited for before the next sample.
 *
 * Reported: p50/p90/p99 of create and delete on each side, the run counts, the ratios, and the load average before
 * and after. Targets: create p50 and delete p50 with the quota <= 1.5x without; every delete p50 <= 15 ms.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import { SessionsService } from '../apps/engine/src/session/sessions/sessions.service';
import { median, ms, pct } from './stats';

const TARGET_RATIO = 1.5;
const WARM_UP = 5;
const DELETE_TARGET_MS = 15;
const loadAverage = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

export interface SessionBenchOptions {
  /** Create/delete pairs measured on each side. Default `BENCH_SESSION_RUNS` or 100. */
  runs?: number;
  /** Pause after each sample. Default `BENCH_SESSION_GAP_MS` or 50. */
  gapMs?: number;
}

interface Side {
  name: string;
  app: INestApplication;
  dataDir: string;
  base: string;
  create: number[];
  remove: number[];
  /** Deletes of sessions that ran a pooled print(1), and from each delete until its teardown finished. */
  removePooled: number[];
  tornDown: number[];
}

async function startSide(name: string, quota: 'loop' | 'off'): Promise<Side> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `switchyard-bench-sessions-${quota}-`));
  const app = await createEngineApp(
    loadEngineConfig({
      SWITCHYARD_DATA_DIR: dataDir,
      SWITCHYARD_LOG_LEVEL: 'error',
      SWITCHYARD_WORKSPACE_QUOTA: quota,
      // No warm containers competing for the CPU: the pooled samples claim theirs cold (not timed).
      SWITCHYARD_POOL_MIN: '0',
    }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  return { name, app, dataDir, base, create: [], remove: [], removePooled: [], tornDown: [] };
}

async function call(side: Side, method: string, url: string, expected: number, body?: unknown): Promise<any> {
  const res = await fetch(`${side.base}${url}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== expected)
    throw new Error(`${side.name}: ${method} ${url} answered ${res.status}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** One create (timed), one file write, one delete (timed). */
async function sample(side: Side, record: boolean): Promise<void> {
  let t0 = performance.now();
  const { id } = (await call(side, 'POST', '/v1/sessions', 201, {})) as { id: string };
  const created = performance.now() - t0;
  const write = { type: 'file', op: 'write', path: 'notes.txt', content: 'hello' };
  const written = await call(side, 'POST', `/v1/sessions/${id}/actions`, 200, write);
  if (written.status !== 'succeeded') throw new Error(`${side.name}: file write ${JSON.stringify(written)}`);
  t0 = performance.now();
  await call(side, 'DELETE', `/v1/sessions/${id}`, 204);
  const removed = performance.now() - t0;
  if (record) {
    side.create.push(created);
    side.remove.push(removed);
  }
}

/** A session that ran a pooled print(1), deleted (timed), then its background teardown waited for (timed apart). */
async function samplePooled(side: Side, record: boolean): Promise<void> {
  const { id } = (await call(side, 'POST', '/v1/sessions', 201, {})) as { id: string };
  const code = { type: 'code', language: 'python', code: 'print(1)', tier: 'pooled' };
  const ran = await call(side, 'POST', `/v1/sessions/${id}/actions`, 200, code);
  if (ran.status !== 'succeeded' || ran.tier !== 'pooled')
    throw new Error(`pooled print(1) ${JSON.stringify(ran)}`);
  const t0 = performance.now();
  await call(side, 'DELETE', `/v1/sessions/${id}`, 204);
  const removed = performance.now() - t0;
  await side.app.get(SessionsService).settled();
  const tornDown = performance.now() - t0;
  if (record) {
    side.removePooled.push(removed);
    side.tornDown.push(tornDown);
  }
}

const line = (label: string, xs: number[]) =>
  `  ${label.padEnd(22)} p50 ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;

function verdict(what: string, capped: number[], uncapped: number[]): string {
  const ratio = median(capped) / median(uncapped);
  const ok = ratio <= TARGET_RATIO ? 'OK' : 'MISSED';
  return `  ratio ${what} p50 quota / no quota = ${ratio.toFixed(2)}x (target <= ${TARGET_RATIO.toFixed(2)}) ${ok}`;
}

export async function benchSessions(options: SessionBenchOptions = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_SESSION_RUNS ?? 100);
  const gapMs = options.gapMs ?? Number(process.env.BENCH_SESSION_GAP_MS ?? 50);
  const capped = await startSide('quota loop', 'loop');
  const uncapped = await startSide('quota off', 'off');
  const loadBefore = loadAverage();
  try {
    for (let i = 0; i < WARM_UP + runs; i++) {
      // Rotate which sample goes first, so none always follows another's background work.
      const samples = [
        () => sample(capped, i >= WARM_UP),
        () => sample(uncapped, i >= WARM_UP),
        () => samplePooled(capped, i >= WARM_UP),
      ];
      for (let k = 0; k < samples.length; k++) {
        await samples[(i + k) % samples.length]();
        await new Promise((resolve) => setTimeout(resolve, gapMs));
      }
    }
    console.log(
      `session create / delete through the API (one client, interleaved, ${gapMs} ms apart; ` +
        `load average before ${loadBefore}, after ${loadAverage()})`,
    );
    console.log(line('create, quota loop', capped.create));
    console.log(line('create, quota off', uncapped.create));
    console.log(line('delete, quota loop', capped.remove));
    console.log(line('delete, quota off', uncapped.remove));
    console.log(line('delete, ran pooled', capped.removePooled));
    console.log(line('  its teardown done', capped.tornDown));
    console.log(verdict('create', capped.create, uncapped.create));
    console.log(verdict('delete', capped.remove, uncapped.remove));
    for (const [what, xs] of [
      ['quota loop', capped.remove],
      ['quota off', uncapped.remove],
      ['ran pooled', capped.removePooled],
    ] as const) {
      const p50 = median(xs);
      console.log(
        `  delete p50, ${what.padEnd(10)} = ${ms(p50)} (target <= ${DELETE_TARGET_MS} ms) ${p50 <= DELETE_TARGET_MS ? 'OK' : 'MISSED'}`,
      );
    }
    console.log('');
  } finally {
    for (const side of [capped, uncapped]) {
      await side.app.close();
      fs.rmSync(side.dataDir, { recursive: true, force: true });
    }
  }
}

if (require.main === module) {
  benchSessions().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
