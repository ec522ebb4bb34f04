/**
 * How every section samples and what it prints around itself: sides measured in one loop with the order rotating
 * (A, B, C; B, C, A; C, A, B…), so drift and other jobs on the machine hit every side alike and no side always
 * runs right after the same other one; and the load average before and after, so each figure states the load it was
 * taken under.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';

/** The 1, 5 and 15 minute load averages, and the core count they are out of. */
export function loadAverage(): string {
  return `${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ')} (1 / 5 / 15 min, ${os.cpus().length} cores)`;
}

/**
 * Busy and total CPU time of the whole machine so far (all cores), in ms, from /proc/stat: the difference over a
 * stretch is what everything on the host (the engine, Docker, the kernel, other jobs) used.
 */
export function machineCpuMs(): { busy: number; total: number } {
  const fields = fs
    .readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0) * MS_PER_TICK;
  const idle = (fields[3] + fields[4]) * MS_PER_TICK; // idle + iowait
  return { busy: total - idle, total };
}

/** /proc/stat counts in USER_HZ ticks: 100 per second on every Linux architecture the engine runs on. */
const MS_PER_TICK = 10;

/** Runs one section between two load average lines. */
export async function withLoad(section: string, run: () => Promise<void>): Promise<void> {
  console.log(`\n[${section}] load average before: ${loadAverage()}`);
  try {
    await run();
  } finally {
    console.log(`[${section}] load average after: ${loadAverage()}`);
  }
}

/**
 * `runs` samples of each side, interleaved with the order rotating each round, after `warmUp` rounds that are not
 * kept. Each side resolves with its own measure of one sample (usually its wall time in ms).
 */
export async function interleave<K extends string>(
  runs: number,
  sides: Record<K, () => Promise<number>>,
  warmUp = 3,
): Promise<Record<K, number[]>> {
  const names = Object.keys(sides) as K[];
  const samples = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  for (let round = 0; round < warmUp + runs; round++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(round + k) % names.length];
      const x = await sides[name]();
      if (round >= warmUp) samples[name].push(x);
    }
  }
  return samples;
}
