/**
 * Engine replicas (SWITCHYARD_STATE=postgres) on this machine, against one replica and against one engine on SQLite,
 * measured in one run. Real engine processes (`dist/apps/engine/src/main.js`) on the Kubernetes test cluster
 * (`bash scripts/k8s.sh start`), with a Postgres (`scripts/postgres.sh`, instance `bench-<pid>`) and a Neo4j
 * (`scripts/neo4j.sh`, instance `bench-replicas-<pid>`) of their own, removed after. Called by `run.ts`
 * (`BENCH_ONLY=replicas`); `node dist/bench/replicas.js` runs it alone.
 *
 * 1. Throughput: CLIENTS closed-loop clients, each on a session of its own, sending python `print(1)` (the session's
 *    pod; bash `echo 1` with BENCH_REPLICA_LANGUAGE=bash, a cheaper action for the node) for BENCH_REPLICA_SECONDS: one replica; two replicas with each client on the replica serving its session (a
 *    load balancer with session affinity); two replicas with each client alternating replicas (half the requests
 *    forwarded). Actions/s and p50/p99, and the two-replica ratios to one. The three run in BENCH_REPLICA_ROUNDS
 *    slices each (default 4), interleaved with the order rotating.
 * 2. What Postgres adds: one engine on SQLite (its graph on Neo4j behind the local outbox) vs one replica on Postgres
 *    (the graph's outbox in Postgres), the same Neo4j and cluster: `GET /v1/sessions/:id` (the session lookup: memory
 *    vs the replica route query) and python `print(1)`, interleaved, p50/p99 of each and the difference.
 * 3. Writes per action (during 1's single replica): Postgres transactions and rows inserted per action, and graph
 *    outbox entries (each one Neo4j write transaction when forwarded) per action; the engine memory a session holds;
 *    the engine's CPU per action against the whole machine's (/proc/stat), which says whether one engine's event loop
 *    or the machine's cores bound the throughput (only in the first case can a second replica double it).
 * 4. The graph outbox's apply rate: 16 sessions and 2 x BENCH_REPLICA_GRAPH_ACTIONS records (each action started
 *    and completed) written to `PostgresOutboxGraph` at once, then a read that waits for all of them to be in Neo4j:
 *    records/s, against the same records written straight to `Neo4jContextGraph`, one after another (the raw
 *    baseline: what one writer gets from Neo4j).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { Client } from 'pg';
import {
  type ActionCompletion,
  type ActionStart,
  type ContextGraph,
  createContextGraph,
  Neo4jContextGraph,
} from '@switchyard/context-graph';
import { neo4jScript, neo4jTestServer } from '../libs/context-graph/src/neo4j/neo4j.testing';
import { machineCpuMs } from './interleave';
import { median, ms, pct } from './stats';

const REPO = path.resolve(__dirname, '..', '..');
const MAIN = path.join(REPO, 'dist', 'apps', 'engine', 'src', 'main.js');
const CLIENTS = Number(process.env.BENCH_REPLICA_CLIENTS ?? 8);
const SECONDS = Number(process.env.BENCH_REPLICA_SECONDS ?? 20);
/** Slices each configuration's SECONDS is cut into, the configurations interleaved slice by slice. */
const ROUNDS = Number(process.env.BENCH_REPLICA_ROUNDS ?? 4);
const GRAPH_ACTIONS = Number(process.env.BENCH_REPLICA_GRAPH_ACTIONS ?? 500);
/**
 * The action the clients send: python `print(1)`, or with BENCH_REPLICA_LANGUAGE=bash a cheaper one for the node,
 * bash `echo 1` (bash starts in a fraction of python's time), so that the engines' work weighs more in each action.
 */
const ACTION =
  process.env.BENCH_REPLICA_LANGUAGE === 'bash'
    ? { language: 'bash', code: 'echo 1' }
    : { language: 'python', code: 'print(1)' };
/** Sessions the graph bench's actions are spread over (the forwarder applies sessions side by side). */
const GRAPH_SESSIONS = 16;

