/**
 * The replicas' graph against a real Neo4j (`bash scripts/neo4j.sh start`) and a real PostgreSQL
 * (`bash scripts/postgres.sh start`), in a database of this file's own: the shared contract, then what replicas
 * need (several instances on one outbox, a writer cut off from Neo4j, a writer that dies, entries applied twice).
 * Fails, never skips, when either service is not running.
 */
import { Test } from '@nestjs/testing';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Client } from 'pg';
import { ContextGraphClosedError, GraphStoreConnectionError } from '../context-graph.errors';
import { ContextGraphModule } from '../context-graph.module';
import { ContextGraph } from '../context-graph.port';
import type { ActionCompletion, ActionStart, ApprovalRequest, SessionRecord } from '../context-graph.types';
import { Neo4jContextGraph, type Neo4jContextGraphOptions } from '../neo4j/neo4j-context-graph';
import {
  type ContextGraphFixture,
  describeContextGraphContract,
  holdTestNeo4j,
  neo4jTestServer,
  wipeNeo4j,
} from '../testing';
import { encodeArgs } from './outbox-args-codec';
import { OUTBOX_LOCKS, PostgresOutbox } from './postgres-outbox';
import { PostgresOutboxGraph, type PostgresOutboxGraphOptions } from './postgres-outbox-graph';
import { dropDatabase, freshDatabase, postgresTestUrl } from './postgres.testing';

jest.setTimeout(60_000);

const server = neo4jTestServer();
const neo4jOptions: Neo4jContextGraphOptions = {
  uri: server.uri,
  username: server.username,
  password: server.password,
  connectTimeoutMs: 5000,
  maxTransactionRetryTimeMs: 500,
};
const testNeo4j = holdTestNeo4j(server);

const postgresServer = postgresTestUrl();
let databaseUrl: string;
let admin: Client;
beforeAll(async () => {
  databaseUrl = await freshDatabase(postgresServer);
  admin = new Client({ connectionString: databaseUrl });
  await admin.connect();
});
afterAll(async () => {
  await admin?.end();
  if (databaseUrl) await dropDatabase(postgresServer, databaseUrl);
});

type Overrides = Partial<Omit<PostgresOutboxGraphOptions, 'databaseUrl'>>;

interface OutboxFixture extends ContextGraphFixture {
  graph: PostgresOutboxGraph;
  /** Another instance ("replica") on the same Postgres database and Neo4j. */
  open(overrides?: Overrides): Promise<PostgresOutboxGraph>;
}

async function outboxFixture(): Promise<OutboxFixture> {
  await wipeNeo4j(testNeo4j.admin());
  await admin.query('DROP TABLE IF EXISTS graph_outbox');
  const opened: ContextGraph[] = [];
  const open = async (overrides: Overrides = {}): Promise<PostgresOutboxGraph> => {
    const graph = new PostgresOutboxGraph({
      databaseUrl,
      neo4j: new Neo4jContextGraph(neo4jOptions),
      readTimeoutMs: 10_000,
      ...overrides,
      forwarder: { initialBackoffMs: 20, maxBackoffMs: 200, ...overrides.forwarder },
    });
    opened.push(graph);
    await graph.init();
    return graph;
  };
  const graph = await open();
  return {
    graph,
    open,
    reopen: () => open(),
    teardown: async () => {
      await Promise.all(opened.map((g) => g.close()));
    },
  };
}

