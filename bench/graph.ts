/**
 * Context graph stores, measured on a real engine and a real Neo4j 5.26 (its own `bench-<pid>` instance of
 * `scripts/neo4j.sh`, started and removed here). Called by `run.ts` (`npm run bench`), or alone with
 * `npx ts-node -r tsconfig-paths/register bench/graph.ts`.
 *
 * 1. Record overhead per action: the API's median for the same action with each store against the engine
 *    recording to a no-op store, as a ratio. Stores: embedded (SQLite), neo4j (what SWITCHYARD_GRAPH=neo4j
 *    runs: SQLite plus outbox, copied to Neo4j in the background) and, for comparison, the Neo4j adapter
 *    written to directly (no outbox). Samples are interleaved so drift hits every store alike.
 * 2. Failure-context query at 100k recorded actions: p50/p99 on each store (target p99 <= 20 ms). The actions
 *    are seeded through the port in concurrent batches (10 sessions, files, retry chains), then copied to
 *    Neo4j by the outbox forwarder, which also gives the backlog drain rate.
 */
import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import {
  type ActionCompletion,
  type ActionRecord,
  type ActionStart,
  ContextGraph,
  type FailureContext,
  type FileLineage,
  type GraphHealth,
  type GraphView,
  Neo4jContextGraph,
  OutboxForwarder,
  type Page,
  type SessionActivity,
  SqliteContextGraph,
} from '@switchyard/context-graph';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import neo4j from 'neo4j-driver';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';
import {
  neo4jScript,
  neo4jTestServer,
  type Neo4jTestServer,
} from '../libs/context-graph/src/neo4j/neo4j.testing';
import { median, ms, pct } from './stats';

export interface GraphBenchOptions {
  /** Samples per median of the overhead section. Default `BENCH_RUNS` or 40. */
  runs?: number;
  /** Actions seeded for the query section. Default `BENCH_GRAPH_ACTIONS` or 100000. */
  actions?: number;
  /** Failure-context queries timed per store. Default `BENCH_GRAPH_QUERIES` or 1000. */
  queries?: number;
}

/** Records nothing and answers empty: the baseline an engine pays without a graph. Bench only. */
class NoopContextGraph extends ContextGraph {
  override async init(): Promise<void> {}
  override async recordSession(): Promise<void> {}
  override async recordActionStarted(): Promise<void> {}
  override async recordActionCompleted(): Promise<void> {}
  override async recordPlan(): Promise<void> {}
  override async recordCheckpoint(): Promise<void> {}
  override async recordCheckpointDeleted(): Promise<void> {}
  override async recordRestore(): Promise<void> {}
  override async recordFork(): Promise<void> {}
  override async recordApprovalDecision(): Promise<void> {}
  override async lastActionSeq(): Promise<number> {
    return 0;
  }
  override async getCheckpoint(): Promise<undefined> {
    return undefined;
  }
  override async getAction(): Promise<ActionRecord | undefined> {
    return undefined;
  }
  override async listActions(): Promise<Page<ActionRecord>> {
    return { items: [] };
  }
  override async sessionGraph(): Promise<GraphView> {
    return { nodes: [], edges: [] };
  }
  override async failureContext(): Promise<FailureContext | undefined> {
    return undefined;
  }
  override async fileLineage(_sessionId: string, path: string): Promise<FileLineage> {
    return { path, entries: [] };
  }
  override async sessionActivity(): Promise<Map<string, SessionActivity>> {
    return new Map();
  }
  override async health(): Promise<GraphHealth> {
    return { store: 'embedded', status: 'ok', backlog: 0 };
  }
  override async markRunningInterrupted(): Promise<number> {
    return 0;
  }
  override async endSession(): Promise<void> {}
  override async close(): Promise<void> {}
}

