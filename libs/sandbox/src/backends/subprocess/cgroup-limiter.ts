import * as fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { processStartTicks } from '../../core/engine-instance';
import { SandboxInternalError } from '../../core/sandbox.errors';
import type { CgroupOptions } from '../../core/sandbox.options';
import { cgroupName, engineGone, engineOfCgroup } from './engine-mark';
import { ownCgroupDir, parseCgroupMounts, parseOwnCgroups } from './cgroup-mounts';
import {
  ProcessLimiter,
  type GroupLimits,
  type GroupOptions,
  type LimitGroup,
  type LimitGroupReport,
  type LimiterMode,
  type LimitParent,
  type ParentLimits,
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
  /** Start time of a process in clock ticks; undefined when there is no such process. */
  startTicks(pid: number): string | undefined;
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
  startTicks: processStartTicks,
  sleep: (ms) => sleep(ms),
};

const PARENT = 'switchyard';
/** CFS period of the CPU quota: the quota is `cpus` times this, per period. */
const CPU_PERIOD_US = 100_000;
/** The kernel refuses quotas below 1 ms. */
const MIN_CPU_QUOTA_US = 1000;
/** pids.max of a group created closed: its one process may not fork. */
const CLOSED_PIDS = 1;
/** cgroup v1 `cpu.shares` of a nice-0 process, what v2's `cpu.weight` 100 stands for. */
const V1_SHARES_PER_WEIGHT = 1024 / 100;

/** One directory per hierarchy (all the same directory on v2); `cpu` absent where no cpu controller is usable. */
export interface CgroupDirs {
  memory: string;
  pids: string;
  cpu?: string;
}

