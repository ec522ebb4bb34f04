/**
 * Switchyard against its peers on this machine, in one run with every sample interleaved (A, B, C, A, B, C…) and the
 * load average printed before and after (issue 34):
 *
 * 1. one-off python `print(1)`: the `container` tier through the API on runc and on gVisor vs epicbox 1.1 (runc,
 *    network disabled) vs a raw `docker run --rm` (Docker SDK `containers.run(remove=True)`) on runc and on runsc.
 *    Targets: API runc <= 1.0x epicbox; API gVisor <= 1.5x epicbox and <= 0.8x the raw runsc `docker run`. The API
 *    sides run in one session, whose runs after the first take the container started ahead after the run before; a
 *    new session's first run (no container started ahead) is sampled apart.
 * 2. the cold cycle: create a session, one pooled `print(1)`, delete the session through the API vs one `epicbox.run`.
 * 3. the warm path: a pooled `print(1)` through the API vs `session.run("print(1)")` in an open llm-sandbox session vs
 *    a raw `docker exec` (dockerode) into a running container of the sandbox image.
 * 4. where a one-off run's time goes: the tier's own container spec (`buildContainerSpec`) for runc and runsc, driven
 *    phase by phase with dockerode (create, attach + code on stdin, start, until the exit, remove), interleaved.
 *
 * The peers run in `bench/peers_driver.py`, in the pinned venv of `scripts/peers-venv.sh`. Called by `run.ts`
 * (`BENCH_ONLY=peers`); `node dist/bench/peers.js` runs it alone. `BENCH_PEER_RUNS` (default 30) samples per side.
 */
import 'reflect-metadata';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import {
  AHEAD_ACTION_LABEL,
  buildChildEnv,
  buildContainerSpec,
  containerStdin,
  LABEL_ACTION,
  LABEL_SESSION,
  LABEL_TIER,
  resolveContainerOptions,
  type TierJob,
} from '@switchyard/sandbox';
import Dockerode from 'dockerode';
import { dockerExecPrint1, startEngine, timed, type BenchEngine } from './engine-client';
import { median, ms, pct } from './stats';

const REPO = path.resolve(__dirname, '..', '..');
const RUNTIME_DIR = process.env.SWITCHYARD_RUNTIME_DIR ?? path.join(REPO, '.runtime');
const VENV_PYTHON = path.join(RUNTIME_DIR, 'peers-venv', 'bin', 'python');

/** One side of a comparison: its name and a sampler resolving with one wall time in ms. */
interface Side {
  name: string;
  sample: () => Promise<number>;
  times: number[];
}

/** The peers' driver: one JSON request per line in, one answer per line out. */
class PeerDriver {
  private readonly answers: AsyncIterator<string>;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    this.answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    child.stderr.on('data', (d: Buffer) => process.stderr.write(`  [peers] ${d.toString()}`));
  }

  static start(image: string): PeerDriver {
    if (!fs.existsSync(VENV_PYTHON))
      throw new Error(`no ${VENV_PYTHON}: run bash scripts/peers-venv.sh first`);
    return new PeerDriver(
      spawn(VENV_PYTHON, [path.join(REPO, 'bench', 'peers_driver.py'), image], { stdio: 'pipe' }),
    );
  }

  async sample(request: Record<string, string>): Promise<number> {
    this.child.stdin.write(`${JSON.stringify(request)}\n`);
    const next = await this.answers.next();
    if (next.done) throw new Error(`bench: the peers' driver exited (asked ${JSON.stringify(request)})`);
    const answer = JSON.parse(next.value) as { ms?: number; error?: string };
    if (answer.ms === undefined) throw new Error(`bench: ${request.side}: ${answer.error}`);
    return answer.ms;
  }

  async close(): Promise<void> {
    this.child.stdin.end(`${JSON.stringify({ side: 'close' })}\n`);
    await new Promise((resolve) => this.child.once('close', resolve));
  }
}

const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** Samples every side `runs` times, interleaved, rotating which side goes first each round; warms each up first. */
async function interleave(sides: Side[], runs: number, warmup = 2): Promise<void> {
  for (let i = 0; i < warmup; i++) for (const s of sides) await s.sample();
  for (let i = 0; i < runs; i++) {
    for (let j = 0; j < sides.length; j++) {
      const s = sides[(i + j) % sides.length];
      s.times.push(await s.sample());
    }
  }
}

function report(title: string, sides: Side[], ratios: Array<[string, string, number | undefined]>): void {
  const by = new Map(sides.map((s) => [s.name, s.times]));
  console.log(title);
  for (const s of sides) {
    console.log(
      `  ${s.name.padEnd(36)} median ${ms(median(s.times))}   p90 ${ms(pct(s.times, 90))}   p99 ${ms(pct(s.times, 99))}   (${s.times.length} runs)`,
    );
  }
  for (const [side, base, target] of ratios) {
    const [a, b] = [by.get(side)!, by.get(base)!];
    const r50 = median(a) / median(b);
    const r90 = pct(a, 90) / pct(b, 90);
    const verdict =
      target === undefined ? '' : ` (target <= ${target.toFixed(2)}x) ${r50 <= target ? 'OK' : 'MISSED'}`;
    console.log(`  ${side} / ${base}: median ${r50.toFixed(2)}x, p90 ${r90.toFixed(2)}x${verdict}`);
  }
  console.log('');
}