/** A small deterministic PRNG, so every run queries the same actions. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Engine {
  name: string;
  app: INestApplication;
  post(url: string, body?: unknown): Promise<any>;
  session: string;
}

async function startEngine(name: string, env: Record<string, string>, graph?: ContextGraph): Promise<Engine> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `switchyard-bench-graph-`));
  const app = await createEngineApp(
    loadEngineConfig({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_LOG_LEVEL: 'error', ...env }),
    { graph },
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const post = async (url: string, body?: unknown): Promise<any> =>
    (
      await fetch(`${base}${url}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    ).json();
  const session = ((await post('/v1/sessions')) as { id: string }).id;
  const close = app.close.bind(app);
  app.close = async () => {
    await close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { name, app, post, session };
}

async function timeAction(
  engine: Engine,
  body: Record<string, unknown>,
  check: (r: any) => boolean,
): Promise<number> {
  const t0 = performance.now();
  const r = await engine.post(`/v1/sessions/${engine.session}/actions`, body);
  const elapsed = performance.now() - t0;
  if (!check(r)) throw new Error(`${engine.name}: action did not succeed: ${JSON.stringify(r)}`);
  return elapsed;
}

async function recordOverhead(server: Neo4jTestServer, runs: number): Promise<void> {
  const neo4jEnv = {
    SWITCHYARD_GRAPH: 'neo4j',
    NEO4J_URI: server.uri,
    NEO4J_USERNAME: server.username,
    NEO4J_PASSWORD: server.password,
  };
  const engines = [
    await startEngine('no-op store', {}, new NoopContextGraph()),
    await startEngine('embedded (SQLite)', {}),
    await startEngine('neo4j (SQLite outbox → Neo4j)', neo4jEnv),
    await startEngine(
      'Neo4j adapter direct (no outbox)',
      {},
      new Neo4jContextGraph({ uri: server.uri, username: server.username, password: server.password }),
    ),
  ];
  try {
    const actions: [string, Record<string, unknown>, (r: any) => boolean, number][] = [
      [
        'file write',
        { type: 'file', op: 'write', path: 'a.txt', content: 'hello' },
        (r) => r.status === 'succeeded',
        runs * 5,
      ],
      [
        'python print(1)',
        { type: 'code', language: 'python', code: 'print(1)' },
        (r) => r.status === 'succeeded' && r.stdout === '1\n',
        runs,
      ],
    ];
    for (const [label, body, check, n] of actions) {
      const samples = new Map(engines.map((e) => [e.name, [] as number[]]));
      for (let i = 0; i < 5; i++) for (const e of engines) await timeAction(e, body, check); // warm-up
      for (let i = 0; i < n; i++) {
        // The order rotates, so no store always runs right after the same other one.
        for (let k = 0; k < engines.length; k++) {
          const e = engines[(i + k) % engines.length];
          samples.get(e.name)!.push(await timeAction(e, body, check));
        }
      }
      const base = median(samples.get(engines[0].name)!);
      console.log(`  record overhead, ${label} through the API (${n} interleaved samples per store)`);
      for (const e of engines) {
        const xs = samples.get(e.name)!;
        const ratio = median(xs) / base;
        console.log(
          `    ${e.name.padEnd(34)} median ${ms(median(xs)).padStart(9)}  p99 ${ms(pct(xs, 99)).padStart(9)}  ` +
            `${ratio.toFixed(2)}x no-op`,
        );
      }
    }
  } finally {
    for (const e of engines) await e.app.close();
  }
}

const T0 = Date.parse('2025-01-01T00:00:00.000Z');

/**
 * N actions in sessions of 10 000: each writes one of 50 files and reads another, every fifth fails, and every
 * tenth retries the one before it. Seeded through the port, 1000 starts then their 1000 completions at a time.
 */
export async function seedActions(
  graph: ContextGraph,
  total: number,
): Promise<{ sessionId: string; id: string }[]> {
  const perSession = 10_000;
  const ids: { sessionId: string; id: string }[] = [];
  for (let s = 0; s * perSession < total; s++) {
    const sessionId = `bench-s${s}`;
    await graph.recordSession({
      id: sessionId,
      tenant: 'bench',
      createdAt: new Date(T0).toISOString(),
      metadata: {},
    });
    for (let from = 0; from < Math.min(perSession, total - s * perSession); from += 1000) {
      const batch: ActionStart[] = [];
      for (let i = from; i < Math.min(from + 1000, perSession, total - s * perSession); i++) {
        const startedAt = new Date(T0 + i * 1000).toISOString();
        batch.push({
          id: `${sessionId}-a${i}`,
          sessionId,
          type: 'code',
          operation: 'python',
          input: { type: 'code', language: 'python', code: `run(${i})` },
          inputSummary: `run(${i})`,
          inputHash: i.toString(16).padStart(64, '0'),
          startedAt,
          tier: 'subprocess',
          risk: { score: 5, level: 'low', reasons: [] },
          ...(i % 10 === 9 && { retryOf: `${sessionId}-a${i - 1}` }),
        });
      }
      // A retry's original is recorded before it: the group commit applies a batch in the order it was asked.
      await Promise.all(batch.map((a) => graph.recordActionStarted(a)));
      await Promise.all(
        batch.map((a) => {
          const i = Number(a.id.slice(a.id.lastIndexOf('a') + 1));
          const failed = i % 5 === 0;
          const completion: ActionCompletion = {
            status: failed ? 'failed' : 'succeeded',
            endedAt: new Date(T0 + i * 1000 + 500).toISOString(),
            durationMs: 500,
            tier: 'subprocess',
            risk: a.risk,
            exitCode: failed ? 1 : 0,
            outputExcerpt: failed ? 'Traceback (most recent call last): …' : 'ok\n',
            files: [
              { path: `src/f${i % 50}.py`, access: 'write' },
              { path: `src/f${(i * 7 + 3) % 50}.py`, access: 'read' },
            ],
            result: {
              id: a.id,
              sessionId: a.sessionId,
              type: 'code',
              status: failed ? 'failed' : 'succeeded',
              exitCode: failed ? 1 : 0,
              stdout: 'ok\n',
              stderr: '',
              truncated: { stdout: false, stderr: false },
              durationMs: 500,
              startedAt: a.startedAt,
              tier: 'subprocess',
              risk: a.risk,
            },
          };
          return graph.recordActionCompleted(a.id, completion);
        }),
      );
      ids.push(...batch.map((a) => ({ sessionId, id: a.id })));
    }
  }
  return ids;
}

