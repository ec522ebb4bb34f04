import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { processStartTicks } from '../../core/engine-instance';

/**
 * Environment variable every launcher the tier spawns carries: `<engine pid>:<start ticks>:<pid namespace>`.
 * bubblewrap's processes keep it, the sandboxed code's environment does not (`--clearenv`); a successor engine finds
 * launchers of dead engines by it.
 */
export const ENGINE_MARK_ENV = 'SWITCHYARD_SANDBOX_ENGINE';

/**
 * The engine process that made a sandbox or a cgroup: its pid, and its start time in clock ticks (field 22 of
 * `/proc/<pid>/stat`) so that a later process reusing the pid is not taken for it.
 */
export interface EngineMark {
  pid: number;
  /** Absent in names of earlier versions (`e<pid>-<hex>`), which carry the pid only. */
  ticks?: string;
  /**
   * Inode of the engine's pid namespace (environment marks only). The pid means something only there: an engine in
   * a container shows on the host under another pid, and must not be taken for dead.
   */
  ns?: string;
}

let own: EngineMark | undefined;

/** Inode of this process's pid namespace, or undefined where /proc cannot tell. */
export function ownPidNamespace(): string | undefined {
  try {
    return /\[(\d+)\]/.exec(fs.readlinkSync('/proc/self/ns/pid'))?.[1];
  } catch {
    return undefined;
  }
}

/** This engine process's mark; read once. */
export function ownEngineMark(): EngineMark {
  own ??= { pid: process.pid, ticks: processStartTicks(process.pid), ns: ownPidNamespace() };
  return own;
}

/** The value of {@link ENGINE_MARK_ENV}. */
export function formatEngineMark(mark: EngineMark = ownEngineMark()): string {
  return `${mark.pid}:${mark.ticks ?? ''}:${mark.ns ?? ''}`;
}

/** Parses a value of {@link ENGINE_MARK_ENV}; undefined for anything else. */
export function parseEngineMark(value: string): EngineMark | undefined {
  const m = /^(\d+):(\d*):(\d*)$/.exec(value);
  return m ? { pid: Number(m[1]), ticks: m[2] || undefined, ns: m[3] || undefined } : undefined;
}

/**
 * Name of a per-run cgroup: `e<pid>-<ticks>-<suffix>`. The engine's identity in the name lets a successor tell
 * leftovers of dead engines from the groups of engines still running.
 */
export function cgroupName(suffix: string = randomBytes(6).toString('hex'), mark = ownEngineMark()): string {
  return `e${mark.pid}-${mark.ticks ?? 0}-${suffix}`;
}

/** The engine a cgroup name of {@link cgroupName}'s shape (or the earlier `e<pid>-<hex>`) names. */
export function engineOfCgroup(name: string): EngineMark | undefined {
  const m = /^e(\d+)-(?:(\d+)-)?[^-]+$/.exec(name);
  return m ? { pid: Number(m[1]), ticks: m[2] === '0' ? undefined : m[2] } : undefined;
}

/**
 * True when the engine of `mark` is certainly no longer running: its pid is gone, or now belongs to a process
 * started at another time. A mark without ticks counts as running while its pid exists (the safe side).
 */
export function engineGone(
  mark: EngineMark,
  startTicks: (pid: number) => string | undefined = processStartTicks,
): boolean {
  const ticks = startTicks(mark.pid);
  return ticks === undefined || (mark.ticks !== undefined && ticks !== mark.ticks);
}
