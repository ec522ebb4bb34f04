/**
 * What every benchmark measures with: one definition of median and percentile, so the numbers of the sections
 * compare, and the raw-spawn baseline the code tiers are held against.
 */
import { spawn } from 'node:child_process';

export const PYTHON = '/usr/bin/python3';

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
/** The upper median. */
export const median = (xs: number[]): number => sorted(xs)[xs.length >> 1];
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
