import * as fs from 'node:fs';
import { processStartTicks } from '../../core/engine-instance';
import { ENGINE_MARK_ENV, engineGone, ownPidNamespace, parseEngineMark } from './engine-mark';

/** The few reads of the host's process table the reaper makes, so it can be tested against a fake. */
export interface ProcessTable {
  /** Inode of the reaper's own pid namespace: marks of engines in another one are not judged. */
  pidNamespace(): string | undefined;
  pids(): number[];
  /** `/proc/<pid>/environ` as it was at exec (NUL-separated); undefined when unreadable or gone. */
  environ(pid: number): string | undefined;
  startTicks(pid: number): string | undefined;
  /** SIGKILL; a process already gone is not an error. */
  kill(pid: number): void;
}

export const procProcessTable: ProcessTable = {
  pidNamespace: ownPidNamespace,
  pids: () =>
    fs
      .readdirSync('/proc')
      .filter((e) => /^\d+$/.test(e))
      .map(Number),
  environ: (pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
    } catch {
      return undefined; // gone, or not ours to read
    }
  },
  startTicks: processStartTicks,
  kill: (pid) => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  },
};

const MARK_PREFIX = `${ENGINE_MARK_ENV}=`;

/**
 * Kills the sandbox launchers of engines that are no longer running (SECURITY.md #23): every process whose
 * environment carries {@link ENGINE_MARK_ENV} naming a dead engine. Those are the launch chain and bubblewrap's
 * own processes (a fork keeps its parent's environment); the sandboxed code never carries the mark, and dies with
 * its pid namespace once bubblewrap is gone. Processes of running engines, of engines in another pid namespace
 * (whose pids this engine cannot check), and anything unmarked, are left alone. Returns the pids killed.
 */
export function reapOrphanedSandboxes(table: ProcessTable = procProcessTable): number[] {
  const killed: number[] = [];
  const ns = table.pidNamespace();
  const gone = new Map<string, boolean>();
  for (const pid of table.pids()) {
    if (pid === process.pid) continue;
    const environ = table.environ(pid);
    if (!environ?.includes(MARK_PREFIX)) continue;
    const value = environ
      .split('\0')
      .find((v) => v.startsWith(MARK_PREFIX))
      ?.slice(MARK_PREFIX.length);
    const mark = value === undefined ? undefined : parseEngineMark(value);
    if (value === undefined || !mark || mark.ns !== ns) continue;
    const dead = gone.get(value) ?? engineGone(mark, (p) => table.startTicks(p));
    gone.set(value, dead);
    if (!dead) continue;
    table.kill(pid);
    killed.push(pid);
  }
  return killed;
}