describeContextGraphContract('Postgres outbox → Neo4j', outboxFixture, { deferredChecks: true });

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const at = (s: number): string => new Date(T0 + s * 1000).toISOString();
const session = (id: string): SessionRecord => ({
  id,
  tenant: 'acme',
  createdAt: at(0),
  metadata: { zeta: 1, agent: id, alpha: [1, { b: 2, a: 1 }] },
});
const start = (id: string, sessionId: string, overrides: Partial<ActionStart> = {}): ActionStart => ({
  id,
  sessionId,
  type: 'code',
  operation: 'python',
  input: { code: `print(${JSON.stringify(id)})`, env: { B: '2', A: '1' } },
  inputSummary: `run ${id}`,
  inputHash: 'ab'.repeat(32),
  startedAt: at(1),
  tier: 'pooled',
  risk: { score: 30, level: 'medium', reasons: ['subprocess'] },
  ...overrides,
});
const completion = (a: ActionStart, overrides: Partial<ActionCompletion> = {}): ActionCompletion => ({
  status: 'succeeded',
  endedAt: at(2),
  durationMs: 12.5,
  tier: a.tier,
  risk: a.risk,
  exitCode: 0,
  outputExcerpt: 'ok\u0000 binary \ud83d',
  files: [],
  result: {
    id: a.id,
    sessionId: a.sessionId,
    type: a.type,
    status: overrides.status ?? 'succeeded',
    truncated: { stdout: false, stderr: false },
    durationMs: 12.5,
    startedAt: a.startedAt,
    tier: a.tier,
    risk: a.risk,
  },
  ...overrides,
});
const approval: ApprovalRequest = {
  rule: '{"match":{"type":"code"},"effect":"ask"}',
  layer: 'tenant',
  reasons: ['network'],
  requestedAt: at(1),
  expiresAt: at(901),
};

/**
 * Every kind of write: sessions, starts (retries, calls, approvals), decisions, completions with files, sandbox,
 * kernel and process, plans (two snapshots), checkpoints, restores, a deletion, a fork, an end; one action left
 * running and one awaiting approval. Returns the sessions.
 */
