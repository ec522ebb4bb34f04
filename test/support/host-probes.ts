import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statfsSync } from 'node:fs';
import { promisify } from 'node:util';

/**
 * What the e2e tests observe from outside the engine: Docker's view of the sandbox containers and the host's
 * process table and disk. Everything is asynchronous where it may be called while an in-process engine is
 * serving a request, so the engine's event loop is never blocked by a probe.
 */

const execFileAsync = promisify(execFile);

/** Labels every container the engine starts carries (libs/sandbox/src/backends/docker/container.constants.ts). */
export const LABELS = {
  engine: 'dev.switchyard.engine',
  session: 'dev.switchyard.session',
  tier: 'dev.switchyard.tier',
  action: 'dev.switchyard.action',
} as const;

/** Runs the docker CLI and resolves with its stdout (rejects on a non-zero exit). */
export async function docker(...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('docker', args, { timeout: 20_000, maxBuffer: 16 * 2 ** 20 });
  return stdout;
}

export interface ContainerRow {
  id: string;
  state: string;
  labels: Record<string, string>;
}

/** `docker ps -a --filter label=…` for every `key=value` (or bare `key`) given, with full ids and labels. */
export async function containersWith(labels: Record<string, string | true>): Promise<ContainerRow[]> {
  const filters = Object.entries(labels).flatMap(([k, v]) => [
    '--filter',
    v === true ? `label=${k}` : `label=${k}=${v}`,
  ]);
  const out = await docker('ps', '-a', '--no-trunc', ...filters, '--format', '{{json .}}');
  return out
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const row = JSON.parse(line) as { ID: string; State: string; Labels: string };
      const parsed: Record<string, string> = {};
      for (const pair of row.Labels ? row.Labels.split(',') : []) {
        const eq = pair.indexOf('=');
        if (eq > 0) parsed[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      return { id: row.ID, state: row.State, labels: parsed };
    });
}

/**
 * The one-off container started ahead for the session's next action (labelled `dev.switchyard.action=ahead`), once it
 * runs; it is started after an action's result, so this waits for it (at most `ms`).
 */
