/**
 * Measurements of the pooled tier against real Docker. Opt-in, it takes ~30 s:
 *
 *   npm run bench (jest project `bench`)
 *
 * Prints medians/p99 and ratios (STYLE: ratios, not absolute times, are what is compared). The only assertion is
 * the target: pooled `print(1)` within 1.5x a raw host spawn of the same.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import Dockerode from 'dockerode';
import { DockerodeClient } from '../container/docker-client';
import { buildChildEnv } from '../env-policy';
import type { TierJob } from '../sandbox.types';
import { SANDBOX_UID } from './container-config';
import { ChildProcessHostMounts } from './host-mounts';
import { resolvePooledOptions } from './pooled.options';
import { PooledTier } from './pooled-tier';

const RUNS = 30;
const enabled = process.env.SWITCHYARD_POOLED_BENCH === '1' && process.getuid?.() === 0;
// A measurement, not a test: outside the unit/e2e projects; `npm run bench` runs it (as root).
if (!enabled) throw new Error('set SWITCHYARD_POOLED_BENCH=1 and run as root (npm run bench)');
const describeBench = describe;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p99 = (xs: number[]) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.99) - 1)];
const ms = (x: number) => `${x.toFixed(2)} ms`;

async function time(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

function hostSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', ['-c', 'print(1)'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 && out === '1\n' ? resolve() : reject(new Error(`exit ${code}`)),
    );
  });
}

async function dockerExec(docker: Dockerode, id: string): Promise<void> {
  const exec = await docker.getContainer(id).exec({
    Cmd: ['/usr/bin/python3', '-c', 'print(1)'],
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  await new Promise((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.resume();
  });
  const info = await exec.inspect();
  if (info.ExitCode !== 0) throw new Error(`exec exit ${info.ExitCode}`);
}

async function until(check: () => boolean, withinMs: number): Promise<number> {
  const t0 = performance.now();
  while (!check()) {
    if (performance.now() - t0 > withinMs) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 2));
  }
  return performance.now() - t0;
}

describeBench('PooledTier measurements', () => {
  jest.setTimeout(120_000);
  const repoRoot = path.resolve(__dirname, '../../../..');
  const options = resolvePooledOptions(
    {
      min: 2,
      max: 4,
      mountRoot: path.join(os.tmpdir(), `sy-pooled-bench-${randomBytes(3).toString('hex')}`),
    },
    { cwd: repoRoot },
  );
  const docker = new Dockerode();
  let tier: PooledTier;
  let workspaceDir: string;
  const job = (sessionId: string, language: TierJob['language'], code: string): TierJob => ({
    actionId: 'bench',
    sessionId,
    language,
    code,
    env: buildChildEnv({}, language),
    timeoutMs: 10_000,
    workspaceDir,
    output: { maxBytes: 1 << 20, maxLines: 2000 },
  });

  beforeAll(async () => {
    Logger.overrideLogger(['error']);
    workspaceDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-pooled-bench-ws-'));
    fs.chownSync(workspaceDir, SANDBOX_UID, SANDBOX_UID);
    tier = new PooledTier(options, new DockerodeClient(docker), new ChildProcessHostMounts());
    await tier.onModuleInit();
    await until(() => tier.stats().available >= 2, 30_000);
  });

  afterAll(async () => {
    await tier.onApplicationShutdown();
    fs.rmSync(workspaceDir, { recursive: true, force: true });
    await new Promise((resolve) => spawn('umount', [options.mountRoot]).on('close', resolve));
    fs.rmSync(options.mountRoot, { recursive: true, force: true });
  });

  it('measures', async () => {
    const lines: string[] = [];
    // Idle warm container memory, before anything runs in it.
    const warm = tier.containers().find((c) => c.state === 'warm')!;
    const cg = `/sys/fs/cgroup/memory/docker/${warm.id}`;
    const usage = Number(fs.readFileSync(`${cg}/memory.usage_in_bytes`, 'utf8'));
    const stat = Object.fromEntries(
      fs
        .readFileSync(`${cg}/memory.stat`, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ')),
    ) as Record<string, string>;
    const stats = (await docker.getContainer(warm.id).stats({ stream: false })) as unknown as {
      memory_stats: { usage: number; stats?: { cache?: number } };
    };
    lines.push(
      `idle warm container memory: cgroup usage ${(usage / 2 ** 20).toFixed(1)} MiB, rss ${(Number(stat.rss) / 2 ** 20).toFixed(1)} MiB, ` +
        `docker stats usage-cache ${((stats.memory_stats.usage - (stats.memory_stats.stats?.cache ?? 0)) / 2 ** 20).toFixed(1)} MiB`,
    );

    // Claim latency (first action of a new session minus a steady-state action) and refill time.
    const claims: number[] = [];
    const firsts: number[] = [];
    const refills: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await until(() => tier.stats().available >= 2, 30_000);
      const session = `bench-claim-${i}`;
      const claimStart = performance.now();
      firsts.push(await time(() => tier.run(job(session, 'bash', 'true'))));
      refills.push(
        (await until(() => tier.stats().available >= 2, 30_000)) +
          (performance.now() - claimStart - firsts.at(-1)!),
      );
      const steady = await time(() => tier.run(job(session, 'bash', 'true')));
      claims.push(firsts.at(-1)! - steady);
      await tier.releaseSession(session);
    }
    lines.push(
      `first action of a session (bash true): median ${ms(median(firsts))}, p99 ${ms(p99(firsts))}; ` +
        `claim overhead over a steady action: median ${ms(median(claims))}, p99 ${ms(p99(claims))}`,
    );
    lines.push(
      `pool refill after a claim (back to min=2): median ${ms(median(refills))}, p99 ${ms(p99(refills))}`,
    );

    // print(1): pooled vs raw docker exec vs raw host spawn, interleaved so drift hits all three alike.
    const session = 'bench-run';
    await tier.run(job(session, 'python', 'print(1)'));
    const id = tier.containers().find((c) => c.sessionId === session)!.id;
    const pooled: number[] = [];
    const exec: number[] = [];
    const host: number[] = [];
    for (let i = 0; i < 3; i++) await Promise.all([hostSpawn(), dockerExec(docker, id)]);
    for (let i = 0; i < RUNS; i++) {
      pooled.push(
        await time(async () => {
          const r = await tier.run(job(session, 'python', 'print(1)'));
          if (r.stdout !== '1\n') throw new Error(`unexpected ${JSON.stringify(r)}`);
        }),
      );
      exec.push(await time(() => dockerExec(docker, id)));
      host.push(await time(hostSpawn));
    }
    const [p, e, h] = [median(pooled), median(exec), median(host)];
    lines.push(
      `python print(1), median of ${RUNS}: pooled ${ms(p)}, raw docker exec ${ms(e)}, raw host spawn ${ms(h)}; ` +
        `pooled/host ${(p / h).toFixed(2)}x, exec/host ${(e / h).toFixed(2)}x, pooled/exec ${(p / e).toFixed(2)}x`,
    );
    console.log(`pooled tier measurements\n  ${lines.join('\n  ')}`);
    expect(p / h).toBeLessThanOrEqual(1.5);
  });
});
