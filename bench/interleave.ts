/**
 * How every section samples and what it prints around itself: sides measured in one loop with the order rotating
 * (A, B, C; B, C, A; C, A, B…), so drift and other jobs on the machine hit every side alike and no side always
 * runs right after the same other one; and the load average before and after, so each figure states the load it was
 * taken under.
 */
import * as os from 'node:os';

/** The 1, 5 and 15 minute load averages, and the core count they are out of. */
export function loadAverage(): string {
  return `${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ')} (1 / 5 / 15 min, ${os.cpus().length} cores)`;
}

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
