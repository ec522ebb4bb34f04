import { CgroupLimiter, detectProcessLimiter, NoCgroupLimiter, type CgroupHost } from './cgroup-limiter';
import { ownCgroupDir, parseCgroupMounts, parseOwnCgroups } from './cgroup-mounts';

const errno = (code: string) => Object.assign(new Error(code), { code });

/**
 * An in-memory cgroupfs: directories get the control files of their hierarchy, `cgroup.procs` moves pids,
 * rmdir refuses populated groups, kill removes a pid. Records every write.
 */
class FakeCgroupFs implements CgroupHost {
  readonly files = new Map<string, string>();
  readonly dirs = new Set<string>();
  readonly writes: string[] = [];
  readonly killed: number[] = [];
  /** Running processes and their start ticks. */
  ticks = new Map<number, string>();
  /** Writes to these paths fail with EBUSY (v2 "no internal processes"). */
  busy = new Set<string>();

  constructor(private readonly controlFiles: (dir: string) => Record<string, string>) {}

  addDir(dir: string, extra: Record<string, string> = {}): void {
    this.dirs.add(dir);
    for (const [name, content] of Object.entries({ ...this.controlFiles(dir), ...extra }))
      this.files.set(`${dir}/${name}`, content);
  }
  read(p: string): string {
    const f = this.files.get(p);
    if (f === undefined) throw errno('ENOENT');
    return f;
  }
  write(p: string, data: string): void {
    if (this.busy.has(p)) throw errno('EBUSY');
    if (!this.files.has(p)) throw errno('ENOENT');
    this.writes.push(`${p}=${data}`);
    this.files.set(p, data);
  }
  async writeAsync(p: string, data: string): Promise<void> {
    if (!p.endsWith('cgroup.procs')) return this.write(p, data);
    if (!this.files.has(p)) throw errno('ENOENT');
    const root = p.split('/').slice(0, 5).join('/'); // one hierarchy: pids of other groups in it move out
    for (const [f, content] of this.files) {
      if (f.startsWith(root) && f.endsWith('cgroup.procs')) {
        this.files.set(
          f,
          content
            .split('\n')
            .filter((x) => x && x !== data)
            .join('\n'),
        );
      }
    }
    this.files.set(p, [this.files.get(p), data].filter(Boolean).join('\n'));
    this.writes.push(`${p}=${data}`);
  }
  exists(p: string): boolean {
    return this.files.has(p) || this.dirs.has(p);
  }
  mkdir(p: string): void {
    if (!this.dirs.has(p)) this.addDir(p);
  }
  rmdir(p: string): void {
    if (!this.dirs.has(p)) throw errno('ENOENT');
    if ([...this.dirs].some((d) => d.startsWith(`${p}/`))) throw errno('EBUSY');
    if ((this.files.get(`${p}/cgroup.procs`) ?? '').trim()) throw errno('EBUSY');
    this.dirs.delete(p);
    for (const f of [...this.files.keys()]) if (f.startsWith(`${p}/`)) this.files.delete(f);
  }
  listDirs(p: string): string[] {
    return [...this.dirs]
      .filter((d) => d.startsWith(`${p}/`) && !d.slice(p.length + 1).includes('/'))
      .map((d) => d.slice(p.length + 1));
  }
  kill(pid: number): void {
    this.killed.push(pid);
    for (const [f, content] of this.files) {
      if (f.endsWith('cgroup.procs'))
        this.files.set(
          f,
          content
            .split('\n')
            .filter((x) => x && x !== String(pid))
            .join('\n'),
        );
    }
  }
  startTicks(pid: number): string | undefined {
    return this.ticks.get(pid);
  }
  async sleep(): Promise<void> {}
}

const V1_MOUNTINFO = [
  '35 26 0:30 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '40 35 0:35 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '41 35 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '42 35 0:37 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct',
  '43 35 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');
const V1_SELF = '8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n';

const V2_MOUNTINFO =
  '30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate';

