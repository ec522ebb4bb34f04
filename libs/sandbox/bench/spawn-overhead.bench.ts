/**
 * Per-action overhead of the subprocess tier: median wall time of python `print(1)` spawned raw, inside a bare
 * bubblewrap (same sandbox arguments, no prlimit/cgroup/engine bookkeeping) and through `BubblewrapTier.run`.
 * Reports ratios, which is what matters across machines. Run from the repo root:
 *   TS_NODE_TRANSPILE_ONLY=1 npx ts-node -r tsconfig-paths/register libs/sandbox/bench/spawn-overhead.bench.ts [runs]
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { buildChildEnv } from '../src/core/env-policy';
import { resolveSandboxOptions } from '../src/core/sandbox.options';
import {
  ARGS_FD,
  buildLauncherCommand,
  buildRunArgs,
  CODE_TARGET,
  detectSystemLayout,
} from '../src/backends/subprocess/bwrap-command';
import { BubblewrapTier } from '../src/backends/subprocess/bubblewrap-tier';
import { detectProcessLimiter } from '../src/backends/subprocess/cgroup-limiter';
import { SpawnerProcessLauncher } from '../src/backends/subprocess/spawner-launcher';

const RUNS = Number(process.argv[2] ?? 30);

function timeSpawn(command: string, args: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, {
      env,
      cwd: '/',
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    child.stdout.resume();
    child.stderr.resume();
    (child.stdio[3] as NodeJS.ReadableStream).resume();
    child.stdin.end();
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(performance.now() - started) : reject(new Error(`exit ${code}`)),
    );
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function main(): Promise<void> {
  Logger.overrideLogger(['error', 'warn']);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-bench-'));
  const workspaceDir = path.join(dir, 'ws');
  fs.mkdirSync(workspaceDir);
  const codeFile = path.join(dir, 'main.py');
  fs.writeFileSync(codeFile, 'print(1)\n', { mode: 0o644 });
  fs.writeFileSync(path.join(dir, 'passwd'), 'nobody:x:65534:65534::/tmp:/usr/sbin/nologin\n');
  fs.writeFileSync(path.join(dir, 'group'), 'nogroup:x:65534:\n');
  const python = fs.realpathSync('/usr/bin/python3');
  const env = buildChildEnv({}, 'python');

  const options = resolveSandboxOptions({
    subprocess: {
      cgroup: { mode: (process.env.SY_CGROUP as 'off' | undefined) ?? 'auto' },
      warmSlots: Number(process.env.SY_WARM_SLOTS ?? 2),
    },
  });
  const limiter = detectProcessLimiter(options.subprocess.cgroup);
  const tier = new BubblewrapTier(options, new SpawnerProcessLauncher(), limiter);
  const availability = await tier.availability();
  if (!availability.available) throw new Error(availability.reason);

  // The same sandbox as the tier's, with the run's options inline instead of through the args pipe.
  const { args: launcherArgs } = buildLauncherCommand({
    prlimitPath: options.prlimitPath,
    bwrapPath: options.bwrapPath,
    rlimits: { fileSizeBytes: 1 << 26, openFiles: 256, cpuSeconds: 31 },
    sandbox: {
      layout: detectSystemLayout(),
      etc: { passwd: path.join(dir, 'passwd'), group: path.join(dir, 'group') },
      readOnlyBinds: [],
      tmpfsBytes: 1 << 26,
    },
    argv: [python, '-s', CODE_TARGET.python],
  });
  const bwrapArgs = launcherArgs.slice(launcherArgs.indexOf(options.bwrapPath) + 1);
  bwrapArgs.splice(
    bwrapArgs.indexOf('--args'),
    2,
    ...buildRunArgs({ workspaceDir, codeFile, codeTarget: CODE_TARGET.python, env }),
  );
  if (bwrapArgs.includes(String(ARGS_FD)) && bwrapArgs.includes('--args'))
    throw new Error('args pipe left in');
  const job = {
    actionId: 'bench',
    sessionId: 'bench',
    language: 'python' as const,
    code: 'print(1)\n',
    env,
    timeoutMs: 10_000,
    workspaceDir,
    output: options.output,
  };

  const variants: Record<string, () => Promise<number>> = {
    raw: () => timeSpawn(python, ['-s', codeFile], env),
    bwrap: () => timeSpawn(options.bwrapPath, bwrapArgs, {}),
    tier: async () => {
      const started = performance.now();
      const r = await tier.run(job);
      if (r.exitCode !== 0 || r.stdout !== '1\n') throw new Error(JSON.stringify(r));
      return performance.now() - started;
    },
  };
  const samples: Record<string, number[]> = { raw: [], bwrap: [], tier: [] };
  for (const run of Object.values(variants)) await run(); // warm-up
  // Interleaved so drift on the machine hits every variant alike.
  for (let i = 0; i < RUNS; i++)
    for (const [name, run] of Object.entries(variants)) samples[name].push(await run());
  const m = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
  console.log(
    `python print(1), ${RUNS} runs each, limiter ${limiter.mode}, warmSlots ${options.subprocess.warmSlots}`,
  );
  for (const k of Object.keys(m)) console.log(`  ${k.padEnd(6)} median ${m[k].toFixed(1)} ms`);
  console.log(
    `  bwrap/raw ${(m.bwrap / m.raw).toFixed(2)}x, tier/bwrap ${(m.tier / m.bwrap).toFixed(2)}x (target <= 1.30)`,
  );
  await tier.onApplicationShutdown();
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
