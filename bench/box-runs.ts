/**
 * Section 14, box runs: python `print(1)` in the subprocess tier for a session whose stateful box holds a running
 * background process (the run goes through the box's runner, in the process's network namespace: issue 29) vs the
 * same for a session without one (a fresh bubblewrap sandbox from a warm slot, the tier's usual path), alternating in
 * one run with one tier, so drift hits both alike. Target: the box run <= 1.10x the fresh sandbox, median and p90.
 */
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import Dockerode from 'dockerode';
import { systemClock } from '@switchyard/common';
import {
  BubblewrapTier,
  SpawnerProcessLauncher,
  DockerodeClient,
  ImageRoots,
  SessionProcesses,
  detectProcessLimiter,
  resolveSandboxOptions,
  type TierJob,
} from '@switchyard/sandbox';
import { printRatio } from './stats';

const TARGET = 1.1;

export async function benchBoxRuns(options: { runs: number }): Promise<void> {
  Logger.overrideLogger(['error']);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-box-'));
  // A root engine runs bubblewrap as the sandbox uid, which must reach the scaffold under it.
  chmodSync(dir, 0o755);
  const sandbox = resolveSandboxOptions({
    tempDir: path.join(dir, 'tmp'),
    stateful: { runnerDir: path.join(process.cwd(), 'docker', 'sandbox', 'runner') },
  });
  const roots = new ImageRoots(new DockerodeClient(new Dockerode({ socketPath: '/var/run/docker.sock' })), {
    dir: path.join(process.cwd(), '.runtime', 'rootfs'),
    imageTagFile: path.join(process.cwd(), '.runtime', 'sandbox-image.tag'),
  });
  const tier = new BubblewrapTier(
    sandbox,
    new SpawnerProcessLauncher(),
    detectProcessLimiter(sandbox.subprocess.cgroup),
    undefined,
    roots,
  );
  const processes = new SessionProcesses(
    [tier.stateful],
    { maxPerSession: 4, maxPerSessionSetting: 'SWITCHYARD_MAX_PROCESSES', logBytes: 64 * 1024, redact: [] },
    systemClock,
  );
  const workspace = (name: string): string => {
    const ws = mkdtempSync(path.join(dir, `${name}-`));
    if (sandbox.runAs) chownSync(ws, sandbox.runAs.uid, sandbox.runAs.gid);
    return ws;
  };
  const sessions = {
    box: { id: 'bench-box', ws: workspace('box') },
    fresh: { id: 'bench-fresh', ws: workspace('fresh') },
  };
  const env = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/workspace' };
  const job = (i: number, which: keyof typeof sessions): TierJob => ({
    actionId: `bench-${which}-${i}`,
    sessionId: sessions[which].id,
    language: 'python',
    code: 'print(1)',
    env,
    timeoutMs: 10_000,
    workspaceDir: sessions[which].ws,
    output: { maxBytes: 64 * 1024, maxLines: 100 },
  });
  const once = async (which: keyof typeof sessions, i: number): Promise<number> => {
    const t0 = performance.now();
    const r = await tier.run(job(i, which));
    if (r.exitCode !== 0 || r.stdout !== '1\n') throw new Error(`print(1) failed: ${JSON.stringify(r)}`);
    return performance.now() - t0;
  };
  try {
    const availability = await tier.availability();
    if (!availability.available) throw new Error(`subprocess tier unavailable: ${availability.reason}`);
    await processes.start({
      actionId: 'bench-server',
      sessionId: sessions.box.id,
      command: 'exec sleep 100000',
      env: {},
      baseEnv: env,
      tier: 'subprocess',
      workspaceDir: sessions.box.ws,
    });
    if ((await tier.stateful.live(sessions.box.id)) === undefined)
      throw new Error('the box holds no process');
    const times = { box: [] as number[], fresh: [] as number[] };
    for (let i = 0; i < 3; i++) for (const which of ['box', 'fresh'] as const) await once(which, -i); // warm-up
    for (let i = 0; i < options.runs; i++) {
      const order = i % 2 === 0 ? (['box', 'fresh'] as const) : (['fresh', 'box'] as const);
      for (const which of order) times[which].push(await once(which, i));
    }
    printRatio(
      'python print(1), subprocess tier: in the session box (a process running) vs a fresh sandbox',
      { name: 'fresh sandbox (warm slot)', times: times.fresh },
      { name: 'session box, beside its process', times: times.box },
      TARGET,
    );
  } finally {
    processes.close();
    await tier.onApplicationShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
}

// `node dist/bench/box-runs.js` runs this section alone.
if (require.main === module) {
  benchBoxRuns({ runs: Number(process.env.BENCH_RUNS ?? 40) }).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