const v1Files = (dir: string): Record<string, string> =>
  dir.includes('/memory')
    ? {
        'cgroup.procs': '',
        'memory.limit_in_bytes': '9223372036854771712',
        'memory.memsw.limit_in_bytes': '9223372036854771712',
        'memory.oom_control': 'oom_kill_disable 0\nunder_oom 0\noom_kill 0\n',
      }
    : dir.includes('/cpu')
      ? { 'cgroup.procs': '', 'cpu.cfs_period_us': '100000', 'cpu.cfs_quota_us': '-1', 'cpu.shares': '1024' }
      : { 'cgroup.procs': '', 'pids.max': 'max', 'pids.events': 'max 0\n' };

const v2Files = (): Record<string, string> => ({
  'cgroup.procs': '',
  'cgroup.controllers': 'cpu memory pids',
  'cgroup.subtree_control': '',
  'cgroup.kill': '',
  'memory.max': 'max',
  'memory.swap.max': 'max',
  'memory.oom.group': '0',
  'memory.events': 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n',
  'pids.max': 'max',
  'pids.events': 'max 0\n',
  'cpu.max': 'max 100000',
  'cpu.weight': '100',
});

describe('cgroup discovery', () => {
  it('parses cgroup mounts and own cgroups', () => {
    const mounts = parseCgroupMounts(V1_MOUNTINFO);
    expect(mounts).toEqual([
      { version: 1, root: '/', mountPoint: '/sys/fs/cgroup/memory', controllers: ['memory'] },
      { version: 1, root: '/', mountPoint: '/sys/fs/cgroup/pids', controllers: ['pids'] },
      { version: 1, root: '/', mountPoint: '/sys/fs/cgroup/cpu,cpuacct', controllers: ['cpu', 'cpuacct'] },
      { version: 2, root: '/', mountPoint: '/sys/fs/cgroup/unified', controllers: [] },
    ]);
    const own = parseOwnCgroups(V1_SELF);
    expect(own.get('memory')).toBe('/process_api/abc');
    expect(own.get('cpuacct')).toBe('/');
    expect(own.get('')).toBe('/');
  });

  it('maps own paths to host directories, also inside a cgroup namespace', () => {
    const m = (root: string) => ({
      version: 2 as const,
      root,
      mountPoint: '/sys/fs/cgroup',
      controllers: [],
    });
    expect(ownCgroupDir(m('/'), '/')).toBe('/sys/fs/cgroup');
    expect(ownCgroupDir(m('/'), '/system.slice/x.service')).toBe('/sys/fs/cgroup/system.slice/x.service');
    expect(ownCgroupDir(m('/docker/abc'), '/docker/abc/sub')).toBe('/sys/fs/cgroup/sub');
  });
});