async function history(graph: ContextGraph): Promise<string[]> {
  for (const id of ['s1', 's2']) await graph.recordSession(session(id));
  for (const sid of ['s1', 's2']) {
    const a1 = start(`${sid}-a1`, sid);
    await graph.recordActionStarted(a1);
    await graph.recordCheckpoint({
      id: `chk_${sid}`,
      sessionId: sid,
      createdAt: at(1),
      files: 4,
      directories: 2,
      bytes: 3 * 2 ** 32,
      auto: true,
      seq: 0,
      beforeActionId: a1.id,
    });
    await graph.recordActionCompleted(
      a1.id,
      completion(a1, {
        status: 'failed',
        exitCode: 1,
        error: { class: 'limit', message: 'oom', code: 'OUT_OF_MEMORY' },
        files: [
          { path: 'src/a.py', access: 'write' },
          { path: 'data.csv', access: 'read' },
        ],
        sandbox: { tier: 'pooled', containerId: `${sid}`.padEnd(64, 'c') },
        kernel: { id: `krn_${sid}`, language: 'python', tier: 'pooled', executionCount: 1, started: true },
      }),
    );
    const a2 = start(`${sid}-a2`, sid, { retryOf: a1.id, retryReason: 'oom', startedAt: at(3), approval });
    await graph.recordActionStarted(a2);
    await graph.recordApprovalDecision(a2.id, {
      decision: 'approved',
      decidedAt: at(3),
      decidedBy: 'admin:1',
    });
    await graph.recordRestore({
      sessionId: sid,
      checkpointId: `chk_${sid}`,
      restoredAt: at(3),
      actionId: a2.id,
    });
    const a3 = start(`${sid}-a3`, sid, {
      startedAt: at(4),
      calledBy: { actionId: a2.id, depth: 1 },
      approval,
    });
    await graph.recordActionStarted(a3);
    await graph.recordApprovalDecision(a3.id, {
      decision: 'rejected',
      decidedAt: at(4),
      decidedBy: 'admin:2',
    });
    await graph.recordActionCompleted(
      a3.id,
      completion(a3, { status: 'denied', error: { class: 'policy', message: 'rejected' } }),
    );
    await graph.recordActionCompleted(
      a2.id,
      completion(a2, {
        files: [{ path: 'src/a.py', access: 'read' }],
        kernel: { id: `krn_${sid}`, language: 'python', tier: 'pooled', executionCount: 2, started: false },
        startedProcess: { id: `prc_${sid}`, command: 'npm run dev', tier: 'pooled', startedAt: at(4.5) },
      }),
    );
    await graph.recordActionStarted(start(`${sid}-a4`, sid, { startedAt: at(5) })); // left running
    await graph.recordActionStarted(start(`${sid}-a5`, sid, { startedAt: at(6), approval })); // left waiting
    const steps = [
      { stepId: 'x', version: 1, status: 'failed', allowFailure: false, dependsOn: [], attempts: [a1.id] },
      { stepId: 'y', version: 1, status: 'pending', allowFailure: true, dependsOn: ['x'], attempts: [] },
    ];
    const plan = {
      id: `${sid}-plan`,
      sessionId: sid,
      status: 'needs_replan',
      maxParallel: 2,
      createdAt: at(0),
    };
    await graph.recordPlan({ ...plan, goal: 'g', steps });
    await graph.recordPlan({
      ...plan,
      status: 'succeeded',
      endedAt: at(7),
      steps: [...steps, { ...steps[0], version: 2, status: 'succeeded', attempts: [a2.id], replaces: 1 }],
    });
    await graph.recordCheckpoint({
      id: `chk_${sid}_manual`,
      sessionId: sid,
      label: 'after the plan',
      createdAt: at(7),
      files: 5,
      directories: 2,
      bytes: 10,
      auto: false,
      seq: 5,
    });
    await graph.recordRestore({
      sessionId: sid,
      checkpointId: `chk_${sid}_manual`,
      restoredAt: at(8),
      planId: plan.id,
    });
    await graph.recordCheckpointDeleted(sid, `chk_${sid}_manual`, at(9), 'deleted');
  }
  await graph.recordSession({ ...session('s3'), createdAt: at(10) });
  await graph.recordFork({
    sessionId: 's3',
    fromSessionId: 's1',
    checkpointId: 'chk_s1',
    forkedAt: at(10),
    seq: 0,
  });
  const f1 = start('s3-a1', 's3', { startedAt: at(11) });
  await graph.recordActionStarted(f1);
  await graph.recordActionCompleted(
    f1.id,
    completion(f1, { files: [{ path: 'src/a.py', access: 'write' }] }),
  );
  await graph.endSession('s2', at(60), 'expired');
  return ['s1', 's2', 's3'];
}

/** Every answer the graph gives about the sessions. */
async function answers(graph: ContextGraph, sessions: string[]): Promise<unknown[]> {
  const out: unknown[] = [[...(await graph.sessionActivity([...sessions, 'nope']))]];
  for (const sid of sessions) {
    const actions = (await graph.listActions(sid, { limit: 100 })).items;
    out.push(await graph.sessionGraph(sid), actions, await graph.lastActionSeq(sid));
    out.push(await graph.sessionGraph(sid, { status: ['running', 'awaiting_approval'] }));
    for (const a of actions) {
      out.push(await graph.getAction(sid, a.id), await graph.failureContext(sid, a.id, { before: 5 }));
    }
    for (const path of ['src/a.py', 'data.csv']) out.push(await graph.fileLineage(sid, path));
    out.push(await graph.getCheckpoint(sid, `chk_${sid}`));
  }
  return out;
}

async function neo4jCounts(): Promise<{ nodes: number; edges: number }> {
  const result = await testNeo4j
    .admin()
    .executeQuery('MATCH (n) WITH count(n) AS nodes MATCH ()-[r]->() RETURN nodes, count(r) AS edges');
  return result.records[0].toObject() as { nodes: number; edges: number };
}

async function outboxSize(): Promise<number> {
  return Number((await admin.query<{ n: string }>('SELECT count(*) AS n FROM graph_outbox')).rows[0].n);
}