const PHASES = ['create', 'attach', 'start', 'exit', 'remove'] as const;

/** One run of the one-off tier's container for `runtime`, timed phase by phase; throws unless it printed 1. */
async function phasedRun(
  docker: Dockerode,
  image: string,
  runtime: string,
  job: TierJob,
  hostsFile: string,
): Promise<Record<(typeof PHASES)[number], number>> {
  const spec = buildContainerSpec({ job, image, options: resolveContainerOptions({}), runtime, hostsFile });
  const t0 = performance.now();
  const c = await docker.createContainer(spec);
  const t1 = performance.now();
  const stream = await c.attach({
    stream: true,
    stdin: true,
    stdout: true,
    stderr: true,
    hijack: true,
  });
  const chunks: Buffer[] = [];
  stream.on('data', (b: Buffer) => chunks.push(b));
  stream.end(containerStdin(job));
  const t2 = performance.now();
  await c.start();
  const t3 = performance.now();
  await c.wait();
  const t4 = performance.now();
  await c.remove({ force: true });
  const t5 = performance.now();
  // Docker's multiplexed frames: an 8-byte header (stream, 0, 0, 0, size as uint32 BE), then the bytes.
  const data = Buffer.concat(chunks);
  let printed = '';
  for (let at = 0; at + 8 <= data.length; at += 8 + data.readUInt32BE(at + 4)) {
    printed += data.subarray(at + 8, at + 8 + data.readUInt32BE(at + 4)).toString('utf8');
  }
  if (printed !== '1\n') throw new Error(`bench: ${runtime} container printed ${JSON.stringify(printed)}`);
  return { create: t1 - t0, attach: t2 - t1, start: t3 - t2, exit: t4 - t3, remove: t5 - t4 };
}