describe('detectProcessLimiter', () => {
  it('uses v1 memory + pids below the engine’s own cgroups when v2 lacks the controllers', () => {
    const host = new FakeCgroupFs(v1Files);
    host.addDir('/sys/fs/cgroup/memory/process_api/abc');
    host.addDir('/sys/fs/cgroup/pids');
    host.files.set('/sys/fs/cgroup/unified/cgroup.controllers', 'hugetlb');
    const limiter = detectProcessLimiter({ mode: 'auto' }, host, {
      mountinfo: V1_MOUNTINFO,
      cgroup: V1_SELF,
    });
    expect(limiter.mode).toBe('cgroup-v1');
    expect(limiter.description).toContain('/sys/fs/cgroup/memory/process_api/abc/switchyard');
    expect(limiter.description).toContain('/sys/fs/cgroup/pids/switchyard');
    expect(limiter.description).toContain('cpu at /sys/fs/cgroup/cpu,cpuacct/switchyard');
  });

  it('v1 without a cpu hierarchy still limits memory and pids, and says there is no CPU quota', () => {
    const host = new FakeCgroupFs(v1Files);
    const limiter = detectProcessLimiter({ mode: 'v1' }, host, {
      mountinfo: V1_MOUNTINFO.split('\n')
        .filter((l) => !l.includes('cpu'))
        .join('\n'),
      cgroup: V1_SELF,
    });
    expect(limiter.mode).toBe('cgroup-v1');
    expect(limiter.description).toMatch(/no cpu controller, so no CPU quota/);
  });

  it('uses v2 when the engine’s cgroup offers memory and pids and can delegate them', () => {
    const host = new FakeCgroupFs(v2Files);
    host.addDir('/sys/fs/cgroup');
    const limiter = detectProcessLimiter({ mode: 'auto' }, host, {
      mountinfo: V2_MOUNTINFO,
      cgroup: '0::/\n',
    });
    expect(limiter.mode).toBe('cgroup-v2');
    expect(host.writes).toContain('/sys/fs/cgroup/cgroup.subtree_control=+memory +pids +cpu');
    expect(host.writes).toContain('/sys/fs/cgroup/switchyard/cgroup.subtree_control=+memory +pids +cpu');
    expect(limiter.description).toBe('cgroup v2 at /sys/fs/cgroup/switchyard');
  });

  it('v2 whose cpu controller cannot be delegated runs without a CPU quota', () => {
    const host = new FakeCgroupFs(v2Files);
    host.addDir('/sys/fs/cgroup');
    const write = host.write.bind(host);
    host.write = (p, data) => {
      if (p.endsWith('subtree_control') && data.includes('cpu')) throw errno('EINVAL');
      write(p, data);
    };
    const limiter = detectProcessLimiter({ mode: 'v2' }, host, { mountinfo: V2_MOUNTINFO, cgroup: '0::/\n' });
    expect(limiter.mode).toBe('cgroup-v2');
    expect(limiter.description).toMatch(/no CPU quota/);
    expect(host.writes).toContain('/sys/fs/cgroup/cgroup.subtree_control=+memory +pids');
  });

  it('falls back to rlimits only, saying why, when no hierarchy is usable', () => {
    const host = new FakeCgroupFs(v2Files);
    host.addDir('/sys/fs/cgroup/system.slice/engine.service');
    // Own cgroup holds the engine itself: v2 refuses to enable controllers for children there.
    host.busy.add('/sys/fs/cgroup/system.slice/engine.service/cgroup.subtree_control');
    const limiter = detectProcessLimiter({ mode: 'auto' }, host, {
      mountinfo: V2_MOUNTINFO,
      cgroup: '0::/system.slice/engine.service\n',
    });
    expect(limiter).toBeInstanceOf(NoCgroupLimiter);
    expect(limiter.mode).toBe('none');
    expect(limiter.description).toMatch(
      /v2: EBUSY.*v1: memory and pids hierarchies not both mounted.*rlimits only/,
    );
    expect(limiter.create('x', { memoryBytes: 1, pids: 1 })).toBeUndefined();
  });

  it('honours mode off and a configured v2 parent', () => {
    const host = new FakeCgroupFs(v2Files);
    expect(detectProcessLimiter({ mode: 'off' }, host, { mountinfo: '', cgroup: '' }).mode).toBe('none');
    host.addDir('/sys/fs/cgroup/delegated');
    const limiter = detectProcessLimiter({ mode: 'v2', v2Parent: '/sys/fs/cgroup/delegated' }, host, {
      mountinfo: V2_MOUNTINFO,
      cgroup: '0::/system.slice/engine.service\n',
    });
    expect(limiter.description).toBe('cgroup v2 at /sys/fs/cgroup/delegated/switchyard');
  });
});

