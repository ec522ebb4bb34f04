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
 * CPU time the whole machine has spent busy so far (user, nice, system, irq, softirq, over all cores, in ms), from
 * /proc/stat: the difference over a stretch is what everything on the host (the engine, Docker, the kernel) used.
 */
export function machineBusyMs(): number {
  const fields = fs
    .readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const [user, nice, system, , , irq, softirq] = fields;
  return ((user + nice + system + irq + softirq) * 1000) / CLOCK_TICKS;
}

/** USER_HZ: the unit of /proc/stat (100 on every Linux architecture the engine runs on). */
const CLOCK_TICKS = 100;

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
