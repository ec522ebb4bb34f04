import * as fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { SandboxInternalError } from '../sandbox.errors';
import type { CgroupOptions } from '../sandbox.options';
import {
  ProcessLimiter,
  type GroupLimits,
  type LimitGroup,
  type LimitGroupReport,
  type LimiterMode,
} from './process-limiter';

/** The few filesystem and process calls the cgroup code makes, so it can be tested against a fake. */
export interface CgroupHost {
  read(path: string): string;
  write(path: string, data: string): void;
  /** Off the event loop: moving a task between cgroups can wait for an RCU grace period (milliseconds). */
  writeAsync(path: string, data: string): Promise<void>;
  exists(path: string): boolean;
  mkdir(path: string): void;
  rmdir(path: string): void;
  listDirs(path: string): string[];
  kill(pid: number): void;
  isAlive(pid: number): boolean;
  sleep(ms: number): Promise<void>;
}

export const nodeCgroupHost: CgroupHost = {
  read: (p) => fs.readFileSync(p, 'utf8'),
  write: (p, data) => fs.writeFileSync(p, data),
  writeAsync: (p, data) => fs.promises.writeFile(p, data),
  exists: (p) => fs.existsSync(p),
  mkdir: (p) => fs.mkdirSync(p, { recursive: true }),
  rmdir: (p) => fs.rmdirSync(p),
  listDirs: (p) =>
    fs
      .readdirSync(p, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name),
  kill: (pid) => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  },
  isAlive: (pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  },
  sleep: (ms) => sleep(ms),
};

const PARENT = 'switchyard';

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

