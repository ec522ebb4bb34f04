/**
 * The web console's timeline on a session of 10 000 actions, in headless Chromium, against raw baselines in the
 * same run:
 * - open: from `page.goto('/console#/sessions/<id>')` to its first rows drawn (the timeline is there and scrolls
 *   while the rest loads). Baseline: raw Playwright loading a tiny page of the same engine (`/health`), so the
 *   ratio is the console's cost over a bare page load.
 * - complete: until all 10 000 rows are loaded (10 pages of 1 000), against raw `fetch` of the same 10 pages from
 *   Node (the API's own cost). Target: p90 <= 1 s (the whole timeline open, not only its first rows).
 * - scroll: jumping to the end of the loaded list and drawing its last row.
 * The session is filled with file writes (the fastest action) by 16 concurrent clients. Called by `run.ts`;
 * `node dist/bench/console.js` runs it alone.
 */
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium } from 'playwright-core';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import { median, ms, pct } from './stats';

const ACTIONS = Number(process.env.BENCH_CONSOLE_ACTIONS ?? 10_000);

async function fill(base: string, sessionId: string): Promise<void> {
  let next = 0;
  const client = async () => {
    while (next < ACTIONS) {
      const i = next++;
      const res = await fetch(`${base}/v1/sessions/${sessionId}/actions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'file', op: 'write', path: `f${i % 100}.txt`, content: `line ${i}\n` }),
      });
      if (res.status !== 200) throw new Error(`fill: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: 16 }, client));
}

async function rawTimeline(base: string, sessionId: string): Promise<number> {
  const t0 = performance.now();
  let cursor: string | undefined;
  let count = 0;
  do {
    const res = await fetch(
      `${base}/v1/sessions/${sessionId}/actions?limit=1000${cursor ? `&cursor=${cursor}` : ''}`,
    );
    const page = (await res.json()) as { actions: unknown[]; nextCursor?: string };
    count += page.actions.length;
    cursor = page.nextCursor;
  } while (cursor);
  if (count !== ACTIONS) throw new Error(`raw timeline: ${count} actions, expected ${ACTIONS}`);
  return performance.now() - t0;
}

export async function benchConsole(options: { runs: number }): Promise<void> {
  const runs = Math.max(5, Math.min(options.runs, 20));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-console-'));
  const app = await createEngineApp(
    loadEngineConfig({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_LOG_LEVEL: 'error' }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu'],
  });
  try {
    const created = await fetch(`${base}/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    const { id: sessionId } = (await created.json()) as { id: string };
    const t0 = performance.now();
    await fill(base, sessionId);
    console.log(`console timeline: ${ACTIONS} actions recorded in ${ms(performance.now() - t0, 0)}`);

    const raw: number[] = [];
    const rawApi: number[] = [];
    const open: number[] = [];
    const complete: number[] = [];
    const scroll: number[] = [];
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    for (let i = 0; i < runs + 1; i++) {
      const page = await context.newPage();
      let t = performance.now();
      await page.goto(`${base}/health`);
      const rawMs = performance.now() - t;
      const apiMs = await rawTimeline(base, sessionId);

      t = performance.now();
      await page.goto(`${base}/console#/sessions/${sessionId}`);
      await page.locator('.rows [role="option"]').first().waitFor();
      const openMs = performance.now() - t;
      await page
        .getByTestId('timeline-count')
        .getByText(`${ACTIONS} actions`, { exact: true })
        .waitFor({ timeout: 60_000 });
      const completeMs = performance.now() - t;

      t = performance.now();
      await page.locator('.rows').focus();
      await page.keyboard.press('End');
      await page.locator(`.rows [data-index="${ACTIONS - 1}"]`).waitFor();
      const scrollMs = performance.now() - t;
      await page.close();
      if (i === 0) continue; // warm-up: the first load compiles the bundle
      raw.push(rawMs);
      rawApi.push(apiMs);
      open.push(openMs);
      complete.push(completeMs);
      scroll.push(scrollMs);
    }
    const line = (name: string, xs: number[]) =>
      console.log(
        `  ${name.padEnd(34)} median ${ms(median(xs), 0)}   p90 ${ms(pct(xs, 90), 0)}   p99 ${ms(pct(xs, 99), 0)}`,
      );
    console.log(`console timeline of ${ACTIONS} actions, ${runs} runs (headless Chromium, 1280 px)`);
    line('raw Playwright page load (/health)', raw);
    line('console: first rows drawn', open);
    line('raw fetch of the whole timeline', rawApi);
    line('console: all rows loaded', complete);
    line('console: End key to the last row', scroll);
    console.log(
      `  ratio first rows / raw page load = ${(median(open) / median(raw)).toFixed(2)}x;` +
        ` all loaded / raw fetch = ${(median(complete) / median(rawApi)).toFixed(2)}x;` +
        ` target all rows p90 <= 1000 ms: ${pct(complete, 90) <= 1000 ? 'met' : 'MISSED'}\n`,
    );
  } finally {
    await browser.close();
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchConsole({ runs: Number(process.env.BENCH_RUNS ?? 10) }).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
