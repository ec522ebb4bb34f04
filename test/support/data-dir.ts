import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';

/**
 * Removes an engine's data dir. A killed engine (SIGKILL) leaves its capped workspaces mounted; they are unmounted
 * first, deepest first, so the removal neither fails with EBUSY nor leaks loop devices.
 */
export function removeDataDir(dir: string): void {
  const prefix = `${path.resolve(dir)}/`;
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) =>
      (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) =>
        String.fromCharCode(parseInt(o, 8)),
      ),
    )
    .filter((m) => m.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
  rmSync(dir, { recursive: true, force: true });
}
