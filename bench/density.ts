/**
 * Density: how many sessions one engine holds, each with a warm container and a running kernel, and what each costs.
 * Sessions are created one by one; each runs one pooled `print(1)` (it claims its container) and one kernel cell
 * (`state: "session"`, it starts the session's python kernel), and keeps both. At steps (1, 10, 25, 50, 100, 150,
 * 200 sessions) it prints:
 * - the engine's RSS and V8 heap after a full GC (`--expose-gc`; the engine runs in this process, as in `run.ts`);
 * - the session containers' memory from their cgroups (usage, and RSS: anonymous memory), per session, and what the
 *   kernel cell added to its container's cgroup (the kernel lives in the session's container when it has one);
 * - the PSS of each container's `containerd-shim`, which the host pays per container outside its cgroup;
 * - the machine's `MemAvailable` drop since the start, per session: everything a session costs the host (the
 *   container's shim, Docker's bookkeeping, the kernel), but also whatever other jobs on the machine did meanwhile;
 * - the create -> first result and kernel start times of the sessions since the previous step.
 * It stops at `BENCH_DENSITY_SESSIONS` (default 200), at the first error (printed), or before the machine runs short
 * of memory (`MemAvailable` under `BENCH_DENSITY_MIN_FREE_MIB`, default 4096), then ends every session. Called by
 * `run.ts` (`BENCH_ONLY=density`); `node --expose-gc dist/bench/density.js` runs it alone.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startEngine, timed } from './engine-client';
import { median, ms, pct } from './stats';

const MiB = 2 ** 20;
const STEPS = [1, 10, 25, 50, 100, 150, 200];

/** `MemAvailable` of /proc/meminfo, in bytes. */
function memAvailable(): number {
  const line = fs
    .readFileSync('/proc/meminfo', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('MemAvailable:'))!;
  return Number(line.split(/\s+/)[1]) * 1024;
}

