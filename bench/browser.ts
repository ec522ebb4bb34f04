/**
 * Browser section of `npm run bench`: `navigate` + `extract text` of a local page through the API, in a
 * session whose context is warm, against the same two calls made with raw Playwright on the same Chromium
 * build with the same flags (a plain context: no egress proxy, no request interceptor, no HTTP, no graph).
 * Target: API ≤ 1.3× raw. Also the cost of a session's first browser action (its context, egress proxy and
 * first tab), against raw `newContext` + `newPage` + the same two calls.
 *
 * The page is served on 127.0.0.2, which the bench engine allowlists.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { DEFAULT_LAUNCH_ARGS } from '../libs/browser/src';
import { interleave } from './interleave';
import { median, ms } from './stats';

export const BENCH_SITE_HOST = '127.0.0.2';

const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>Bench page</title></head><body>
<h1>Quarterly report</h1>
${Array.from({ length: 20 }, (_, i) => `<p>Paragraph ${i}: the quick brown fox jumps over the lazy dog.</p>`).join('\n')}
<ul>${Array.from({ length: 10 }, (_, i) => `<li><a href="/item/${i}">Item ${i}</a></li>`).join('')}</ul>
</body></html>`;

type Post = (url: string, body?: unknown) => Promise<any>;

export async function benchBrowser(post: Post, runs: number): Promise<void> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(PAGE);
  });
  await new Promise<void>((resolve) => server.listen(0, BENCH_SITE_HOST, resolve));
  const url = `http://${BENCH_SITE_HOST}:${(server.address() as AddressInfo).port}/`;
  // The engine's own executable and flags: the same Chromium, driven directly.
  const raw = await chromium.launch({ executablePath: '/usr/bin/chromium', args: [...DEFAULT_LAUNCH_ARGS] });
  try {
    /** `durationMs` of the two actions: the time inside the engine (recording included), without HTTP. */
    const inside: number[] = [];
    const apiPair = async (sid: string): Promise<number> => {
      const t0 = performance.now();
      const nav = await post(`/v1/sessions/${sid}/actions`, { type: 'browser', op: 'navigate', url });
      const text = await post(`/v1/sessions/${sid}/actions`, {
        type: 'browser',
        op: 'extract',
        mode: 'text',
      });
      if (nav.status !== 'succeeded' || !String(text.output?.data?.content).includes('Quarterly report')) {
        throw new Error(`browser action did not succeed: ${JSON.stringify(nav)} ${JSON.stringify(text)}`);
      }
      inside.push(Number(nav.durationMs) + Number(text.durationMs));
      return performance.now() - t0;
    };
    const rawContext = await raw.newContext();
    const rawPage = await rawContext.newPage();
    const rawPair = async (page = rawPage): Promise<number> => {
      const t0 = performance.now();
      await page.goto(url);
      const text = await page.locator('body').innerText();
      if (!text.includes('Quarterly report')) throw new Error('raw extract failed');
      return performance.now() - t0;
    };

    // First action of a session: the shared browser is already up (another session used it).
    const warmup: string = (await post('/v1/sessions')).id;
    await apiPair(warmup);
    const firstApi: number[] = [];
    const firstRaw: number[] = [];
    for (let i = 0; i < Math.max(5, Math.floor(runs / 4)); i++) {
      const sid: string = (await post('/v1/sessions')).id;
      firstApi.push(await apiPair(sid));
      const t0 = performance.now();
      const ctx = await raw.newContext();
      await rawPair(await ctx.newPage());
      firstRaw.push(performance.now() - t0);
      await ctx.close();
    }

    // Warm pairs, interleaved so that load on the machine hits both sides alike.
    const sid: string = (await post('/v1/sessions')).id;
    for (let i = 0; i < 3; i++) {
      await apiPair(sid);
      await rawPair();
    }
    inside.length = 0;
    const { api, raw: rawTimes } = await interleave(
      runs,
      { api: () => apiPair(sid), raw: () => rawPair() },
      0,
    );

    const ratio = median(api) / median(rawTimes);
    console.log('browser navigate + extract text (local page, warm session context)');
    console.log(`  raw Playwright       median ${ms(median(rawTimes), 1)}`);
    console.log(
      `  API browser tier     median ${ms(median(api), 1)}   (inside the engine: ${ms(median(inside), 1)})`,
    );
    console.log(
      `  ratio API / raw Playwright = ${ratio.toFixed(2)}x (target <= 1.30) ${ratio <= 1.3 ? 'OK' : 'MISSED'}`,
    );
    console.log("browser: a session's first action (context + egress proxy + first tab, then the same pair)");
    console.log(`  raw newContext+newPage+pair median ${ms(median(firstRaw), 1)}`);
    console.log(`  API first pair               median ${ms(median(firstApi), 1)}`);
    console.log(
      `  context creation cost (API first pair - API warm pair) = ${ms(median(firstApi) - median(api), 1)}\n`,
    );
  } finally {
    await raw.close();
    server.close();
  }
}