export async function benchPeers(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_PEER_RUNS ?? 30);
  console.log('\npeers: one-off, cold cycle and warm print(1) vs epicbox, llm-sandbox, raw docker run/exec');
  console.log(`  load average before: ${loadavg()}`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-peers-'));
  const runcDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-peers-runc-'));
  const docker = new Dockerode();
  const engines: BenchEngine[] = [];
  let driver: PeerDriver | undefined;
  let held: Dockerode.Container | undefined;
  try {
    // The default engine's one-off tier is on gVisor where Docker has it; a second one on runc, without a pool.
    const gvisor = await startEngine(dataDir);
    engines.push(gvisor);
    const runc = await startEngine(runcDataDir, {
      SWITCHYARD_CONTAINER_RUNTIME: 'runc',
      SWITCHYARD_POOL_MIN: '0',
    });
    engines.push(runc);
    const health = (await gvisor.call('GET', '/health')) as {
      tiers: Record<string, { available: boolean; details?: { image?: string; runtime?: string } }>;
    };
    const image = health.tiers.container?.details?.image;
    if (!health.tiers.container?.available || !image)
      throw new Error('bench: the container tier is not available');
    if (health.tiers.container.details?.runtime !== 'runsc')
      throw new Error('bench: Docker has no runsc runtime');
    driver = PeerDriver.start(image);
    const peers = driver;
    const [gSid, rSid] = [await gvisor.newSession(), await runc.newSession()];

    /**
     * What a one-off run leaves to do once its result is out (the container started ahead for the session's next run,
     * or, once the session ended, that container's removal) settles before the next sample, untimed, so it never runs
     * during another side's sample: an agent's next action comes after its own think time.
     */
    const settled = async (sid: string, ended: boolean) => {
      const deadline = Date.now() + 5000;
      for (;;) {
        const held = await docker.listContainers({
          all: true,
          filters: { label: [`${LABEL_SESSION}=${sid}`, `${LABEL_TIER}=container`] },
        });
        const done = ended
          ? held.length === 0
          : held.length === 1 &&
            held[0].Labels[LABEL_ACTION] === AHEAD_ACTION_LABEL &&
            held[0].State === 'running';
        if (done || Date.now() > deadline) return;
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    /** One run in the session; its runs after the first take the container started ahead after the run before. */
    const next = (engine: BenchEngine, sid: string) => async () => {
      const ms = await timed(() => engine.print1(sid, 'container'));
      await settled(sid, false);
      return ms;
    };
    /** A new session's first one-off run: no container of it was started ahead (the session's calls are not timed). */
    const first = (engine: BenchEngine) => async () => {
      const sid = await engine.newSession();
      try {
        return await timed(() => engine.print1(sid, 'container'));
      } finally {
        await engine.endSession(sid);
        await settled(sid, true);
      }
    };
    const oneOff: Side[] = [
      { name: 'API one-off, runc', sample: next(runc, rSid), times: [] },
      { name: 'API one-off, gVisor', sample: next(gvisor, gSid), times: [] },
      { name: "API one-off, runc, a session's first", sample: first(runc), times: [] },
      { name: "API one-off, gVisor, a session's first", sample: first(gvisor), times: [] },
      { name: 'epicbox (runc)', sample: () => peers.sample({ side: 'epicbox' }), times: [] },
      {
        name: 'raw docker run, runc',
        sample: () => peers.sample({ side: 'docker_run', runtime: 'runc' }),
        times: [],
      },
      {
        name: 'raw docker run --runtime runsc',
        sample: () => peers.sample({ side: 'docker_run', runtime: 'runsc' }),
        times: [],
      },
    ];
    await interleave(oneOff, runs);
    report('1. one-off python print(1)', oneOff, [
      ['API one-off, runc', 'epicbox (runc)', 1.0],
      ['API one-off, gVisor', 'epicbox (runc)', 1.5],
      ['API one-off, gVisor', 'raw docker run --runtime runsc', 0.8],
      ['API one-off, runc', 'raw docker run, runc', undefined],
      ["API one-off, runc, a session's first", 'epicbox (runc)', undefined],
      ["API one-off, gVisor, a session's first", 'raw docker run --runtime runsc', undefined],
      ['epicbox (runc)', 'raw docker run, runc', undefined],
    ]);

    const cycle = async () => {
      const sid = await gvisor.newSession();
      await gvisor.print1(sid, 'pooled');
      await gvisor.endSession(sid);
    };
    const cold: Side[] = [
      { name: 'API create + pooled print(1) + delete', sample: () => timed(cycle), times: [] },
      { name: 'epicbox.run (runc)', sample: () => peers.sample({ side: 'epicbox' }), times: [] },
    ];
    await interleave(cold, runs);
    report('2. cold cycle: a new sandbox, print(1), gone', cold, [
      ['API create + pooled print(1) + delete', 'epicbox.run (runc)', undefined],
    ]);

    held = await docker.createContainer({
      Image: image,
      Entrypoint: ['sleep', 'infinity'],
      User: '10001:10001',
      HostConfig: { NetworkMode: 'none', LogConfig: { Type: 'none', Config: {} } },
    });
    await held.start();
    const heldId = held.id;
    const pooledSid = await gvisor.newSession();
    const warm: Side[] = [
      { name: 'API pooled', sample: () => timed(() => gvisor.print1(pooledSid, 'pooled')), times: [] },
      { name: 'llm-sandbox session.run', sample: () => peers.sample({ side: 'llm_sandbox' }), times: [] },
      { name: 'raw docker exec', sample: () => timed(() => dockerExecPrint1(docker, heldId)), times: [] },
    ];
    await interleave(warm, runs, 3);
    report('3. warm python print(1)', warm, [
      ['API pooled', 'raw docker exec', undefined],
      ['API pooled', 'llm-sandbox session.run', undefined],
    ]);

    const ws = fs.mkdtempSync(path.join(dataDir, 'phases-'));
    fs.chownSync(ws, 10001, 10001);
    const hostsFile = path.join(dataDir, 'sandbox-etc', 'sandbox-hosts'); // the engine's own, written by its runs
    const job: TierJob = {
      actionId: 'bench-phases',
      sessionId: 'bench-phases',
      language: 'python',
      code: 'print(1)',
      env: buildChildEnv({}, 'python'),
      timeoutMs: 30_000,
      workspaceDir: ws,
      output: { maxBytes: 1 << 20, maxLines: 1000 },
    };
    const phases = new Map(['runc', 'runsc'].map((rt) => [rt, PHASES.map(() => [] as number[])]));
    for (let i = 0; i < runs; i++) {
      for (const rt of i % 2 ? ['runsc', 'runc'] : ['runc', 'runsc']) {
        const p = await phasedRun(docker, image, rt, job, hostsFile);
        PHASES.forEach((name, k) => phases.get(rt)![k].push(p[name]));
      }
    }
    console.log("4. where a one-off run's time goes (the tier's container spec, dockerode, medians)");
    for (const [rt, xs] of phases) {
      const medians = xs.map(median);
      const parts = PHASES.map((name, k) => `${name} ${ms(medians[k], 1)}`).join(', ');
      console.log(
        `  ${rt.padEnd(6)} ${parts}; sum ${ms(
          medians.reduce((a, b) => a + b, 0),
          1,
        )} (${runs} runs)`,
      );
    }
    console.log('');
  } finally {
    console.log(`  load average after: ${loadavg()}`);
    await driver?.close().catch(() => undefined);
    await held?.remove({ force: true }).catch(() => undefined);
    for (const e of engines) await e.app.close();
    for (const d of [dataDir, runcDataDir]) fs.rmSync(d, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchPeers().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