/** A container's memory from its cgroup (v1 or v2): usage (with page cache) and anonymous memory. */
function cgroupMemory(id: string): { usage: number; rss: number } | undefined {
  const v1 = `/sys/fs/cgroup/memory/docker/${id}`;
  const v2 = [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`].find((d) =>
    fs.existsSync(`${d}/memory.current`),
  );
  const stat = (file: string): Record<string, string> =>
    Object.fromEntries(
      fs
        .readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ')),
    );
  if (fs.existsSync(`${v1}/memory.usage_in_bytes`)) {
    return {
      usage: Number(fs.readFileSync(`${v1}/memory.usage_in_bytes`, 'utf8')),
      rss: Number(stat(`${v1}/memory.stat`).rss),
    };
  }
  if (v2) {
    return {
      usage: Number(fs.readFileSync(`${v2}/memory.current`, 'utf8')),
      rss: Number(stat(`${v2}/memory.stat`).anon),
    };
  }
  return undefined;
}

/**
 * The proportional set size of each container's `containerd-shim` (outside the container's cgroup: the host pays it
 * per container on top of the cgroup's figure), by container id.
 */
function shimPss(ids: Set<string>): number[] {
  const out: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!args[0].includes('containerd-shim')) continue;
      const id = args[args.indexOf('-id') + 1];
      if (!ids.has(id)) continue;
      const pss = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      if (pss) out.push(Number(pss[1]) * 1024);
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

const mib = (bytes: number, digits = 1) => `${(bytes / MiB).toFixed(digits)} MiB`;

interface Held {
  sid: string;
  container: string;
  /** The container's anonymous memory before and after the kernel cell. */
  rssBeforeKernel: number;
  rssAfterKernel: number;
}

export async function benchDensity(options: { sessions?: number; minFreeMiB?: number } = {}): Promise<void> {
  const target = options.sessions ?? Number(process.env.BENCH_DENSITY_SESSIONS ?? 200);
  const minFree = (options.minFreeMiB ?? Number(process.env.BENCH_DENSITY_MIN_FREE_MIB ?? 4096)) * MiB;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-density-'));
  const engine = await startEngine(dataDir, {
    // Every session keeps its container: the pool's cap on sessions must not be what stops the run.
    SWITCHYARD_POOL_MAX_SESSIONS: String(Math.max(target, 16)),
  });
  const gc = (globalThis as { gc?: () => void }).gc;
  const engineMemory = () => {
    gc?.();
    const m = process.memoryUsage();
    return { rss: m.rss, heap: m.heapUsed };
  };
  const held: Held[] = [];
  const firsts: number[] = [];
  const kernelStarts: number[] = [];
  const kernelTiers = new Map<string, number>();
  let stopped = `${target} sessions`;
  let lastStep = 0;
  try {
    const start = { engine: engineMemory(), available: memAvailable() };
    console.log(
      `density: sessions each holding a warm container and a python kernel, up to ${target} ` +
        `(stops below ${mib(minFree, 0)} MemAvailable); engine RSS at start ${mib(start.engine.rss)}, ` +
        `heap ${mib(start.engine.heap)}, MemAvailable ${mib(start.available, 0)}`,
    );
    console.log(
      '  sessions  engine RSS (heap)        container usage / RSS per session   kernel adds (RSS)   ' +
        'shim PSS (shims)      MemAvailable drop per session   create->first result p50 (p99)   kernel start p50 (p99)',
    );
    let since = 0;
    let firstStep: { n: number; rss: number; heap: number } | undefined;
    const step = () => {
      lastStep = held.length;
      const e = engineMemory();
      firstStep ??= { n: held.length, rss: e.rss, heap: e.heap };
      const mem = held.map((h) => cgroupMemory(h.container)).filter((m) => m !== undefined);
      const usage = mem.reduce((a, m) => a + m.usage, 0) / Math.max(1, mem.length);
      const rss = mem.reduce((a, m) => a + m.rss, 0) / Math.max(1, mem.length);
      const kernel = median(held.map((h) => h.rssAfterKernel - h.rssBeforeKernel));
      const shims = shimPss(new Set(held.map((h) => h.container)));
      const shim = shims.reduce((a, b) => a + b, 0) / Math.max(1, shims.length);
      const drop = (start.available - memAvailable()) / held.length;
      const p50p99 = (xs: number[]) => (xs.length ? `${ms(median(xs), 1)} (${ms(pct(xs, 99), 1)})` : '-');
      const f = firsts.slice(since);
      const k = kernelStarts.slice(since);
      since = firsts.length;
      console.log(
        `  ${String(held.length).padStart(8)}  ${mib(e.rss).padStart(10)} (${mib(e.heap)})`.padEnd(36) +
          `${mib(usage)} / ${mib(rss)}`.padEnd(36) +
          `${mib(kernel)}`.padEnd(20) +
          `${mib(shim)} (${shims.length})`.padEnd(22) +
          `${mib(drop)}`.padEnd(32) +
          `${p50p99(f)}`.padEnd(33) +
          p50p99(k),
      );
    };
    for (let n = 1; n <= target; n++) {
      if (memAvailable() < minFree) {
        stopped = `MemAvailable under ${mib(minFree, 0)} after ${held.length} sessions`;
        break;
      }
      try {
        let actionId = '';
        const first = await timed(async () => {
          const sid = await engine.newSession();
          actionId = await engine.print1(sid, 'pooled');
          held.push({ sid, container: '', rssBeforeKernel: 0, rssAfterKernel: 0 });
        });
        const h = held.at(-1)!;
        h.container = await engine.sandboxOf(h.sid, actionId);
        h.rssBeforeKernel = cgroupMemory(h.container)?.rss ?? 0;
        firsts.push(first);
        let cell: any;
        kernelStarts.push(
          await timed(async () => {
            cell = await engine.call('POST', `/v1/sessions/${h.sid}/actions`, {
              type: 'code',
              language: 'python',
              code: 'x = 1',
              state: 'session',
            });
          }),
        );
        if (cell?.status !== 'succeeded' || cell.output?.kernel?.started !== true) {
          throw new Error(`the kernel cell did not start a kernel: ${JSON.stringify(cell).slice(0, 400)}`);
        }
        const tier = `${cell.output.kernel.tier}${cell.output.containerId === h.container ? ' (its container)' : ''}`;
        kernelTiers.set(tier, (kernelTiers.get(tier) ?? 0) + 1);
        h.rssAfterKernel = cgroupMemory(h.container)?.rss ?? 0;
      } catch (err) {
        stopped = `the first error, at session ${n}: ${(err as Error).message}`;
        break;
      }
      if (STEPS.includes(n) || n === target) step();
    }
    if (lastStep !== held.length && held.length > 0) step();
    console.log(`  stopped at ${stopped}`);
    console.log(
      `  kernels ran in: ${[...kernelTiers].map(([t, c]) => `${t} x${c}`).join(', ') || 'none'}; ` +
        `${new Set(held.map((h) => h.container)).size} distinct containers`,
    );
    if (firstStep && held.length > firstStep.n) {
      const e = engineMemory();
      const per = (now: number, then: number) => mib((now - then) / (held.length - firstStep!.n), 3);
      console.log(
        `  engine growth per session after the first (its start-up garbage collected): RSS ` +
          `${per(e.rss, firstStep.rss)}, V8 heap ${per(e.heap, firstStep.heap)}`,
      );
    }
  } finally {
    const t0 = performance.now();
    for (let i = 0; i < held.length; i += 8) {
      await Promise.all(held.slice(i, i + 8).map((h) => engine.endSession(h.sid).catch(() => undefined)));
    }
    console.log(`  ended ${held.length} sessions in ${ms(performance.now() - t0, 0)}`);
    await engine.app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

// `node --expose-gc dist/bench/density.js` runs this section alone.
if (require.main === module) {
  benchDensity().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
