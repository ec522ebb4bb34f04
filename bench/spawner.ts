/**
 * Section 25, spawner: what launching a process costs the engine's event loop, launching in the engine's own process
 * (`ChildProcessLauncher`: a fork of the engine) vs through the spawner (`SpawnerProcessLauncher`), with this process
 * holding a ballast so that it is as large as a busy engine. Two measures per launch of `/bin/true`, samples
 * interleaved: how long `launch()` holds the caller (its event loop can do nothing else meanwhile) and launch → closed.
 */
import { Logger } from '@nestjs/common';
import {
  ChildProcessLauncher,
  type LaunchedProcess,
  type ProcessLauncher,
  SpawnerProcessLauncher,
} from '@switchyard/sandbox';
import { interleave } from './interleave';
import { median, ms, pct } from './stats';

const BALLAST_MB = Number(process.env.BENCH_SPAWNER_BALLAST_MB ?? 512);

export async function benchSpawner(options: { runs: number }): Promise<void> {
  Logger.overrideLogger(['error']);
  // Touched pages: resident memory, whose page tables a fork copies.
  const ballast: Uint8Array[] = [];
  for (let i = 0; i < BALLAST_MB; i++) {
    const page = new Uint8Array(1 << 20);
    for (let j = 0; j < page.length; j += 4096) page[j] = 1;
    ballast.push(page);
  }
  const rssMb = Math.round(process.memoryUsage().rss / 2 ** 20);
  const launchers: Record<'engine' | 'spawner', ProcessLauncher> = {
    engine: new ChildProcessLauncher(),
    spawner: new SpawnerProcessLauncher(),
  };
  const held: Record<'engine' | 'spawner', number[]> = { engine: [], spawner: [] };
  const once = async (side: 'engine' | 'spawner'): Promise<number> => {
    const t0 = performance.now();
    const proc: LaunchedProcess = launchers[side].launch({
      command: '/bin/true',
      args: [],
      env: {},
      cwd: '/',
    });
    held[side].push(performance.now() - t0);
    for (const s of [proc.stdout, proc.stderr, proc.status]) s.resume();
    proc.stdin.end();
    proc.control.end();
    const exit = await proc.closed;
    if (exit.code !== 0) throw new Error(`/bin/true through the ${side}: ${JSON.stringify(exit)}`);
    return performance.now() - t0;
  };
  try {
    const wall = await interleave(options.runs, {
      engine: () => once('engine'),
      spawner: () => once('spawner'),
    });
    // The warm-up rounds' holds are not kept, as their wall times are not.
    for (const side of ['engine', 'spawner'] as const) held[side].splice(0, held[side].length - options.runs);
    console.log(
      `spawner: launching /bin/true with this process at ${rssMb} MB resident (${BALLAST_MB} MB ballast)`,
    );
    const line = (name: string, xs: number[]) =>
      `  ${name.padEnd(40)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;
    console.log(line('event loop held, in-process spawn', held.engine));
    console.log(line('event loop held, spawner', held.spawner));
    console.log(line('launch -> closed, in-process spawn', wall.engine));
    console.log(line('launch -> closed, spawner', wall.spawner));
    console.log(
      `  held: spawner / in-process ${(median(held.spawner) / median(held.engine)).toFixed(3)}x at the median; ` +
        `launch -> closed: ${(median(wall.spawner) / median(wall.engine)).toFixed(2)}x\n`,
    );
  } finally {
    (launchers.spawner as SpawnerProcessLauncher).onApplicationShutdown();
    ballast.length = 0;
  }
}
