/**
 * Section 13, image root: python `print(1)` in the subprocess tier on the sandbox image's exported root vs on the
 * host's /usr (the tier as it was before issue 29, and its fallback when no image is built), in the same run: two
 * tiers with the same options, one with the Docker backend's image roots and one without, runs alternating so drift
 * hits both alike. Target: the image root <= 1.10x the host's /usr, median and p90.
 */
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import Dockerode from 'dockerode';
import {
  BubblewrapTier,
  SpawnerProcessLauncher,
  DockerodeClient,
  ImageRoots,
  detectProcessLimiter,
  resolveSandboxOptions,
  type TierJob,
} from '@switchyard/sandbox';
import { printRatio } from './stats';

export async function benchImageRoot(options: { runs: number }): Promise<void> {
  Logger.overrideLogger(['error']);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-root-'));
  // A root engine runs bubblewrap as the sandbox uid, which must reach the scaffold under it.
  chmodSync(dir, 0o755);
  const sandbox = resolveSandboxOptions({ tempDir: path.join(dir, 'tmp') });
  const roots = new ImageRoots(new DockerodeClient(new Dockerode({ socketPath: '/var/run/docker.sock' })), {
    dir: path.join(process.cwd(), '.runtime', 'rootfs'),
    imageTagFile: path.join(process.cwd(), '.runtime', 'sandbox-image.tag'),
  });
  const tiers = {
    image: new BubblewrapTier(
      sandbox,
      new SpawnerProcessLauncher(),
      detectProcessLimiter(sandbox.subprocess.cgroup),
      undefined,
      roots,
    ),
    host: new BubblewrapTier(
      sandbox,
      new SpawnerProcessLauncher(),
      detectProcessLimiter(sandbox.subprocess.cgroup),
    ),
  };
  const workspaceDir = mkdtempSync(path.join(dir, 'ws-'));
  if (sandbox.runAs) chownSync(workspaceDir, sandbox.runAs.uid, sandbox.runAs.gid);
  const job = (i: number, session: string): TierJob => ({
    actionId: `bench-${i}`,
    // One session per tier: each tier keeps its own session cgroup.
    sessionId: `bench-${session}`,
    language: 'python',
    code: 'print(1)',
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' },
    timeoutMs: 10_000,
    workspaceDir,
    output: { maxBytes: 64 * 1024, maxLines: 100 },
  });
  const once = async (which: keyof typeof tiers, i: number): Promise<number> => {
    const t0 = performance.now();
    const r = await tiers[which].run(job(i, which));
    if (r.exitCode !== 0 || r.stdout !== '1\n') throw new Error(`print(1) failed: ${JSON.stringify(r)}`);
    return performance.now() - t0;
  };
  try {
    const availability = await tiers.image.availability();
    const system = availability.details?.system as { root: string; image?: string; reason?: string };
    if (system.root !== 'image') throw new Error(`the image root is not in use: ${system.reason}`);
    await tiers.host.availability();
    const times = { image: [] as number[], host: [] as number[] };
    for (let i = 0; i < 3; i++) for (const which of ['image', 'host'] as const) await once(which, -i); // warm-up
    for (let i = 0; i < options.runs; i++) {
      // Alternate which goes first, so neither always finds the other's warm slot refill running.
      const order = i % 2 === 0 ? (['image', 'host'] as const) : (['host', 'image'] as const);
      for (const which of order) times[which].push(await once(which, i));
    }
    printRatio(
      `python print(1), subprocess tier: image root (${system.image}) vs host /usr`,
      { name: 'host /usr', times: times.host },
      { name: 'image root', times: times.image },
      1.1,
    );
  } finally {
    await tiers.image.onApplicationShutdown();
    await tiers.host.onApplicationShutdown();
    rmSync(dir, { recursive: true, force: true });
  }
}
