import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import * as path from 'node:path';

/** One line of a /proc/<pid>/mountinfo that matters to capped workspaces. */
export interface MountEntry {
  /** Mount ID: unique among the mounts that exist at once. */
  id: number;
  /**
   * `major:minor` of the mounted device (`7:3` for /dev/loop3). btrfs shows an anonymous device (`0:N`) instead: for
   * a loop device source, its own number is given, so that loop devices compare the same whatever the filesystem.
   */
  device: string;
  /** `ext4`, `btrfs`, … */
  fsType: string;
  /** Mount point, octal escapes decoded. */
  target: string;
  /** `shared:N` present: mounts made below it propagate to its peers and slaves. */
  shared: boolean;
}

/** A loop device with a backing file (an attached one), as sysfs describes it. */
export interface AttachedLoop {
  /** `/dev/loopN`. */
  path: string;
  /** `major:minor`, as in mountinfo. */
  device: string;
  /** Path of the backing file; ` (deleted)` is stripped and reported in `deleted`. */
  backingFile: string;
  deleted: boolean;
}

/**
 * Mount points of `/proc/<pid>/mountinfo` text (octal escapes in paths decoded). Loop device numbers of btrfs
 * mounts come from `sysBlock`.
 */
export function parseMountInfo(text: string, sysBlock = '/sys/block'): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-', 6);
    if (separator === -1) continue;
    const source = fields[separator + 2] ?? '';
    entries.push({
      id: Number(fields[0]),
      device: fields[2].startsWith('0:') ? (loopDevice(source, sysBlock) ?? fields[2]) : fields[2],
      fsType: fields[separator + 1] ?? '',
      target: unescapeMount(fields[4]),
      shared: fields.slice(6, separator).some((f) => f.startsWith('shared:')),
    });
  }
  return entries;
}

/** The engine's own mount table; empty when it cannot be read. */
export function ownMounts(): MountEntry[] {
  try {
    return parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'));
  } catch {
    return [];
  }
}

/** True when `dir` is the mount point of a mounted filesystem (per /proc/self/mountinfo). */
export function isMountPoint(dir: string): boolean {
  const target = path.resolve(dir);
  return ownMounts().some((m) => m.target === target);
}

/**
 * True when `dir` holds a filesystem other than its parent's: a mounted workspace. Two stats instead of reading the
 * whole mount table, which grows with every workspace; a bind from the parent's own filesystem does not count.
 */
export function onOwnFilesystem(dir: string): boolean {
  return statSync(dir).dev !== statSync(path.dirname(path.resolve(dir))).dev;
}

/** The mount on top at `dir` (the last mounted there), if any. */
export function topMountAt(dir: string, mounts = ownMounts()): MountEntry | undefined {
  const target = path.resolve(dir);
  return mounts.findLast((m) => m.target === target);
}

/** Mount points strictly below `dir`, deepest first (the order they can be unmounted in). */
export function mountsBelow(dir: string, mounts = ownMounts()): string[] {
  const prefix = `${path.resolve(dir)}/`;
  const targets = mounts.map((m) => m.target).filter((t) => t.startsWith(prefix));
  return [...new Set(targets)].sort((a, b) => b.split('/').length - a.split('/').length);
}

/** Attached loop devices whose backing file lies under `dir` (sysfs; deleted backing files included). */
export function loopsBackedBy(dir: string, sysBlock = '/sys/block'): AttachedLoop[] {
  const prefix = `${path.resolve(dir)}/`;
  let names: string[];
  try {
    names = readdirSync(sysBlock).filter((n) => /^loop\d+$/.test(n));
  } catch {
    return [];
  }
  const found: AttachedLoop[] = [];
  for (const name of names) {
    let backing: string;
    let device: string;
    try {
      // Present only while a file is attached.
      backing = readFileSync(path.join(sysBlock, name, 'loop', 'backing_file'), 'utf8').replace(/\n$/, '');
      device = readFileSync(path.join(sysBlock, name, 'dev'), 'utf8').trim();
    } catch {
      continue;
    }
    const deleted = backing.endsWith(' (deleted)');
    const backingFile = deleted ? backing.slice(0, -' (deleted)'.length) : backing;
    if (backingFile.startsWith(prefix)) found.push({ path: `/dev/${name}`, device, backingFile, deleted });
  }
  return found;
}

/**
 * Processes (one per mount namespace, the engine's own excluded) whose namespace mounts `device`: what keeps a
 * loop device attached after the engine unmounted it. For log lines; reads every process's mountinfo.
 */
export function mountNamespacesHolding(device: string, proc = '/proc'): { pid: number; command: string }[] {
  const own = namespaceOf(path.join(proc, 'self'));
  const seen = new Set<string>([own ?? '']);
  const holders: { pid: number; command: string }[] = [];
  for (const pid of readdirSync(proc).filter((d) => /^\d+$/.test(d))) {
    try {
      const ns = namespaceOf(path.join(proc, pid));
      if (!ns || seen.has(ns)) continue;
      const mounts = parseMountInfo(readFileSync(path.join(proc, pid, 'mountinfo'), 'utf8'));
      if (!mounts.some((m) => m.device === device)) continue;
      seen.add(ns);
      const command = readFileSync(path.join(proc, pid, 'cmdline'), 'utf8')
        .split('\0')
        .join(' ')
        .trim();
      holders.push({ pid: Number(pid), command: command.slice(0, 120) });
    } catch {
      // The process ended while we looked.
    }
  }
  return holders;
}

function namespaceOf(procDir: string): string | undefined {
  try {
    return readlinkSync(path.join(procDir, 'ns', 'mnt'));
  } catch {
    return undefined;
  }
}

/** `major:minor` of `/dev/loopN` (sysfs), or undefined for any other source. */
function loopDevice(source: string, sysBlock: string): string | undefined {
  const name = /^\/dev\/(loop\d+)$/.exec(source)?.[1];
  if (!name) return undefined;
  try {
    return readFileSync(path.join(sysBlock, name, 'dev'), 'utf8').trim();
  } catch {
    return undefined;
  }
}

const unescapeMount = (s: string): string =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