const counter = (text: string, key: string): number => {
  const m = new RegExp(`^${key}\\s+(\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
};

/** A group's directories, one per hierarchy (one for v2, memory + pids for v1). */
class CgroupGroup implements LimitGroup {
  private readonly procsFiles: readonly string[];
  private destroyed?: Promise<void>;

  constructor(
    readonly name: string,
    private readonly version: 1 | 2,
    private readonly dirs: { memory: string; pids: string },
    private readonly host: CgroupHost,
  ) {
    const unique = [...new Set([dirs.memory, dirs.pids])];
    this.procsFiles = unique.map((d) => `${d}/cgroup.procs`);
  }

  async join(pid: number): Promise<void> {
    await Promise.all(this.procsFiles.map((file) => this.host.writeAsync(file, String(pid))));
  }

  private pids(): number[] {
    const pids = new Set<number>();
    for (const file of this.procsFiles) {
      try {
        for (const p of this.host.read(file).split('\n')) if (p.trim()) pids.add(Number(p));
      } catch {
        // Directory already gone.
      }
    }
    return [...pids];
  }

  async kill(): Promise<void> {
    if (this.version === 2 && this.host.exists(`${this.dirs.pids}/cgroup.kill`)) {
      try {
        this.host.write(`${this.dirs.pids}/cgroup.kill`, '1');
      } catch {
        // Fall through to the per-pid loop.
      }
    }
    // Loop because a process may fork between reading cgroup.procs and the kill; pids.max bounds the work.
    for (let round = 0; round < 100; round++) {
      const pids = this.pids();
      if (pids.length === 0) return;
      for (const pid of pids) this.host.kill(pid);
      await this.host.sleep(round < 10 ? 5 : 20);
    }
  }

  report(): LimitGroupReport {
    const read = (file: string) => {
      try {
        return this.host.read(file);
      } catch {
        return '';
      }
    };
    const oomKilled =
      this.version === 2
        ? counter(read(`${this.dirs.memory}/memory.events`), 'oom_kill') > 0 ||
          counter(read(`${this.dirs.memory}/memory.events`), 'oom_group_kill') > 0
        : counter(read(`${this.dirs.memory}/memory.oom_control`), 'oom_kill') > 0;
    const pidsLimitHit = counter(read(`${this.dirs.pids}/pids.events`), 'max') > 0;
    return { oomKilled, pidsLimitHit };
  }

  destroy(): Promise<void> {
    this.destroyed ??= this.remove();
    return this.destroyed;
  }

  private async remove(): Promise<void> {
    await this.kill();
    for (const dir of new Set([this.dirs.memory, this.dirs.pids])) {
      // rmdir fails with EBUSY while killed tasks are still being reaped; that takes milliseconds.
      for (let attempt = 0; attempt < 50; attempt++) {
        try {
          this.host.rmdir(dir);
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
          await this.host.sleep(20);
        }
      }
    }
  }
}

/**
 * Per-run cgroups under a `switchyard/` parent. v1 uses the memory and pids hierarchies below the engine's own
 * cgroups; v2 uses one directory with both controllers enabled.
 */
export class CgroupLimiter extends ProcessLimiter {
  private readonly logger = new Logger(CgroupLimiter.name);
  readonly mode: LimiterMode;
  readonly description: string;

  constructor(
    private readonly version: 1 | 2,
    private readonly parents: { memory: string; pids: string },
    private readonly host: CgroupHost = nodeCgroupHost,
  ) {
    super();
    this.mode = version === 2 ? 'cgroup-v2' : 'cgroup-v1';
    this.description =
      version === 2
        ? `cgroup v2 at ${parents.memory}`
        : `cgroup v1 memory at ${parents.memory}, pids at ${parents.pids}`;
  }

  /** Makes the parents (v2: with memory+pids delegated to children) and removes empty leftovers of dead engines. */
  prepare(): void {
    for (const parent of new Set([this.parents.memory, this.parents.pids])) {
      this.host.mkdir(parent);
      if (this.version === 2) {
        // Both the parent's parent and the parent must pass the controllers down.
        const grand = parent.slice(0, parent.lastIndexOf('/'));
        enableControllers(this.host, grand);
        enableControllers(this.host, parent);
      }
      for (const child of this.host.listDirs(parent)) {
        const pid = /^e(\d+)-/.exec(child);
        if (pid && this.host.isAlive(Number(pid[1]))) continue;
        try {
          this.host.rmdir(`${parent}/${child}`);
        } catch {
          // Still has processes; leave it.
        }
      }
    }
  }

  create(name: string, limits: GroupLimits): LimitGroup {
    const dirs = { memory: `${this.parents.memory}/${name}`, pids: `${this.parents.pids}/${name}` };
    const group = new CgroupGroup(name, this.version, dirs, this.host);
    try {
      if (!this.host.exists(this.parents.memory) || !this.host.exists(this.parents.pids)) this.prepare();
      for (const dir of new Set([dirs.memory, dirs.pids])) this.host.mkdir(dir);
      const mem = String(limits.memoryBytes);
      if (this.version === 2) {
        this.host.write(`${dirs.memory}/memory.max`, mem);
        this.writeIfPresent(`${dirs.memory}/memory.swap.max`, '0');
        // On OOM kill the whole run, not just its largest process.
        this.writeIfPresent(`${dirs.memory}/memory.oom.group`, '1');
      } else {
        this.host.write(`${dirs.memory}/memory.limit_in_bytes`, mem);
        // memsw must be >= the memory limit, so it is written second; absent without swap accounting.
        this.writeIfPresent(`${dirs.memory}/memory.memsw.limit_in_bytes`, mem);
      }
      this.host.write(`${dirs.pids}/pids.max`, String(limits.pids));
    } catch (err) {
      void group.destroy();
      throw new SandboxInternalError(
        'CGROUP_SETUP',
        `could not set up cgroup ${name}: ${(err as Error).message}`,
        {
          retriable: true,
          cause: err,
        },
      );
    }
    return group;
  }

  async dispose(): Promise<void> {
    for (const parent of new Set([this.parents.memory, this.parents.pids])) {
      try {
        this.host.rmdir(parent);
      } catch (err) {
        // Another engine on this host may still use it.
        this.logger.debug(`kept ${parent}: ${(err as Error).message}`);
      }
    }
  }

  private writeIfPresent(file: string, data: string): void {
    if (this.host.exists(file)) this.host.write(file, data);
  }
}

function enableControllers(host: CgroupHost, dir: string): void {
  const enabled = host.read(`${dir}/cgroup.subtree_control`).split(/\s+/);
  const missing = ['memory', 'pids'].filter((c) => !enabled.includes(c));
  if (missing.length > 0) host.write(`${dir}/cgroup.subtree_control`, missing.map((c) => `+${c}`).join(' '));
}

/** Runs without cgroups: pid namespace + rlimits only. */
export class NoCgroupLimiter extends ProcessLimiter {
  readonly mode = 'none' as const;
  constructor(readonly description: string) {
    super();
  }
  create(): undefined {
    return undefined;
  }
  async dispose(): Promise<void> {}
}

/** Creating (and removing) a group proves the hierarchy is writable by us. */
function probe(limiter: CgroupLimiter): void {
  limiter.prepare();
  const group = limiter.create(`e${process.pid}-probe`, { memoryBytes: 64 << 20, pids: 8 });
  if (group.report().oomKilled) throw new Error('fresh cgroup reports an OOM kill');
  void group.destroy();
}

/**
 * Picks the strongest working limiter: cgroup v2 (controllers available at the chosen parent), then v1 (memory
 * and pids hierarchies), then none, with the reason each one was passed over.
 */
export function detectProcessLimiter(
  options: CgroupOptions,
  host: CgroupHost = nodeCgroupHost,
  proc: { mountinfo: string; cgroup: string } = {
    mountinfo: fs.readFileSync('/proc/self/mountinfo', 'utf8'),
    cgroup: fs.readFileSync('/proc/self/cgroup', 'utf8'),
  },
): ProcessLimiter {
  if (options.mode === 'off') return new NoCgroupLimiter('cgroups disabled by configuration');
  const mounts = parseCgroupMounts(proc.mountinfo);
  const own = parseOwnCgroups(proc.cgroup);
  const skipped: string[] = [];

  if (options.mode === 'auto' || options.mode === 'v2') {
    const v2 = mounts.find((m) => m.version === 2);
    const ownPath = own.get('');
    if (!v2 || ownPath === undefined) skipped.push('v2: no cgroup2 mount');
    else {
      const base = options.v2Parent ?? ownCgroupDir(v2, ownPath);
      const parent = `${base}/${PARENT}`;
      try {
        const available = host.read(`${base}/cgroup.controllers`).split(/\s+/);
        const lacking = ['memory', 'pids'].filter((c) => !available.includes(c));
        if (lacking.length > 0) throw new Error(`controllers ${lacking.join(', ')} not available in ${base}`);
        const limiter = new CgroupLimiter(2, { memory: parent, pids: parent }, host);
        probe(limiter);
        return limiter;
      } catch (err) {
        skipped.push(`v2: ${(err as Error).message}`);
      }
    }
  }

  if (options.mode === 'auto' || options.mode === 'v1') {
    const dirFor = (controller: string) => {
      const mount = mounts.find((m) => m.version === 1 && m.controllers.includes(controller));
      const ownPath = own.get(controller);
      return mount && ownPath !== undefined ? `${ownCgroupDir(mount, ownPath)}/${PARENT}` : undefined;
    };
    const memory = dirFor('memory');
    const pids = dirFor('pids');
    if (!memory || !pids) skipped.push('v1: memory and pids hierarchies not both mounted');
    else {
      try {
        const limiter = new CgroupLimiter(1, { memory, pids }, host);
        probe(limiter);
        return limiter;
      } catch (err) {
        skipped.push(`v1: ${(err as Error).message}`);
      }
    }
  }
  return new NoCgroupLimiter(`no writable cgroup (${skipped.join('; ')}); pid namespace + rlimits only`);
}
