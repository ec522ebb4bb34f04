import * as fs from 'node:fs';

/** Where the cgroup hierarchies are mounted and where a process sits in them, read from /proc. */

export interface CgroupMount {
  version: 1 | 2;
  mountPoint: string;
  /** Root of the mount inside the hierarchy (not `/` inside a cgroup namespace). */
  root: string;
  /** v1 controllers of the hierarchy; empty for v2. */
  controllers: string[];
}

const unescapeMount = (s: string) =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** Cgroup mounts from `/proc/self/mountinfo` text. */
export function parseCgroupMounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const [pre, post] = line.split(' - ');
    if (!pre || !post) continue;
    const fields = pre.split(' ');
    const [fstype, , superOptions = ''] = post.split(' ');
    if (fstype !== 'cgroup' && fstype !== 'cgroup2') continue;
    const version = fstype === 'cgroup2' ? 2 : 1;
    mounts.push({
      version,
      root: unescapeMount(fields[3]),
      mountPoint: unescapeMount(fields[4]),
      controllers: version === 1 ? superOptions.split(',').filter((o) => !['rw', 'ro'].includes(o)) : [],
    });
  }
  return mounts;
}

/** Own cgroup path per v1 controller, and the v2 path under key `''`, from `/proc/self/cgroup` text. */
export function parseOwnCgroups(text: string): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === '') own.set('', m[2]);
    else for (const c of m[1].split(',')) own.set(c, m[2]);
  }
  return own;
}

/** Host directory of the engine's own cgroup in a mount. */
export function ownCgroupDir(mount: CgroupMount, ownPath: string): string {
  const rel =
    mount.root === '/' ? ownPath : ownPath.startsWith(mount.root) ? ownPath.slice(mount.root.length) : '/';
  return `${mount.mountPoint}${rel === '/' ? '' : rel}`.replace(/\/+$/, '') || '/';
}

/**
 * Host directory of `pid`'s cgroup in the hierarchy of `controller` (`''`: the v2 hierarchy), as this process sees
 * the cgroup filesystem; undefined when the process or the hierarchy is not there. For tests and diagnostics.
 *
 * @internal
 */
export function cgroupDirOf(pid: number, controller: string): string | undefined {
  try {
    const own = parseOwnCgroups(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8')).get(controller);
    const mount = parseCgroupMounts(fs.readFileSync('/proc/self/mountinfo', 'utf8')).find((m) =>
      controller === '' ? m.version === 2 : m.controllers.includes(controller),
    );
    return own !== undefined && mount ? ownCgroupDir(mount, own) : undefined;
  } catch {
    return undefined;
  }
}