describe('CgroupLimiter groups', () => {
  function v1() {
    const host = new FakeCgroupFs(v1Files);
    const limiter = new CgroupLimiter(
      1,
      { memory: '/sys/fs/cgroup/memory/sy', pids: '/sys/fs/cgroup/pids/sy', cpu: '/sys/fs/cgroup/cpu/sy' },
      host,
    );
    limiter.prepare();
    return { host, limiter };
  }

  it('v1: sets memory (swap included), pids and CPU limits, joins every hierarchy, reports OOM and pids hits', async () => {
    const { host, limiter } = v1();
    const group = limiter.create('e1-a', { memoryBytes: 1000, pids: 16, cpus: 1.5 });
    expect(host.writes).toEqual([
      '/sys/fs/cgroup/memory/sy/e1-a/memory.limit_in_bytes=1000',
      '/sys/fs/cgroup/memory/sy/e1-a/memory.memsw.limit_in_bytes=1000',
      '/sys/fs/cgroup/pids/sy/e1-a/pids.max=16',
      '/sys/fs/cgroup/cpu/sy/e1-a/cpu.cfs_period_us=100000',
      '/sys/fs/cgroup/cpu/sy/e1-a/cpu.cfs_quota_us=150000',
    ]);
    await group.join(4242);
    expect(host.read('/sys/fs/cgroup/memory/sy/e1-a/cgroup.procs')).toBe('4242');
    expect(host.read('/sys/fs/cgroup/pids/sy/e1-a/cgroup.procs')).toBe('4242');
    expect(host.read('/sys/fs/cgroup/cpu/sy/e1-a/cgroup.procs')).toBe('4242');
    expect(group.report()).toEqual({ oomKilled: false, oomKills: 0, pidsLimitHit: false });
    host.files.set(
      '/sys/fs/cgroup/memory/sy/e1-a/memory.oom_control',
      'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n',
    );
    host.files.set('/sys/fs/cgroup/pids/sy/e1-a/pids.events', 'max 7\n');
    expect(group.report()).toEqual({ oomKilled: true, oomKills: 1, pidsLimitHit: true });
  });

  it('v1: a session group holds the session quota and weight, caps its run groups at it, and goes with them', async () => {
    const { host, limiter } = v1();
    const session = limiter.createParent('e1-s', { cpus: 1, weight: 50 })!;
    expect(host.writes).toEqual([
      '/sys/fs/cgroup/cpu/sy/e1-s/cpu.cfs_period_us=100000',
      '/sys/fs/cgroup/cpu/sy/e1-s/cpu.cfs_quota_us=100000',
      '/sys/fs/cgroup/cpu/sy/e1-s/cpu.shares=512',
    ]);
    // A run asking for more than the session may have gets the session's quota (v1 refuses more with EINVAL).
    const run = limiter.create('e1-r', { memoryBytes: 1000, pids: 16, cpus: 2 }, { parent: session });
    expect(host.read('/sys/fs/cgroup/cpu/sy/e1-s/e1-r/cpu.cfs_quota_us')).toBe('100000');
    expect(host.exists('/sys/fs/cgroup/memory/sy/e1-s/e1-r')).toBe(true);
    await run.join(77);
    session.setWeight(10);
    expect(host.read('/sys/fs/cgroup/cpu/sy/e1-s/cpu.shares')).toBe('102');
    await session.destroy();
    expect(host.killed).toEqual([77]);
    for (const h of ['memory', 'pids', 'cpu']) expect(host.exists(`/sys/fs/cgroup/${h}/sy/e1-s`)).toBe(false);
  });

  it('makes no session group without a cpu controller', () => {
    const host = new FakeCgroupFs(v1Files);
    const limiter = new CgroupLimiter(
      1,
      { memory: '/sys/fs/cgroup/memory/sy', pids: '/sys/fs/cgroup/pids/sy' },
      host,
    );
    expect(limiter.createParent('e1-s', { cpus: 1 })).toBeUndefined();
  });

  it('destroy kills what is left and removes the directories; idempotent', async () => {
    const { host, limiter } = v1();
    const group = limiter.create('e1-b', { memoryBytes: 1000, pids: 16 });
    await group.join(11);
    await group.join(12);
    await Promise.all([group.destroy(), group.destroy()]);
    expect(host.killed.sort()).toEqual([11, 12]);
    expect(host.exists('/sys/fs/cgroup/memory/sy/e1-b')).toBe(false);
    expect(host.exists('/sys/fs/cgroup/pids/sy/e1-b')).toBe(false);
    expect(host.exists('/sys/fs/cgroup/cpu/sy/e1-b')).toBe(false);
    await limiter.dispose();
    expect(host.exists('/sys/fs/cgroup/pids/sy')).toBe(false);
  });

  it('v2: one directory with swap off, group OOM kill and cgroup.kill', async () => {
    const host = new FakeCgroupFs(v2Files);
    host.addDir('/cg');
    const limiter = new CgroupLimiter(
      2,
      { memory: '/cg/switchyard', pids: '/cg/switchyard', cpu: '/cg/switchyard' },
      host,
    );
    limiter.prepare();
    host.writes.length = 0;
    const group = limiter.create('e1-c', { memoryBytes: 2048, pids: 8, cpus: 0.25 });
    expect(host.writes).toEqual([
      '/cg/switchyard/e1-c/memory.max=2048',
      '/cg/switchyard/e1-c/memory.swap.max=0',
      '/cg/switchyard/e1-c/memory.oom.group=1',
      '/cg/switchyard/e1-c/pids.max=8',
      '/cg/switchyard/e1-c/cpu.max=25000 100000',
    ]);
    await group.kill();
    expect(host.writes).toContain('/cg/switchyard/e1-c/cgroup.kill=1');
    host.files.set('/cg/switchyard/e1-c/memory.events', 'oom 1\noom_kill 0\noom_group_kill 1\n');
    expect(group.report().oomKilled).toBe(true);
  });

  it('a group created closed lets nothing fork until it is opened', () => {
    const { host, limiter } = v1();
    const group = limiter.create('e1-e', { memoryBytes: 1000, pids: 16 }, { closed: true });
    expect(host.read('/sys/fs/cgroup/pids/sy/e1-e/pids.max')).toBe('1');
    group.open();
    expect(host.read('/sys/fs/cgroup/pids/sy/e1-e/pids.max')).toBe('16');
  });

  it('reaps the groups of dead engines, killing what is left in them, and leaves live engines’ alone', async () => {
    const host = new FakeCgroupFs(v1Files);
    const dirs = ['/m/sy', '/p/sy'];
    const groups = [
      'e100-old', // earlier naming, pid only: engine 100 is gone
      'e200-live', // earlier naming, engine 200 runs
      'e300-555-busy', // engine 300 is gone; its launcher is still there
      'e400-777-reused', // pid 400 now belongs to a process started later
      'e500-888-live', // engine 500 runs
      'other', // not ours
    ];
    for (const d of dirs) {
      host.addDir(d);
      for (const g of groups) host.addDir(`${d}/${g}`);
    }
    host.files.set('/m/sy/e300-555-busy/cgroup.procs', '77');
    host.files.set('/p/sy/e300-555-busy/cgroup.procs', '77');
    host.files.set('/p/sy/e500-888-live/cgroup.procs', '78');
    host.ticks.set(200, '1').set(400, '999').set(500, '888');
    const limiter = new CgroupLimiter(1, { memory: '/m/sy', pids: '/p/sy' }, host);
    expect((await limiter.reapOrphans()).sort()).toEqual(['e100-old', 'e300-555-busy', 'e400-777-reused']);
    expect(host.killed).toEqual([77]);
    for (const d of dirs) expect(host.listDirs(d).sort()).toEqual(['e200-live', 'e500-888-live', 'other']);
  });

  it('turns a failed setup into a retriable SandboxInternalError and cleans up', () => {
    const { host, limiter } = v1();
    host.busy.add('/sys/fs/cgroup/pids/sy/e1-d/pids.max');
    expect(() => limiter.create('e1-d', { memoryBytes: 1, pids: 1 })).toThrow(
      expect.objectContaining({ code: 'CGROUP_SETUP', retriable: true }),
    );
  });
});