async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not so within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Holds the apply lock as a replica would, so nothing is applied until released. */
async function holdApplyLock(): Promise<() => Promise<void>> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT pg_advisory_xact_lock($1, $2)', [OUTBOX_LOCKS.namespace, OUTBOX_LOCKS.apply]);
  return async () => {
    await client.query('COMMIT');
    await client.end();
  };
}

/** A TCP relay to Neo4j that the test can cut, as a network partition between one replica and Neo4j. */
async function neo4jRelay(): Promise<{ uri: string; cut(): void; close(): Promise<void> }> {
  const target = new URL(server.uri.replace(/^[a-z+]+:/, 'http:'));
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const relay: Server = createServer((inbound) => {
    const outbound = connect(Number(target.port), target.hostname);
    track(inbound);
    track(outbound);
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const { port } = relay.address() as { port: number };
  const cut = (): void => {
    relay.close();
    for (const s of sockets) s.destroy();
  };
  return {
    uri: `bolt://127.0.0.1:${port}`,
    cut,
    close: async () => {
      cut();
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
  };
}

describe('PostgresOutboxGraph with replicas', () => {
  let f: OutboxFixture;
  beforeEach(async () => {
    f = await outboxFixture();
  });
  afterEach(() => f.teardown());

  it('two replicas writing one session in turns read back the same answers, each seeing the other’s writes', async () => {
    const [a, b] = [f.graph, await f.open()];
    await a.recordSession(session('s'));
    const ids: string[] = [];
    for (let i = 1; i <= 12; i++) {
      const [writer, other] = i % 2 === 0 ? [a, b] : [b, a];
      const act = start(`a${i}`, 's', { startedAt: at(i), ...(i > 1 && { retryOf: `a${i - 1}` }) });
      await writer.recordActionStarted(act);
      // Read-your-writes across replicas: the other one sees the start at once, without waiting or draining.
      expect(await other.getAction('s', act.id)).toMatchObject({ seq: i, status: 'running' });
      await other.recordActionCompleted(
        act.id,
        completion(act, { endedAt: at(i + 0.5), files: [{ path: `f${i % 3}`, access: 'write' }] }),
      );
      expect((await writer.getAction('s', act.id))?.status).toBe('succeeded');
      ids.push(act.id);
    }
    await b.endSession('s', at(99), 'deleted');
    expect(await answers(a, ['s'])).toEqual(await answers(b, ['s']));
    expect((await a.listActions('s', { limit: 100 })).items.map((x) => [x.id, x.seq])).toEqual(
      ids.map((id, i) => [id, i + 1]),
    );
    expect((await b.sessionGraph('s')).nodes[0].properties).toMatchObject({ endedAt: at(99) });
  });

  it('two replicas starting actions of one session at once give gapless seqs, and agree', async () => {
    const [a, b] = [f.graph, await f.open()];
    await a.recordSession(session('s'));
    const starts = Array.from({ length: 60 }, (_, i) => start(`x${i}`, 's'));
    await Promise.all(
      starts.map((x, i) =>
        (i % 2 ? a : b)
          .recordActionStarted(x)
          .then(() => (i % 3 ? b : a).recordActionCompleted(x.id, completion(x))),
      ),
    );
    const listed = (await b.listActions('s', { limit: 100 })).items;
    expect(listed.map((x) => x.seq)).toEqual(starts.map((_, i) => i + 1));
    expect(listed.every((x) => x.status === 'succeeded')).toBe(true);
    expect(await a.sessionGraph('s')).toEqual(await b.sessionGraph('s'));
    expect(await outboxSize()).toBe(0);
  });

  it('applies a batch of many sessions at once, each in its order, with a fork after what it names', async () => {
    const [a, b] = [f.graph, await f.open()];
    const sessions = Array.from({ length: 12 }, (_, i) => `m${i}`);
    const release = await holdApplyLock(); // everything below waits, then goes in one batch
    try {
      for (const sid of sessions) await a.recordSession(session(sid));
      for (let i = 0; i < 6; i++) {
        for (const [n, sid] of sessions.entries()) {
          const act = start(`${sid}-a${i}`, sid, {
            startedAt: at(i + 1),
            ...(i > 0 && { retryOf: `${sid}-a${i - 1}` }),
          });
          await (n % 2 ? a : b).recordActionStarted(act);
          await (n % 2 ? b : a).recordActionCompleted(act.id, completion(act, { endedAt: at(i + 1.5) }));
        }
      }
      await a.recordCheckpoint({
        id: 'chk_m0',
        sessionId: 'm0',
        createdAt: at(8),
        files: 1,
        directories: 0,
        bytes: 1,
        auto: false,
        seq: 6,
      });
      await b.recordSession({ ...session('forked'), createdAt: at(9) });
      await b.recordFork({
        sessionId: 'forked',
        fromSessionId: 'm0',
        checkpointId: 'chk_m0',
        forkedAt: at(9),
        seq: 6,
      });
      const after = start('forked-a0', 'forked', { startedAt: at(10) });
      await a.recordActionStarted(after);
      expect(await outboxSize()).toBeGreaterThan(12 * 13);
    } finally {
      await release();
    }
    for (const sid of sessions) {
      const listed = (await b.listActions(sid, { limit: 100 })).items;
      expect(listed.map((x) => [x.id, x.seq, x.status])).toEqual(
        Array.from({ length: 6 }, (_, i) => [`${sid}-a${i}`, i + 1, 'succeeded']),
      );
    }
    const forked = await a.sessionGraph('forked');
    expect(forked.edges.map((e) => e.type)).toEqual(expect.arrayContaining(['FORKED_FROM']));
    expect((await a.getAction('forked', 'forked-a0'))?.status).toBe('running');
    expect(await outboxSize()).toBe(0);
  });

  it('a writer cut off from Neo4j keeps accepting writes, and another replica forwards them', async () => {
    const relay = await neo4jRelay();
    try {
      const forwarder = f.graph; // reaches Neo4j directly
      const writer = await f.open({ neo4j: new Neo4jContextGraph({ ...neo4jOptions, uri: relay.uri }) });
      relay.cut();
      const began = Date.now();
      const sessions = await history(writer);
      // ~40 writes, none waiting on Neo4j (one failed attempt alone waits up to maxTransactionRetryTimeMs).
      expect(Date.now() - began).toBeLessThan(5000);
      await eventually(async () => (await outboxSize()) === 0);
      expect((await writer.health()).status).toBe('degraded');
      const reference = await f.open(); // a third replica, for answers nobody here forwarded
      expect(await answers(forwarder, sessions)).toEqual(await answers(reference, sessions));
      expect((await forwarder.getAction('s1', 's1-a2'))?.approval).toMatchObject({ decision: 'approved' });
      expect((await forwarder.getAction('s1', 's1-a4'))?.status).toBe('running');
    } finally {
      await relay.close();
    }
  });

  it('a read fails with GraphStoreConnectionError when no replica can bring Neo4j up to date in time', async () => {
    await f.graph.close(); // the fixture's replica would forward
    const relay = await neo4jRelay();
    try {
      const cutOff = await f.open({
        neo4j: new Neo4jContextGraph({ ...neo4jOptions, uri: relay.uri }),
        readTimeoutMs: 500,
      });
      relay.cut();
      await cutOff.recordSession(session('s'));
      await expect(cutOff.sessionGraph('s')).rejects.toBeInstanceOf(GraphStoreConnectionError);
      expect(await cutOff.health()).toMatchObject({ store: 'neo4j', status: 'degraded', backlog: 1 });
    } finally {
      await relay.close();
    }
  });

  it('wakes on a notification: an entry left by a replica that died at once is applied by another', async () => {
    await f.graph.close();
    const survivor = await f.open({ forwarder: { pollIntervalMs: 600_000 } }); // only the notification can wake it
    const dead = new PostgresOutbox({ databaseUrl }); // what a replica does before forwarding, then nothing
    try {
      await dead.append('late', 'recordSession', encodeArgs([session('late')]));
    } finally {
      await dead.close();
    }
    await eventually(async () => (await outboxSize()) === 0, 5000);
    const direct = new Neo4jContextGraph(neo4jOptions);
    await direct.init();
    try {
      expect((await direct.sessionGraph('late')).nodes).toHaveLength(1);
    } finally {
      await direct.close();
    }
    expect((await survivor.sessionGraph('late')).nodes[0].properties).toMatchObject({ tenant: 'acme' });
  });

  it('keeps what an instance closed without draining wrote, and another instance forwards it', async () => {
    await f.graph.close();
    const release = await holdApplyLock(); // as if another replica were applying: the writer cannot forward
    const writer = await f.open({ drainOnCloseMs: 0 });
    let sessions: string[];
    try {
      sessions = await history(writer);
      const waiting = await outboxSize();
      expect(waiting).toBeGreaterThan(30);
      expect(await writer.health()).toMatchObject({ status: 'ok', backlog: waiting });
      const closing = Date.now();
      await writer.close();
      expect(Date.now() - closing).toBeLessThan(1500); // did not wait to drain
      await expect(writer.getAction('s1', 's1-a1')).rejects.toBeInstanceOf(ContextGraphClosedError);
      expect(await outboxSize()).toBe(waiting);
    } finally {
      await release();
    }
    const next = await f.open();
    await eventually(async () => (await outboxSize()) === 0); // forwarded on its own, before any read
    const again = await f.open();
    expect(await answers(next, sessions)).toEqual(await answers(again, sessions));
    expect((await next.getAction('s2', 's2-a3'))?.status).toBe('denied');
    expect((await next.sessionActivity(['s1'])).get('s1')?.byStatus).toEqual({
      failed: 1,
      succeeded: 1,
      denied: 1,
      running: 1,
      awaiting_approval: 1,
    });
  });

  it('converges when entries are applied again, whole or from any point (a crash between applying and deleting)', async () => {
    const graph = f.graph;
    const release = await holdApplyLock();
    let sessions: string[];
    try {
      sessions = await history(graph);
      await admin.query('DROP TABLE IF EXISTS saved_outbox');
      await admin.query('CREATE TABLE saved_outbox AS SELECT * FROM graph_outbox');
    } finally {
      await release();
    }
    expect(await graph.drain(10_000)).toBe(true);
    const expected = await answers(graph, sessions);
    const counts = await neo4jCounts();
    const saved = (
      await admin.query<{ id: string; session_id: string | null; op: string; args: unknown }>(
        'SELECT id, session_id, op, args FROM saved_outbox ORDER BY id',
      )
    ).rows;
    expect(new Set(saved.map((e) => e.op)).size).toBe(10); // every kind of write
    // Each suffix of the log applied again, after everything it led to: starts after their completions,
    // decisions after their actions ended, older plan snapshots after newer ones, and so on.
    for (const from of [0, 7, Math.floor(saved.length / 2), saved.length - 3]) {
      const release2 = await holdApplyLock();
      try {
        for (const e of saved.slice(from)) {
          await admin.query('INSERT INTO graph_outbox (session_id, op, args) VALUES ($1, $2, $3::jsonb)', [
            e.session_id,
            e.op,
            JSON.stringify(e.args),
          ]);
        }
      } finally {
        await release2();
      }
      expect(await graph.drain(10_000)).toBe(true);
      expect(await answers(graph, sessions)).toEqual(expected);
      expect(await neo4jCounts()).toEqual(counts);
    }
    expect((await graph.getAction('s1', 's1-a1'))?.status).toBe('failed');
    expect((await graph.getAction('s1', 's1-a3'))?.status).toBe('denied');
    await admin.query('DROP TABLE saved_outbox');
  });

  it('keeps every argument exactly through jsonb: key order, undefined, NUL and lone surrogates', async () => {
    const s: SessionRecord = { ...session('s'), metadata: { zeta: { y: 1, x: [2, 1] }, alpha: 'a' } };
    await f.graph.recordSession(s);
    const a = start('a', 's', { input: { z: 1, a: undefined, m: 'x\u0000y' } });
    await f.graph.recordActionStarted(a);
    const c = completion(a);
    await f.graph.recordActionCompleted(a.id, c);
    expect((await f.graph.sessionGraph('s')).nodes[0].properties.metadata).toBe(JSON.stringify(s.metadata));
    const direct = new Neo4jContextGraph(neo4jOptions);
    await direct.init();
    try {
      // What reached Neo4j through the outbox is what a direct write stores.
      await direct.recordSession({ ...s, id: 'd' });
      await direct.recordActionStarted({ ...a, id: 'da', sessionId: 'd' });
      await direct.recordActionCompleted('da', completion({ ...a, id: 'da', sessionId: 'd' }));
      const viaOutbox = await f.graph.getAction('s', 'a');
      const written = await direct.getAction('d', 'da');
      expect({
        ...viaOutbox,
        id: 'da',
        sessionId: 'd',
        result: { ...viaOutbox?.result, id: 'da', sessionId: 'd' },
      }).toStrictEqual(written);
    } finally {
      await direct.close();
    }
  });

  it('markRunningInterrupted applies the outbox first, and counts what it marked in the sessions asked', async () => {
    const b = await f.open();
    await f.graph.recordSession(session('s1'));
    await b.recordSession(session('s2'));
    await f.graph.recordActionStarted(start('a1', 's1'));
    await b.recordActionStarted(start('a2', 's2'));
    await b.recordActionStarted(start('a3', 's1', { approval }));
    expect(await b.markRunningInterrupted(at(100), ['s1'])).toBe(2);
    expect((await f.graph.getAction('s2', 'a2'))?.status).toBe('running');
    expect(await f.graph.markRunningInterrupted(at(101))).toBe(1);
  });
});

describe('ContextGraphModule with store: postgres-outbox', () => {
  /** Connections this store opened (its pool's and its listener's) still on the test database. */
  const graphConnections = async (): Promise<number> =>
    Number(
      (
        await admin.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity
           WHERE datname = current_database() AND application_name LIKE 'switchyard-graph%'`,
        )
      ).rows[0].n,
    );

  it('provides the graph, initialised, and closes it (pool and driver) on shutdown', async () => {
    await wipeNeo4j(testNeo4j.admin());
    await admin.query('DROP TABLE IF EXISTS graph_outbox');
    const moduleRef = await Test.createTestingModule({
      imports: [ContextGraphModule.forRoot({ store: 'postgres-outbox', databaseUrl, neo4j: neo4jOptions })],
    }).compile();
    const app = await moduleRef.init();
    const graph = app.get(ContextGraph);
    expect(graph).toBeInstanceOf(PostgresOutboxGraph);
    await graph.recordSession(session('m'));
    expect((await graph.sessionGraph('m')).nodes).toHaveLength(1);
    expect(await graph.health()).toEqual({ store: 'neo4j', status: 'ok', backlog: 0 });
    await app.close();
    await expect(graph.health()).rejects.toBeInstanceOf(ContextGraphClosedError);
    await eventually(async () => (await graphConnections()) === 0, 5000);
  });

  it('fails start-up naming the setting, and leaves nothing open', async () => {
    const compiled = Test.createTestingModule({
      imports: [
        ContextGraphModule.forRoot({
          store: 'postgres-outbox',
          databaseUrl,
          neo4j: { ...neo4jOptions, password: 'wrong-password' },
        }),
      ],
    }).compile();
    await expect(compiled).rejects.toMatchObject({ setting: 'credentials' });
    await eventually(async () => (await graphConnections()) === 0, 5000);
  });
});