const counter = (text: string, key: string): number => {
  const m = new RegExp(`^${key}\\s+(\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
};

const uniqueDirs = (dirs: CgroupDirs): string[] =>
  [...new Set([dirs.memory, dirs.pids, dirs.cpu])].filter((d) => d !== undefined);

/** A group's directories, one per hierarchy (one for v2; memory, pids and cpu for v1). */
class CgroupGroup implements LimitGroup {
  private readonly procsFiles: readonly string[];
  private destroyed?: Promise<void>;

  constructor(
    readonly name: string,
    private readonly version: 1 | 2,
    private readonly dirs: CgroupDirs,
    private readonly host: CgroupHost,
    /** The pids limit `open` sets on a group created closed. */
    private readonly heldPids?: number,
  ) {
    this.procsFiles = uniqueDirs(dirs).map((d) => `${d}/cgroup.procs`);
  }

  async join(pid: number): Promise<void> {
    await Promise.all(this.procsFiles.map((file) => this.host.writeAsync(file, String(pid))));
  }

  open(): void {
    if (this.heldPids !== undefined) this.host.write(`${this.dirs.pids}/pids.max`, String(this.heldPids));
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
    const oomKills =
      this.version === 2
        ? Math.max(
            counter(read(`${this.dirs.memory}/memory.events`), 'oom_kill'),
            counter(read(`${this.dirs.memory}/memory.events`), 'oom_group_kill'),
          )
        : counter(read(`${this.dirs.memory}/memory.oom_control`), 'oom_kill');
    const pidsLimitHit = counter(read(`${this.dirs.pids}/pids.events`), 'max') > 0;
    return { oomKilled: oomKills > 0, oomKills, pidsLimitHit };
  }

  destroy(): Promise<void> {
    this.destroyed ??= this.remove();
    return this.destroyed;
  }

  private async remove(): Promise<void> {
    await this.kill();
    for (const dir of uniqueDirs(this.dirs)) {
      // A session group holds run groups: they go first (a cgroup with children cannot be removed).
      let children: string[] = [];
      try {
        children = this.host.listDirs(dir);
      } catch {
        // Already gone.
      }
      for (const child of children) {
        const sub = `${dir}/${child}`;
        await new CgroupGroup(child, this.version, { memory: sub, pids: sub }, this.host).destroy();
      }
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

/** A session group: one CPU quota (and weight) over the run groups created under it; no process of its own. */
class CgroupParent implements LimitParent {
  private destroyed?: Promise<void>;

  constructor(
    readonly name: string,
    private readonly version: 1 | 2,
    readonly dirs: CgroupDirs,
    /** The session quota: a run group under it may not ask for more (cgroup v1 refuses it with EINVAL). */
    readonly cpus: number,
    private readonly host: CgroupHost,
  ) {}

  setWeight(weight: number): void {
    if (!this.dirs.cpu) return;
    try {
      writeCpuWeight(this.host, this.version, this.dirs.cpu, weight);
    } catch {
      // Gone, or a weight the kernel refused: the quota still bounds the session.
    }
  }

  destroy(): Promise<void> {
    this.destroyed ??= new CgroupGroup(this.name, this.version, this.dirs, this.host).destroy();
    return this.destroyed;
  }
}

/**
 * Per-run cgroups under a `switchyard/` parent, directly or under a session group there. v1 uses the memory, pids and (where mounted) cpu hierarchies below
 * the engine's own cgroups; v2 uses one directory with the memory, pids and (where delegated) cpu controllers.
 */
export class CgroupLimiter extends ProcessLimiter {
  private readonly logger = new Logger(CgroupLimiter.name);
  readonly mode: LimiterMode;
  readonly description: string;

  constructor(
    private readonly version: 1 | 2,
    private readonly parents: CgroupDirs,
    private readonly host: CgroupHost = nodeCgroupHost,
  ) {
    super();
    this.mode = version === 2 ? 'cgroup-v2' : 'cgroup-v1';
    const cpu = parents.cpu ? '' : '; no cpu controller, so no CPU quota';
    this.description =
      version === 2
        ? `cgroup v2 at ${parents.memory}${cpu}`
        : `cgroup v1 memory at ${parents.memory}, pids at ${parents.pids}` +
          (parents.cpu ? `, cpu at ${parents.cpu}` : cpu);
  }

  /** Makes the parents (v2: with the controllers delegated to children). */
  prepare(): void {
    for (const parent of uniqueDirs(this.parents)) {
      this.host.mkdir(parent);
      if (this.version === 2) {
        // Both the parent's parent and the parent must pass the controllers down.
        enableControllers(this.host, parent.slice(0, parent.lastIndexOf('/')), this.controllers);
        enableControllers(this.host, parent, this.controllers);
      }
    }
  }

  /**
   * A session group under `switchyard/` with the session's CPU quota; none without a cpu controller (there would
   * be nothing for it to share). On v2 it passes the controllers down and holds no process (the v2 rule).
   */
  override createParent(name: string, limits: ParentLimits): LimitParent | undefined {
    if (!this.parents.cpu) return undefined;
    const dirs = childDirs(this.parents, name);
    const parent = new CgroupParent(name, this.version, dirs, limits.cpus, this.host);
    try {
      if (uniqueDirs(this.parents).some((p) => !this.host.exists(p))) this.prepare();
      for (const dir of uniqueDirs(dirs)) {
        this.host.mkdir(dir);
        if (this.version === 2) enableControllers(this.host, dir, this.controllers);
      }
      this.limitCpu(dirs.cpu!, limits.cpus);
      if (limits.weight !== undefined) writeCpuWeight(this.host, this.version, dirs.cpu!, limits.weight);
    } catch (err) {
      void parent.destroy();
      throw new SandboxInternalError(
        'CGROUP_SETUP',
        `could not set up session cgroup ${name}: ${(err as Error).message}`,
        { retriable: true, cause: err },
      );
    }
    return parent;
  }

  create(name: string, limits: GroupLimits, options: GroupOptions = {}): LimitGroup {
    const parent = options.parent instanceof CgroupParent ? options.parent : undefined;
    const dirs = childDirs(parent?.dirs ?? this.parents, name);
    // Under a session group a run's own cap is at most the session's quota (v1 refuses a larger one).
    const cpus = parent && limits.cpus !== undefined ? Math.min(limits.cpus, parent.cpus) : limits.cpus;
    const group = new CgroupGroup(
      name,
      this.version,
      dirs,
      this.host,
      options.closed ? limits.pids : undefined,
    );
    try {
      if (uniqueDirs(this.parents).some((p) => !this.host.exists(p))) this.prepare();
      for (const dir of uniqueDirs(dirs)) this.host.mkdir(dir);
      const mem = String(limits.memoryBytes);
      if (this.version === 2) {
        this.host.write(`${dirs.memory}/memory.max`, mem);
        this.writeIfPresent(`${dirs.memory}/memory.swap.max`, '0');
        // On OOM kill the whole run, not just its largest process (unless the group holds a session's kernels).
        if (options.oomGroup !== false) this.writeIfPresent(`${dirs.memory}/memory.oom.group`, '1');
      } else {
        this.host.write(`${dirs.memory}/memory.limit_in_bytes`, mem);
        // memsw must be >= the memory limit, so it is written second; absent without swap accounting.
        this.writeIfPresent(`${dirs.memory}/memory.memsw.limit_in_bytes`, mem);
      }
      this.host.write(`${dirs.pids}/pids.max`, String(options.closed ? CLOSED_PIDS : limits.pids));
      if (dirs.cpu && cpus !== undefined) this.limitCpu(dirs.cpu, cpus);
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

  /**
   * Removes the groups of engines no longer running, killing what is still in them: a launcher that outlived its
   * engine, or a sandbox it started. Groups of running engines, and names not of our shape, are left alone.
   */
  override async reapOrphans(): Promise<string[]> {
    const removed = new Set<string>();
    for (const parent of uniqueDirs(this.parents)) {
      let children: string[];
      try {
        children = this.host.listDirs(parent);
      } catch {
        continue; // no parent yet: nothing left behind
      }
      for (const child of children) {
        const mark = engineOfCgroup(child);
        if (!mark || !engineGone(mark, (pid) => this.host.startTicks(pid))) continue;
        const dir = `${parent}/${child}`;
        await new CgroupGroup(child, this.version, { memory: dir, pids: dir }, this.host).destroy();
        if (this.host.exists(dir)) this.logger.warn(`could not remove the leftover cgroup ${dir}`);
        else removed.add(child);
      }
    }
    return [...removed];
  }

  async dispose(): Promise<void> {
    for (const parent of uniqueDirs(this.parents)) {
      try {
        this.host.rmdir(parent);
      } catch (err) {
        // Another engine on this host may still use it.
        this.logger.debug(`kept ${parent}: ${(err as Error).message}`);
      }
    }
  }

  /** A CFS bandwidth limit: `cpus` CPUs' worth of time per period for the whole group, however many processes. */
  private limitCpu(dir: string, cpus: number): void {
    const quota = String(Math.max(MIN_CPU_QUOTA_US, Math.round(cpus * CPU_PERIOD_US)));
    if (this.version === 2) {
      this.host.write(`${dir}/cpu.max`, `${quota} ${CPU_PERIOD_US}`);
    } else {
      this.host.write(`${dir}/cpu.cfs_period_us`, String(CPU_PERIOD_US));
      this.host.write(`${dir}/cpu.cfs_quota_us`, quota);
    }
  }

  private writeIfPresent(file: string, data: string): void {
    if (this.host.exists(file)) this.host.write(file, data);
  }

  /** What a v2 parent passes down to its children. */
  private get controllers(): string[] {
    return this.parents.cpu ? ['memory', 'pids', 'cpu'] : ['memory', 'pids'];
  }
}

/** The directories of group `name` under `base`, one per hierarchy. */
function childDirs(base: CgroupDirs, name: string): CgroupDirs {
  return {
    memory: `${base.memory}/${name}`,
    pids: `${base.pids}/${name}`,
    cpu: base.cpu && `${base.cpu}/${name}`,
  };
}

/** A group's CPU weight: v2 `cpu.weight` as given (1–10000); v1 `cpu.shares`, where 1024 is v2's 100. */
function writeCpuWeight(host: CgroupHost, version: 1 | 2, dir: string, weight: number): void {
  const w = Math.min(10_000, Math.max(1, Math.round(weight)));
  if (version === 2) host.write(`${dir}/cpu.weight`, String(w));
  else host.write(`${dir}/cpu.shares`, String(Math.max(2, Math.round(w * V1_SHARES_PER_WEIGHT))));
}

function enableControllers(host: CgroupHost, dir: string, controllers: readonly string[]): void {
  const enabled = host.read(`${dir}/cgroup.subtree_control`).split(/\s+/);
  const missing = controllers.filter((c) => !enabled.includes(c));
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

/**
 * The first candidate whose hierarchy is writable by us, proved by creating (and removing) a group with every limit.
 * Candidates come strongest first (with a cpu controller, then without); throws the first one's failure.
 */
function firstWorking(version: 1 | 2, candidates: readonly CgroupDirs[], host: CgroupHost): CgroupLimiter {
  let first: unknown;
  for (const dirs of candidates) {
    const limiter = new CgroupLimiter(version, dirs, host);
    try {
      limiter.prepare();
      const group = limiter.create(cgroupName('probe'), { memoryBytes: 64 << 20, pids: 8, cpus: 1 });
      if (group.report().oomKilled) throw new Error('fresh cgroup reports an OOM kill');
      void group.destroy();
      return limiter;
    } catch (err) {
      first ??= err;
    }
  }
  throw first;
}

/**
 * Picks the strongest working limiter: cgroup v2 (controllers available at the chosen parent), then v1 (memory
 * and pids hierarchies), then none, with the reason each one was passed over. The cpu controller is used where it
 * is available (v2: offered at the parent; v1: mounted), else runs get no CPU quota and say so in the description.
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
  const withAndWithoutCpu = (dirs: CgroupDirs): CgroupDirs[] =>
    dirs.cpu ? [dirs, { memory: dirs.memory, pids: dirs.pids }] : [dirs];

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
        const cpu = available.includes('cpu') ? parent : undefined;
        return firstWorking(2, withAndWithoutCpu({ memory: parent, pids: parent, cpu }), host);
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
        return firstWorking(1, withAndWithoutCpu({ memory, pids, cpu: dirFor('cpu') }), host);
      } catch (err) {
        skipped.push(`v1: ${(err as Error).message}`);
      }
    }
  }
  return new NoCgroupLimiter(`no writable cgroup (${skipped.join('; ')}); pid namespace + rlimits only`);
}