const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** One engine process and a JSON client. */
class Engine {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    readonly dataDir: string,
  ) {}

  static async start(name: string, env: Record<string, string>): Promise<Engine> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `switchyard-bench-${name}-`));
    const port = await freePort();
    let stderr = '';
    const child = spawn(process.execPath, [MAIN], {
      env: {
        ...process.env,
        ...env,
        PORT: String(port),
        SWITCHYARD_DATA_DIR: dataDir,
        SWITCHYARD_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const engine = new Engine(child, `http://127.0.0.1:${port}`, dataDir);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && child.exitCode === null) {
      try {
        const health = (await (await fetch(`${engine.url}/health`)).json()) as {
          tiers: { pooled: { available: boolean } };
        };
        if (health.tiers.pooled.available) return engine;
      } catch {
        /* not up yet */
      }
      await sleep(200);
    }
    child.kill('SIGKILL');
    throw new Error(`bench: engine ${name} did not start: ${stderr}`);
  }

  async call(method: string, url: string, body?: unknown): Promise<any> {
    const res = await fetch(`${this.url}${url}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`bench: ${method} ${url}: ${res.status} ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : undefined;
  }

  async session(): Promise<string> {
    return ((await this.call('POST', '/v1/sessions', {})) as { id: string }).id;
  }

  /** The bench's action (`ACTION`: python `print(1)`, or bash `echo 1`); throws unless it printed 1. */
  async print1(sessionId: string): Promise<void> {
    const r = await this.call('POST', `/v1/sessions/${sessionId}/actions`, {
      type: 'code',
      ...ACTION,
    });
    if (r.status !== 'succeeded' || r.stdout !== '1\n') {
      throw new Error(`bench: ${ACTION.code} did not succeed: ${JSON.stringify(r).slice(0, 300)}`);
    }
  }

  /** CPU time the engine process has used (user + system), from /proc (clock ticks of 10 ms). */
  cpuMs(): number {
    const stat = fs.readFileSync(`/proc/${this.child.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  }

  /** The engine process's resident memory. */
  rssKiB(): number {
    const status = fs.readFileSync(`/proc/${this.child.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGTERM');
      await Promise.race([exited, sleep(30_000)]);
      this.child.kill('SIGKILL');
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** CLIENTS closed loops for `seconds`; `via(c, i)` picks the engine of client c's i-th request. */
async function load(
  sessions: string[],
  via: (client: number, i: number) => Engine,
  seconds: number,
): Promise<{ perSecond: number; latencies: number[] }> {
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    sessions.map(async (sid, c) => {
      for (let i = 0; performance.now() < end; i++) latencies.push(await timed(() => via(c, i).print1(sid)));
    }),
  );
  return { perSecond: latencies.length / seconds, latencies };
}

function show(label: string, r: { perSecond: number; latencies: number[] }): void {
  console.log(
    `  ${label.padEnd(44)} ${r.perSecond.toFixed(1).padStart(6)} actions/s   p50 ${ms(median(r.latencies), 1)}` +
      `   p99 ${ms(pct(r.latencies, 99), 1)}   (${r.latencies.length} actions)`,
  );
}

async function pgStats(url: string): Promise<{ xacts: number; inserted: number; outbox: number }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    // Statistics are sent by backends when they go idle: ask for a fresh snapshot.
    await client.query('SELECT pg_stat_clear_snapshot()');
    const [db] = (
      await client.query<{ xacts: string; inserted: string }>(
        'SELECT xact_commit AS xacts, tup_inserted AS inserted FROM pg_stat_database WHERE datname = current_database()',
      )
    ).rows;
    const [outbox] = (
      await client.query<{ n: string }>(
        "SELECT coalesce(sum(n_tup_ins), 0) AS n FROM pg_stat_user_tables WHERE relname = 'graph_outbox'",
      )
    ).rows;
    return { xacts: Number(db.xacts), inserted: Number(db.inserted), outbox: Number(outbox.n) };
  } finally {
    await client.end();
  }
}

/** A session and `n` actions, started then completed, as the engine records them (at once, or one by one). */
async function recordActions(graph: ContextGraph, tag: string, n: number, oneByOne: boolean): Promise<void> {
  const sessionIds = Array.from({ length: GRAPH_SESSIONS }, (_, k) => `ses_bench_${tag}_${process.pid}_${k}`);
  for (const id of sessionIds) {
    await graph.recordSession({ id, tenant: 'bench', createdAt: new Date().toISOString(), metadata: {} });
  }
  const risk = { score: 5, level: 'low' as const, reasons: [] };
  /** Each action's two writes, in order (as the engine makes them: the start is durable before the run). */
  const actions: Array<() => Promise<void>> = [];
  for (let i = 0; i < n; i++) {
    const sessionId = sessionIds[i % GRAPH_SESSIONS];
    const start: ActionStart = {
      id: `${sessionId}-a${i}`,
      sessionId,
      type: 'code',
      operation: 'python',
      input: { type: 'code', language: 'python', code: `print(${i})` },
      inputSummary: `print(${i})`,
      inputHash: i.toString(16).padStart(64, '0'),
      startedAt: new Date().toISOString(),
      tier: 'pooled',
      risk,
    };
    const done: ActionCompletion = {
      status: 'succeeded',
      endedAt: new Date().toISOString(),
      durationMs: 60,
      tier: 'pooled',
      risk,
      exitCode: 0,
      outputExcerpt: `${i}\n`,
      files: [],
      result: {
        id: start.id,
        sessionId,
        type: 'code',
        status: 'succeeded',
        exitCode: 0,
        stdout: `${i}\n`,
        stderr: '',
        truncated: { stdout: false, stderr: false },
        durationMs: 60,
        startedAt: start.startedAt,
        tier: 'pooled',
        risk,
      },
    };
    actions.push(async () => {
      await graph.recordActionStarted(start);
      await graph.recordActionCompleted(start.id, done);
    });
  }
  if (oneByOne) for (const run of actions) await run();
  else await Promise.all(actions.map((run) => run()));
}

/** 4. How fast the outbox reaches Neo4j, against writing to Neo4j directly. */
async function outboxApplyRate(
  databaseUrl: string,
  neo4j: { uri: string; username: string; password: string },
) {
  const n = GRAPH_ACTIONS;
  const records = GRAPH_SESSIONS + 2 * n;
  const direct = new Neo4jContextGraph({ ...neo4j, connectTimeoutMs: 10_000 });
  const outboxed = createContextGraph({
    store: 'postgres-outbox',
    databaseUrl,
    neo4j: { ...neo4j, connectTimeoutMs: 10_000 },
  });
  try {
    await direct.init();
    await outboxed.init();
    const raw = await timed(() => recordActions(direct, 'raw', n, true));
    let acknowledged = 0;
    const total = await timed(async () => {
      acknowledged = await timed(() => recordActions(outboxed, 'outbox', n, false));
      await outboxed.lastActionSeq(`ses_bench_outbox_${process.pid}_0`); // waits until every record is in Neo4j
    });
    const rate = (t: number) => `${((records / t) * 1000).toFixed(0)} records/s`;
    console.log(
      `  graph outbox (${records} records): acknowledged at ${rate(acknowledged)}, in Neo4j at ${rate(total)}; ` +
        `straight to Neo4j one by one ${rate(raw)} (outbox / raw: ${(total / raw).toFixed(2)}x the time)`,
    );
  } finally {
    await outboxed.close();
    await direct.close();
  }
}

export async function benchReplicas(options: { runs?: number } = {}): Promise<void> {
  const runs = options.runs ?? 40;
  console.log(
    `replicas (SWITCHYARD_STATE=postgres; ${CLIENTS} clients, ${SECONDS} s per configuration; action ` +
      `${ACTION.language} \`${ACTION.code}\`)`,
  );
  const kubeconfig = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const nodes = await kc.makeApiClient(k8s.CoreV1Api).listNode();
  const node = nodes.body.items[0]?.metadata?.name;
  if (!node) throw new Error('bench: the cluster has no node');
  const pgInstance = `bench-${process.pid}`;
  const neoInstance = `bench-replicas-${process.pid}`;
  const databaseUrl = execFileSync('bash', [path.join(REPO, 'scripts/postgres.sh'), 'start', pgInstance], {
    encoding: 'utf8',
  })
    .trim()
    .split('\n')
    .at(-1) as string;
  const engines: Engine[] = [];
  try {
    await neo4jScript('start', neoInstance);
    const neo = neo4jTestServer(neoInstance);
    const common = {
      SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
      KUBECONFIG: kubeconfig,
      SWITCHYARD_K8S_NAMESPACE: process.env.SWITCHYARD_K8S_NAMESPACE ?? 'switchyard-test',
      // Its own spec hash: no warm pod is traded with tests or other benches in the namespace.
      SWITCHYARD_K8S_NODE_SELECTOR: `kubernetes.io/hostname=${node}`,
      SWITCHYARD_POOL_MIN: '2',
      SWITCHYARD_GRAPH: 'neo4j',
      NEO4J_URI: neo.uri,
      NEO4J_USERNAME: neo.username,
      NEO4J_PASSWORD: neo.password,
    };
    const replicaEnv = { ...common, SWITCHYARD_STATE: 'postgres', DATABASE_URL: databaseUrl };
    const [r1, r2, lite] = await Promise.all([
      Engine.start('replica-1', replicaEnv),
      Engine.start('replica-2', replicaEnv),
      Engine.start('sqlite', common),
    ]);
    engines.push(r1, r2, lite);

    // 1. Throughput, and 3. writes per action (single replica); the engine memory a session holds.
    const rssBefore = r1.rssKiB();
    const onOne: string[] = [];
    for (let c = 0; c < CLIENTS; c++) onOne.push(await r1.session());
    for (const sid of onOne) await r1.print1(sid);
    console.log(
      `  engine memory per session (RSS, ${CLIENTS} sessions with a pod each): ` +
        `${((r1.rssKiB() - rssBefore) / CLIENTS).toFixed(0)} KiB`,
    );
    const spread: string[] = [];
    for (let c = 0; c < CLIENTS; c++) spread.push(await (c % 2 === 0 ? r1 : r2).session());
    for (const [c, sid] of spread.entries()) await (c % 2 === 0 ? r1 : r2).print1(sid);
    // The three configurations in ROUNDS slices of SECONDS each, interleaved with the order rotating, so the
    // machine's other work hits them alike. Postgres writes and CPU are counted over the single replica's slices.
    type Run = { perSecond: number; latencies: number[] };
    const runs3: Record<'one' | 'owners' | 'alternating', Run> = {
      one: { perSecond: 0, latencies: [] },
      owners: { perSecond: 0, latencies: [] },
      alternating: { perSecond: 0, latencies: [] },
    };
    const configs: Array<[keyof typeof runs3, (c: number, i: number) => Engine, string[]]> = [
      ['one', () => r1, onOne],
      ['owners', (c) => (c % 2 === 0 ? r1 : r2), spread],
      ['alternating', (c, i) => ((c + i) % 2 === 0 ? r1 : r2), spread],
    ];
    const slice = SECONDS / ROUNDS;
    const counted = { xacts: 0, inserted: 0, outbox: 0, cpu: 0, busy: 0, total: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < configs.length; k++) {
        const [name, via, sessions] = configs[(round + k) % configs.length];
        if (name !== 'one') {
          runs3[name].latencies.push(...(await load(sessions, via, slice)).latencies);
          continue;
        }
        const before = await pgStats(databaseUrl);
        const cpuBefore = r1.cpuMs();
        const machineBefore = machineCpuMs();
        runs3.one.latencies.push(...(await load(sessions, via, slice)).latencies);
        counted.cpu += r1.cpuMs() - cpuBefore;
        const machineAfter = machineCpuMs();
        counted.busy += machineAfter.busy - machineBefore.busy;
        counted.total += machineAfter.total - machineBefore.total;
        await sleep(1000); // backends report their statistics when they go idle
        const after = await pgStats(databaseUrl);
        counted.xacts += after.xacts - before.xacts;
        counted.inserted += after.inserted - before.inserted;
        counted.outbox += after.outbox - before.outbox;
      }
    }
    for (const r of Object.values(runs3)) r.perSecond = r.latencies.length / SECONDS;
    const { one, owners, alternating } = runs3;
    const cpuPerAction = counted.cpu / one.latencies.length;
    const machinePerAction = counted.busy / one.latencies.length;
    const machineBusy = counted.busy / counted.total;
    show('one replica', one);
    show('two replicas, clients on the owner', owners);
    show('two replicas, clients alternating (half forwarded)', alternating);
    console.log(
      `  two replicas / one: ${(owners.perSecond / one.perSecond).toFixed(2)}x (on the owner), ` +
        `${(alternating.perSecond / one.perSecond).toFixed(2)}x (alternating); this machine has ${os.cpus().length} cores`,
    );
    const actions = one.latencies.length;
    console.log(
      `  per action (one replica, ${actions} actions): ${(counted.xacts / actions).toFixed(1)} Postgres ` +
        `transactions, ${(counted.inserted / actions).toFixed(1)} rows inserted, ` +
        `${(counted.outbox / actions).toFixed(1)} graph outbox entries (Neo4j writes); ` +
        `engine CPU ${cpuPerAction.toFixed(1)} ms`,
    );
    // The engine is the bottleneck when its CPU per action is what bounds one replica (one core at most: its event
    // loop), not the machine's: then a second replica has spare cores to use.
    console.log(
      `  the machine during one replica's run: ${(machineBusy * 100).toFixed(0)} % busy over ${os.cpus().length} ` +
        `cores, ${machinePerAction.toFixed(1)} ms of CPU per action in all (engine ${cpuPerAction.toFixed(1)} ms, ` +
        `${((cpuPerAction / machinePerAction) * 100).toFixed(0)} %); one engine's loop alone would allow ` +
        `${(1000 / cpuPerAction).toFixed(0)} actions/s, the machine's cores ` +
        `${((1000 * os.cpus().length) / machinePerAction).toFixed(0)} actions/s`,
    );

    // 2. What Postgres adds, interleaved.
    const sidPg = await r2.session();
    const sidLite = await lite.session();
    const samples = {
      pgGet: [] as number[],
      liteGet: [] as number[],
      pgRun: [] as number[],
      liteRun: [] as number[],
    };
    for (let i = 0; i < 3; i++) {
      await r2.print1(sidPg);
      await lite.print1(sidLite);
    }
    for (let i = 0; i < runs * 3; i++) {
      const order = i % 2 === 0;
      for (const first of order ? [true, false] : [false, true]) {
        if (first) {
          samples.pgGet.push(await timed(() => r2.call('GET', `/v1/sessions/${sidPg}`)));
          samples.pgRun.push(await timed(() => r2.print1(sidPg)));
        } else {
          samples.liteGet.push(await timed(() => lite.call('GET', `/v1/sessions/${sidLite}`)));
          samples.liteRun.push(await timed(() => lite.print1(sidLite)));
        }
      }
    }
    const row = (label: string, pgXs: number[], liteXs: number[]) =>
      console.log(
        `  ${label.padEnd(28)} Postgres p50 ${ms(median(pgXs))} p99 ${ms(pct(pgXs, 99))}   SQLite p50 ` +
          `${ms(median(liteXs))} p99 ${ms(pct(liteXs, 99))}   added p50 ${ms(median(pgXs) - median(liteXs))} ` +
          `p99 ${ms(pct(pgXs, 99) - pct(liteXs, 99))}   (${pgXs.length} runs each)`,
      );
    row('GET /v1/sessions/:id', samples.pgGet, samples.liteGet);
    row(`${ACTION.language} ${ACTION.code} (pooled)`, samples.pgRun, samples.liteRun);

    await Promise.all(engines.splice(0).map((e) => e.stop()));
    await outboxApplyRate(databaseUrl, neo);
  } finally {
    await Promise.all(engines.map((e) => e.stop()));
    await neo4jScript('clean', neoInstance).catch(() => undefined);
    try {
      execFileSync('bash', [path.join(REPO, 'scripts/postgres.sh'), 'clean', pgInstance], {
        stdio: 'ignore',
      });
    } catch {
      /* already gone */
    }
  }
  console.log('');
}

if (require.main === module) {
  benchReplicas().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
