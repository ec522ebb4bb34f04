import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';

/**
 * `<hostname>:<pid>:<start ticks>:<instance>`: the pid alone could be reused by a later process, and one process may
 * hold several engines (tests, embedders), each of which must remove only its own containers.
 */
export function defaultEngineInstanceId(pid: number = process.pid): string {
  const instance = randomBytes(4).toString('hex');
  return `${labelSafeHostname(os.hostname())}:${pid}:${processStartTicks(pid) ?? 0}:${instance}`;
}

/**
 * True when `engineInstanceId` has the default shape and names a process that is running on this host right now:
 * such an engine's containers are never reaped. Unknown shapes and other hosts are not provably alive.
 */
export function engineAliveHere(engineInstanceId: string, hostname: string = os.hostname()): boolean {
  const id = engineOnThisHost(engineInstanceId, hostname);
  return id !== undefined && processStartTicks(id.pid) === id.ticks;
}

/**
 * True when `engineInstanceId` has the default shape, names this host, and its process no longer runs (or its pid now
 * belongs to a later process): whatever such an engine started is a leftover nobody will ever read. Ids of other
 * hosts and of unknown shapes are never dead from here.
 */
export function engineDeadHere(engineInstanceId: string, hostname: string = os.hostname()): boolean {
  return (
    engineOnThisHost(engineInstanceId, hostname) !== undefined && !engineAliveHere(engineInstanceId, hostname)
  );
}

/** The pid and start ticks of an id of the default shape naming this host; undefined for anything else. */
export function engineOnThisHost(
  engineInstanceId: string,
  hostname: string = os.hostname(),
): { pid: number; ticks: string } | undefined {
  // The hostname part is label-safe (no ":"); ids without the instance part come from earlier versions.
  const parts = engineInstanceId.split(':');
  if (parts.length !== 3 && parts.length !== 4) return undefined;
  const [host, pidText, ticks] = parts as [string, string, string];
  const pid = Number(pidText);
  if (host !== labelSafeHostname(hostname) || !Number.isSafeInteger(pid) || pid <= 0) return undefined;
  return { pid, ticks };
}

function labelSafeHostname(hostname: string): string {
  return hostname.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64) || 'host';
}

/** Field 22 of `/proc/<pid>/stat` (start time in clock ticks), or undefined when there is no such process. */
export function processStartTicks(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}