export async function containerStartedAhead(sessionId: string, ms = 20_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const [row] = await containersWith({ [LABELS.session]: sessionId, [LABELS.action]: 'ahead' });
    if (row?.state === 'running') return row.id;
    if (Date.now() > deadline) throw new Error(`no container started ahead for session ${sessionId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True while Docker still knows the container (any state). */
export async function containerExists(id: string): Promise<boolean> {
  try {
    await docker('inspect', '--type', 'container', '--format', '{{.Id}}', id);
    return true;
  } catch {
    return false;
  }
}

/** `docker inspect` of one container, parsed. */
export async function inspectContainer(id: string): Promise<any> {
  return (JSON.parse(await docker('inspect', '--type', 'container', id)) as unknown[])[0];
}

/** Removes containers by force, ignoring those already gone. */
export async function forceRemove(ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await docker('rm', '-f', ...ids).catch(() => undefined);
}

function pids(): string[] {
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d));
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined; // the process ended while we looked
  }
}

function alive(pid: string): boolean {
  const stat = read(`/proc/${pid}/stat`);
  if (!stat) return false;
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** Live host processes (zombies excluded: they have ended and only wait for their parent to reap them). */
export function hostProcessCount(): number {
  return pids().filter(alive).length;
}

/** Live host processes whose argv is exactly `argv` (e.g. `sleep 73451`), wherever they run (containers too). */
export function processesRunning(argv: string): string[] {
  return pids().filter((pid) => {
    const cmd = read(`/proc/${pid}/cmdline`);
    return cmd !== undefined && cmd.replace(/\0+$/, '').split('\0').join(' ') === argv && alive(pid);
  });
}

/** Live host processes inside the cgroups of the container whose id starts with `idPrefix` (12+ hex chars). */
export function processesInContainer(idPrefix: string): string[] {
  if (!/^[0-9a-f]{12,64}$/.test(idPrefix)) throw new Error(`not a container id: ${JSON.stringify(idPrefix)}`);
  return pids().filter((pid) => {
    const cgroups = read(`/proc/${pid}/cgroup`);
    return cgroups !== undefined && new RegExp(`[/-]${idPrefix}`).test(cgroups) && alive(pid);
  });
}

/** Host pid of the first process in the container whose argv contains `needle` (`docker top`). */
export async function hostPidIn(containerId: string, needle: string): Promise<number> {
  const out = await docker('top', containerId, '-eo', 'pid,args');
  const line = out
    .split('\n')
    .slice(1)
    .find((l) => l.includes(needle));
  if (!line) throw new Error(`no process matching ${needle} in ${containerId.slice(0, 12)}:\n${out}`);
  return Number(line.trim().split(/\s+/)[0]);
}

/** Free bytes and free inodes of the filesystem holding `dir`, as an unprivileged user sees them. */
export function freeSpace(dir: string): { bytes: number; inodes: number } {
  const s = statfsSync(dir);
  return { bytes: s.bavail * s.bsize, inodes: s.ffree };
}

/** Polls `check` every 50 ms until it holds or `withinMs` pass; resolves with its last answer. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  withinMs: number,
  everyMs = 50,
): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Attached loop devices whose backing file lies under `dir` (deleted files included), from sysfs. */
export function loopsUnder(dir: string): Array<{ device: string; backingFile: string }> {
  const loops: Array<{ device: string; backingFile: string }> = [];
  for (const name of readdirSync('/sys/block').filter((n) => /^loop\d+$/.test(n))) {
    const backingFile = read(`/sys/block/${name}/loop/backing_file`)?.trim();
    const device = read(`/sys/block/${name}/dev`)?.trim();
    if (backingFile && device && backingFile.startsWith(`${dir}/`)) loops.push({ device, backingFile });
  }
  return loops;
}

/** Live processes whose environment carries `name=<value starting with prefix>` (the sandbox tiers' engine mark). */
export function processesMarked(name: string, prefix: string): string[] {
  return pids().filter((pid) => {
    const environ = read(`/proc/${pid}/environ`);
    return (
      environ !== undefined &&
      environ.split('\0').some((e) => e.startsWith(`${name}=${prefix}`)) &&
      alive(pid)
    );
  });
}

/**
 * The block device a mountinfo line's filesystem lives on, as `major:minor`: for a loop-backed mount, the loop
 * device's (a btrfs mount's third field is an anonymous `0:N`, an ext4 one's the loop device itself); else the third
 * field. Works for a sandbox's mountinfo too: the source names the same host loop device.
 */
export function mountSourceDevice(fields: string[]): string {
  const dash = fields.indexOf('-', 6);
  const loop = dash >= 0 ? /^\/dev\/(loop\d+)$/.exec(fields[dash + 2] ?? '')?.[1] : undefined;
  return (loop && read(`/sys/block/${loop}/dev`)?.trim()) || fields[2];
}

/** `major:minor` of the filesystem mounted at `hostDir` (a capped workspace is its own loop filesystem), if any. */
export function mountDevice(hostDir: string): string | undefined {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => f[4] === hostDir)?.[2];
}

/**
 * Live sandboxed processes (uid 10001) of one session: those with a `/workspace` mount of its workspace, recognised
 * by the workspace's device (`mountDevice`, taken while it was mounted) or, for an uncapped one, by the session id
 * in its host path. Answers `pid: cmdline` lines.
 */
export function sandboxedProcessesOf(sessionId: string, device?: string): string[] {
  const isSessionWorkspace = (f: string[]): boolean =>
    f[4] === '/workspace' && (device ? f[2] === device : f[3]?.includes(sessionId) === true);
  return pids().flatMap((pid) => {
    const status = read(`/proc/${pid}/status`);
    const cmd = read(`/proc/${pid}/cmdline`);
    const mounts = read(`/proc/${pid}/mountinfo`);
    if (!status || cmd === undefined || !mounts) return [];
    // Zombies have ended already; they wait for this machine's init to reap them.
    if (/^State:\s+Z/m.test(status) || /^Uid:\s+(\d+)/m.exec(status)?.[1] !== '10001') return [];
    const mine = mounts.split('\n').some((l) => isSessionWorkspace(l.split(' ')));
    return mine ? [`${pid}: ${cmd.replace(/\0/g, ' ')}`] : [];
  });
}
