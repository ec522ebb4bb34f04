/**
 * What every benchmark measures with: one definition of median and percentile, so the numbers of the sections
 * compare, and the raw-spawn baseline the code tiers are held against.
 */
import { spawn } from 'node:child_process';

export const PYTHON = '/usr/bin/python3';

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
/** The upper median. */
export const median = (xs: number[]): number => sorted(xs)[xs.length >> 1];
export const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Nearest-rank percentile. */
export const pct = (xs: number[], p: number): number =>
  sorted(xs)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)];
export const ms = (n: number, digits = 2): string => `${n.toFixed(digits)} ms`;

/** Spawns `command` (which must print `1`) with a minimal environment; resolves with its wall time in ms. */
export function timeSpawn(command: string, args: string[], cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, {
      cwd,
      env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 && out.trim() === '1'
        ? resolve(performance.now() - t0)
        : reject(new Error(`${command} exit ${code}: ${out}`)),
    );
  });
}

/**
 * Prints two sides measured in one run (`base` first): each side's median, p90 and p99 with its run count, then the
 * ratio `side / base` at the median and p90 against `target`.
 */
export function printRatio(
  title: string,
  base: { name: string; times: number[] },
  side: { name: string; times: number[] },
  target: number,
): void {
  const line = (name: string, xs: number[]) =>
    `  ${name.padEnd(34)} median ${ms(median(xs))}   p90 ${ms(pct(xs, 90))}   p99 ${ms(pct(xs, 99))}   (${xs.length} runs)`;
  console.log(title);
  console.log(line(base.name, base.times));
  console.log(line(side.name, side.times));
  for (const [what, f] of [
    ['median', median],
    ['p90', (xs: number[]) => pct(xs, 90)],
  ] as const) {
    const ratio = f(side.times) / f(base.times);
    console.log(
      `  ratio ${what.padEnd(6)} = ${ratio.toFixed(2)}x (target <= ${target.toFixed(2)}) ${ratio <= target ? 'OK' : 'MISSED'}`,
    );
  }
  console.log('');
}