async function failureContextAt(server: Neo4jTestServer, total: number, queries: number): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-graph-'));
  const local = new SqliteContextGraph({ sqlitePath: path.join(dir, 'graph.db'), outbox: true });
  const remote = new Neo4jContextGraph({
    uri: server.uri,
    username: server.username,
    password: server.password,
  });
  try {
    await Promise.all([local.init(), remote.init()]);
    let t0 = performance.now();
    const ids = await seedActions(local, total);
    const seedSeconds = (performance.now() - t0) / 1000;
    console.log(
      `  seeded ${ids.length} actions (embedded, through the port): ${seedSeconds.toFixed(1)} s, ` +
        `${((ids.length * 2) / seedSeconds).toFixed(0)} records/s`,
    );

    const backlog = local.outboxSize();
    t0 = performance.now();
    const forwarder = new OutboxForwarder(local, remote, { batchEntries: 2000 });
    forwarder.start();
    if (!(await forwarder.drain(30 * 60_000)))
      throw new Error(`outbox not drained: ${JSON.stringify(forwarder.state())}`);
    await forwarder.close();
    const drainSeconds = (performance.now() - t0) / 1000;
    console.log(
      `  copied to Neo4j by the outbox forwarder: ${backlog} entries in ${drainSeconds.toFixed(1)} s ` +
        `(${(backlog / drainSeconds).toFixed(0)} entries/s)`,
    );

    const random = prng(42);
    const picks = Array.from({ length: queries + 100 }, () => ids[Math.floor(random() * ids.length)]);
    const samples = { embedded: [] as number[], neo4j: [] as number[], 'neo4j floor': [] as number[] };
    // The floor: one managed read transaction that does nothing (`RETURN 1`), what any Neo4j query pays.
    const driver = neo4j.driver(server.uri, neo4j.auth.basic(server.username, server.password));
    const floor = async (): Promise<number> => {
      const start = performance.now();
      const session = driver.session({ database: 'neo4j' });
      await session.executeRead((tx) => tx.run('RETURN 1'));
      await session.close();
      return performance.now() - start;
    };
    const stores = [
      ['embedded', local],
      ['neo4j', remote],
    ] as const;
    // Same answer on both stores, checked on the first pick (the tests check it thoroughly).
    const first = picks[0];
    const [a, b] = await Promise.all(
      stores.map(([, g]) => g.failureContext(first.sessionId, first.id, { before: 10 })),
    );
    if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error('the stores answered differently');
    for (const [i, pick] of picks.entries()) {
      for (const [name, graph] of stores) {
        const start = performance.now();
        const ctx = await graph.failureContext(pick.sessionId, pick.id, { before: 10 });
        const elapsed = performance.now() - start;
        if (!ctx) throw new Error(`no context for ${pick.id} on ${name}`);
        if (i >= 100) samples[name].push(elapsed); // the first 100 warm caches and the JIT
      }
      const nothing = await floor();
      if (i >= 100) samples['neo4j floor'].push(nothing);
    }
    await driver.close();
    console.log(
      `  failure context (before: 10) at ${ids.length} actions, ${queries} random actions per store`,
    );
    for (const [name, xs] of Object.entries(samples)) {
      const p99 = pct(xs, 99);
      const verdict = name.endsWith('floor')
        ? '(RETURN 1 in a managed read transaction)'
        : `(target p99 <= 20 ms) ${p99 <= 20 ? 'OK' : 'MISSED'}`;
      console.log(
        `    ${name.padEnd(12)} p50 ${ms(median(xs)).padStart(9)}  p99 ${ms(p99).padStart(9)}  ${verdict}`,
      );
    }
    console.log(
      `  load average during the run: ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(', ')}`,
    );
  } finally {
    await Promise.allSettled([local.close(), remote.close()]);
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchGraph(options: GraphBenchOptions = {}): Promise<void> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 40);
  const total = options.actions ?? Number(process.env.BENCH_GRAPH_ACTIONS ?? 100_000);
  const queries = options.queries ?? Number(process.env.BENCH_GRAPH_QUERIES ?? 1000);
  console.log('context graph (embedded SQLite and Neo4j 5.26)');
  // Its own instance, with room for the seeded graph in the page cache.
  process.env.SWITCHYARD_NEO4J_HEAP ??= '1g';
  process.env.SWITCHYARD_NEO4J_PAGECACHE_MIB ??= '512';
  // One instance per bench process, so two benches on one machine do not stop each other's Neo4j.
  const instance = `bench-${process.pid}`;
  const t0 = performance.now();
  try {
    await neo4jScript('start', instance);
    console.log(`  Neo4j started in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const server = neo4jTestServer(instance);
    await recordOverhead(server, runs);
    await failureContextAt(server, total, queries);
  } finally {
    await neo4jScript('clean', instance);
  }
  console.log('');
}

// `node dist/bench/graph.js` runs this section alone.
if (require.main === module) {
  benchGraph().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
