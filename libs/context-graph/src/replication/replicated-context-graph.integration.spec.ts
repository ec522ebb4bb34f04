/**
 * The engine's Neo4j configuration against a real Neo4j (`bash scripts/neo4j.sh start`): the local outbox
 * copied to Neo4j must pass the same contract, leave Neo4j equal to the local file, replay idempotently, and
 * answer every query the same from both stores. Fails, never skips, when no test Neo4j is running.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ActionCompletion, ActionStart, GraphView } from '../context-graph.types';
import { SqliteContextGraph } from '../embedded/sqlite-context-graph';
import { Neo4jContextGraph, type Neo4jContextGraphOptions } from '../neo4j/neo4j-context-graph';
import {
  type ContextGraphFixture,
  describeContextGraphContract,
  holdTestNeo4j,
  neo4jTestServer,
  wipeNeo4j,
} from '../testing';
import { ReplicatedContextGraph } from './replicated-context-graph';
import { Test } from '@nestjs/testing';
import { ContextGraphClosedError } from '../context-graph.errors';
import { ContextGraphModule } from '../context-graph.module';
import { ContextGraph } from '../context-graph.port';

jest.setTimeout(30_000);

const server = neo4jTestServer();
const neo4jOptions: Neo4jContextGraphOptions = {
  uri: server.uri,
  username: server.username,
  password: server.password,
  connectTimeoutMs: 5000,
  maxTransactionRetryTimeMs: 2000,
};

const testNeo4j = holdTestNeo4j(server);

interface ReplicatedFixture extends ContextGraphFixture {
  graph: ReplicatedContextGraph;
  dir: string;
  /** A second, independent view of each store, for comparisons. */
  local: SqliteContextGraph;
  remote: Neo4jContextGraph;
}

async function replicatedFixture(): Promise<ReplicatedFixture> {
  await wipeNeo4j(testNeo4j.admin());
  const dir = mkdtempSync(join(tmpdir(), 'replicated-graph-'));
  const sqlitePath = join(dir, 'graph.db');
  const opened: ContextGraph[] = [];
  const open = async (): Promise<ReplicatedContextGraph> => {
    const graph = new ReplicatedContextGraph({
      local: new SqliteContextGraph({ sqlitePath, outbox: true }),
      remote: new Neo4jContextGraph(neo4jOptions),
      forwarder: { initialBackoffMs: 20, maxBackoffMs: 200 },
    });
    opened.push(graph);
    await graph.init();
    return graph;
  };
  const graph = await open();
  // Readers on the same stores: SQLite allows a second connection; a second driver for Neo4j.
  const local = new SqliteContextGraph({ sqlitePath, outbox: true });
  const remote = new Neo4jContextGraph(neo4jOptions);
  await Promise.all([local.init(), remote.init()]);
  opened.push(local, remote);
  return {
    graph,
    dir,
    local,
    remote,
    reopen: open,
    teardown: async () => {
      await Promise.all(opened.map((g) => g.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeContextGraphContract('replicated (SQLite outbox → Neo4j)', replicatedFixture);

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const at = (s: number): string => new Date(T0 + s * 1000).toISOString();
const start = (id: string, sessionId: string, overrides: Partial<ActionStart> = {}): ActionStart => ({
  id,
  sessionId,
  type: 'code',
  operation: 'python',
  input: { code: `print(${JSON.stringify(id)})` },
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
  outputExcerpt: 'ok',
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

describe('ReplicatedContextGraph on Neo4j', () => {
  let f: ReplicatedFixture;
  beforeEach(async () => {
    f = await replicatedFixture();
  });
  afterEach(() => f.teardown());

  /**
   * Two sessions with every kind of node and edge: files, retries, sandboxes, kernels (two cells of one),
   * processes, checkpoints (one taken before a1 and restored by its retry a2, a deleted one restored by a plan),
   * plans, an ended session; and a third session forked from s1 at a checkpoint.
   */
  async function history(graph: ContextGraph): Promise<string[]> {
    const sessions = ['s1', 's2'];
    for (const id of sessions) {
      await graph.recordSession({ id, tenant: 'acme', createdAt: at(0), metadata: { agent: id, n: [1, 2] } });
    }
    const sandbox = { tier: 'pooled' as const, containerId: 'c'.repeat(64) };
    for (const sid of sessions) {
      const kernel = { id: `krn_${sid}`, language: 'python' as const, tier: 'pooled' as const };
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
          sandbox: sid === 's1' ? sandbox : { tier: 'container', containerId: 'd'.repeat(64) },
          kernel: { ...kernel, executionCount: 1, started: true },
        }),
      );
      const a2 = start(`${sid}-a2`, sid, { retryOf: a1.id, startedAt: at(3) });
      await graph.recordActionStarted(a2);
      await graph.recordRestore({
        sessionId: sid,
        checkpointId: `chk_${sid}`,
        restoredAt: at(3),
        actionId: a2.id,
      });
      await graph.recordActionCompleted(
        a2.id,
        completion(a2, {
          files: [{ path: 'src/a.py', access: 'read' }],
          sandbox: sid === 's1' ? sandbox : undefined,
          kernel: { ...kernel, executionCount: 2, started: false },
        }),
      );
      const a4 = start(`${sid}-a4`, sid, { type: 'process', operation: 'start', startedAt: at(4) });
      await graph.recordActionStarted(a4);
      await graph.recordActionCompleted(
        a4.id,
        completion(a4, {
          startedProcess: {
            id: `prc_${sid}`,
            ...(sid === 's1' && { name: 'web' }),
            command: 'npm run dev',
            tier: 'pooled',
            startedAt: at(4.5),
          },
        }),
      );
      await graph.recordActionStarted(
        start(`${sid}-a3`, sid, { type: 'file', operation: 'read', tier: 'engine' }),
      );
      // A plan whose step x failed (a1), replanned: x v2 (a2) replaces it, y depends on x.
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
        endedAt: at(5),
        steps: [...steps, { ...steps[0], version: 2, status: 'succeeded', attempts: [a2.id], replaces: 1 }],
      });
      await graph.recordCheckpoint({
        id: `chk_${sid}_manual`,
        sessionId: sid,
        label: 'after the plan',
        createdAt: at(5),
        files: 5,
        directories: 2,
        bytes: 10,
        auto: false,
        seq: 4,
      });
      await graph.recordRestore({
        sessionId: sid,
        checkpointId: `chk_${sid}_manual`,
        restoredAt: at(6),
        planId: plan.id,
      });
      await graph.recordCheckpointDeleted(sid, `chk_${sid}_manual`, at(7), 'deleted');
    }
    // s3 begins as s1 at chk_s1 (before any action): its lineage of src/a.py starts with none of s1's.
    await graph.recordSession({ id: 's3', tenant: 'acme', createdAt: at(8), metadata: {} });
    await graph.recordFork({
      sessionId: 's3',
      fromSessionId: 's1',
      checkpointId: 'chk_s1',
      forkedAt: at(8),
      seq: 0,
    });
    for (const [i, path] of ['src/a.py', 'data.csv'].entries()) {
      const a = start(`s3-a${i + 1}`, 's3', { startedAt: at(9 + i) });
      await graph.recordActionStarted(a);
      await graph.recordActionCompleted(a.id, completion(a, { files: [{ path, access: 'write' }] }));
    }
    await graph.endSession('s2', at(60), 'expired');
    return [...sessions, 's3'];
  }

  /** Nodes and edges across views, each once (a fork's Session node and edge show in both sessions' views). */
  const distinct = (views: GraphView[]) => ({
    nodes: new Set(views.flatMap((v) => v.nodes.map((n) => n.id))).size,
    edges: new Set(views.flatMap((v) => v.edges.map((e) => JSON.stringify(e)))).size,
  });

  it('leaves Neo4j holding exactly the local graph: every node, edge and property', async () => {
    const sessions = await history(f.graph);
    expect(await f.graph.drain(10_000)).toBe(true);
    for (const sid of sessions) {
      const local = await f.local.sessionGraph(sid);
      expect(local.nodes.length).toBeGreaterThan(5);
      expect(await f.remote.sessionGraph(sid)).toEqual(local);
    }
    // Nothing else reached Neo4j: no placeholder nodes, no duplicate edges.
    const counts = await testNeo4j
      .admin()
      .executeQuery('MATCH (n) WITH count(n) AS nodes MATCH ()-[r]->() RETURN nodes, count(r) AS edges');
    const views = await Promise.all(sessions.map((s) => f.local.sessionGraph(s)));
    expect(counts.records[0].toObject()).toEqual(distinct(views));
    // Checkpoints, restores and forks reached Neo4j.
    const labels = views.flatMap((v) => [...v.nodes.map((n) => n.label), ...v.edges.map((e) => e.type)]);
    expect(labels).toEqual(
      expect.arrayContaining(['Checkpoint', 'HAS_CHECKPOINT', 'BEFORE', 'RESTORED', 'FORKED_FROM']),
    );
    expect((await f.remote.getAction('s1', 's1-a1'))?.checkpoint).toStrictEqual({
      id: 'chk_s1',
      createdAt: at(1),
      auto: true,
    });
    expect(
      (await f.remote.sessionGraph('s1')).nodes.find((n) => n.id === 'checkpoint:chk_s1_manual')?.properties,
    ).toMatchObject({ label: 'after the plan', deletedAt: at(7), deleteReason: 'deleted' });
  });

  it('answers every query the same from both stores', async () => {
    const sessions = await history(f.graph);
    expect(await f.graph.drain(10_000)).toBe(true);
    for (const sid of sessions) {
      for (const filter of [
        undefined,
        { types: ['code' as const] },
        { types: ['process' as const] },
        { status: ['failed' as const] },
        { limit: 1 },
      ]) {
        expect(await f.remote.sessionGraph(sid, filter)).toEqual(await f.local.sessionGraph(sid, filter));
      }
      expect(await f.remote.listActions(sid, { limit: 2 })).toEqual(
        await f.local.listActions(sid, { limit: 2 }),
      );
      expect(await f.remote.fileLineage(sid, 'src/a.py')).toStrictEqual(
        await f.local.fileLineage(sid, 'src/a.py'),
      );
      for (const id of ['a1', 'a2', 'a3', 'a4'].map((a) => `${sid}-${a}`)) {
        expect(await f.remote.getAction(sid, id)).toEqual(await f.local.getAction(sid, id));
        expect(await f.remote.failureContext(sid, id, { before: 5 })).toStrictEqual(
          await f.local.failureContext(sid, id, { before: 5 }),
        );
      }
      for (const path of ['src/a.py', 'data.csv', 'nope']) {
        expect(await f.remote.fileLineage(sid, path)).toStrictEqual(await f.local.fileLineage(sid, path));
      }
    }
    const ids = [...sessions, 'no-such-session'];
    expect([...(await f.remote.sessionActivity(ids))]).toStrictEqual([
      ...(await f.local.sessionActivity(ids)),
    ]);
    expect([...(await f.remote.sessionActivity(ids))].map(([id, a]) => [id, a.actions])).toEqual([
      ['s1', 4],
      ['s2', 4],
      ['s3', 2],
    ]);
    expect((await f.remote.failureContext('s1', 's1-a2', { before: 5 }))?.checkpoint).toStrictEqual({
      id: 'chk_s1',
      createdAt: at(1),
      auto: true,
    });
    expect((await f.remote.fileLineage('s3', 'src/a.py')).entries.map((e) => [e.sessionId, e.id])).toEqual([
      ['s3', 's3-a1'],
    ]);
  });

  it('replays idempotently, and a stale copy never undoes a newer one', async () => {
    await f.graph.recordSession({ id: 's', tenant: 't', createdAt: at(0), metadata: {} });
    const a = start('a', 's');
    await f.graph.recordActionStarted(a);
    expect(await f.graph.drain(10_000)).toBe(true);
    const runningCopy = { sessions: [], actions: [(await f.local.getAction('s', 'a'))!] };

    await f.graph.recordActionCompleted(
      a.id,
      completion(a, {
        files: [{ path: 'x', access: 'write' }],
        kernel: { id: 'krn_1', language: 'node', tier: 'pooled', executionCount: 1, started: true },
      }),
    );
    const p = start('p', 's', { type: 'process', operation: 'start', startedAt: at(3) });
    await f.graph.recordActionStarted(p);
    await f.graph.recordActionCompleted(
      p.id,
      completion(p, {
        startedProcess: { id: 'prc_1', command: 'npm run dev', tier: 'pooled', startedAt: at(3) },
      }),
    );
    const chk = {
      id: 'chk_1',
      sessionId: 's',
      createdAt: at(3),
      files: 1,
      directories: 0,
      bytes: 1,
      auto: true,
      seq: 1,
      beforeActionId: 'p',
    };
    await f.graph.recordCheckpoint(chk);
    await f.graph.recordRestore({ sessionId: 's', checkpointId: 'chk_1', restoredAt: at(4), actionId: 'a' });
    await f.graph.recordRestore({ sessionId: 's', checkpointId: 'chk_1', restoredAt: at(5), planId: 'plan' });
    await f.graph.recordCheckpointDeleted('s', 'chk_1', at(6), 'pruned');
    await f.graph.recordSession({ id: 'fork', tenant: 't', createdAt: at(7), metadata: {} });
    await f.graph.recordFork({
      sessionId: 'fork',
      fromSessionId: 's',
      checkpointId: 'chk_1',
      forkedAt: at(7),
      seq: 1,
    });
    await f.graph.endSession('s', at(9), 'deleted');
    expect(await f.graph.drain(10_000)).toBe(true);
    const expected = await f.local.sessionGraph('s');
    expect(await f.remote.sessionGraph('s')).toEqual(expected);

    const latest = {
      sessions: [
        {
          id: 's',
          tenant: 't',
          createdAt: at(0),
          metadata: {},
          endedAt: at(9),
          endReason: 'deleted' as const,
        },
      ],
      actions: [(await f.local.getAction('s', 'a'))!, (await f.local.getAction('s', 'p'))!],
      checkpoints: [
        {
          ...chk,
          deletedAt: at(6),
          deleteReason: 'pruned' as const,
          restores: [
            { sessionId: 's', checkpointId: 'chk_1', restoredAt: at(4), actionId: 'a' },
            { sessionId: 's', checkpointId: 'chk_1', restoredAt: at(5), planId: 'plan' },
          ],
        },
      ],
      forks: [{ sessionId: 'fork', fromSessionId: 's', checkpointId: 'chk_1', forkedAt: at(7), seq: 1 }],
    };
    await f.remote.applyReplica(latest);
    await f.remote.applyReplica(latest);
    await f.remote.applyReplica(runningCopy);
    await f.remote.applyReplica({
      sessions: [{ id: 's', tenant: 't', createdAt: at(0), metadata: {} }],
      actions: [],
      // The checkpoint as first recorded: not deleted, never restored.
      checkpoints: [{ ...chk, restores: [] }],
    });
    expect(await f.remote.sessionGraph('s')).toEqual(expected);
    // Replays never duplicate a node or an edge: Neo4j holds exactly what the view shows.
    const counts = await testNeo4j
      .admin()
      .executeQuery('MATCH (n) WITH count(n) AS nodes MATCH ()-[r]->() RETURN nodes, count(r) AS edges');
    expect(counts.records[0].toObject()).toEqual({
      nodes: expected.nodes.length,
      edges: expected.edges.length,
    });
    expect(expected.nodes.map((n) => n.label)).toEqual(
      expect.arrayContaining(['Kernel', 'Process', 'Checkpoint', 'Session']),
    );
    expect(expected.edges.map((e) => e.type)).toEqual(
      expect.arrayContaining(['HAS_CHECKPOINT', 'BEFORE', 'RESTORED', 'FORKED_FROM']),
    );
  });

  it('copies approvals and calls; a stale copy never undoes a decision or moves an action back', async () => {
    const approval = {
      rule: '{"match":{"type":"code"},"effect":"ask"}',
      layer: 'plan',
      reasons: ['network'],
      requestedAt: at(2),
      expiresAt: at(902),
    };
    const copy = async (id: string) => (await f.local.getAction('s', id))!;
    await f.graph.recordSession({ id: 's', tenant: 't', createdAt: at(0), metadata: {} });
    const skill = start('a1', 's', { type: 'skill', operation: 'release' });
    await f.graph.recordActionStarted(skill);
    const tool = start('a2', 's', { startedAt: at(2), calledBy: { actionId: 'a1', depth: 1 }, approval });
    await f.graph.recordActionStarted(tool);
    expect(await f.graph.drain(10_000)).toBe(true);
    const awaiting = await copy('a2');
    await f.graph.recordApprovalDecision('a2', {
      decision: 'approved',
      decidedAt: at(3),
      decidedBy: 'admin:1',
      reason: 'ok',
    });
    expect(await f.graph.drain(10_000)).toBe(true);
    const approved = await copy('a2');
    const inner = start('a3', 's', { startedAt: at(4), calledBy: { actionId: 'a2', depth: 2 }, approval });
    await f.graph.recordActionStarted(inner);
    const undecided = await copy('a3');
    await f.graph.recordApprovalDecision('a3', {
      decision: 'rejected',
      decidedAt: at(5),
      decidedBy: 'admin:2',
    });
    await f.graph.recordActionCompleted(
      'a3',
      completion(inner, { status: 'denied', error: { class: 'policy', message: 'rejected' } }),
    );
    await f.graph.recordActionCompleted('a2', completion(tool, { status: 'failed', exitCode: 1 }));
    await f.graph.recordActionCompleted('a1', completion(skill));
    await f.graph.recordActionStarted(start('a4', 's', { startedAt: at(6), approval }));
    expect(await f.graph.drain(10_000)).toBe(true);

    const expected = await f.local.sessionGraph('s');
    expect(expected.nodes.filter((n) => n.label === 'Approval')).toHaveLength(3);
    expect(expected.edges.filter((e) => e.type === 'CALLED_BY')).toHaveLength(2);
    expect(await f.remote.sessionGraph('s')).toEqual(expected);
    for (const id of ['a1', 'a2', 'a3', 'a4']) {
      expect(await f.remote.getAction('s', id)).toStrictEqual(await f.local.getAction('s', id));
      expect(await f.remote.failureContext('s', id, { before: 5 })).toStrictEqual(
        await f.local.failureContext('s', id, { before: 5 }),
      );
    }
    for (const filter of [
      { status: ['awaiting_approval' as const] },
      { types: ['code' as const] },
      { limit: 2 },
    ]) {
      expect(await f.remote.sessionGraph('s', filter)).toEqual(await f.local.sessionGraph('s', filter));
    }
    expect([...(await f.remote.sessionActivity(['s']))]).toStrictEqual([
      ...(await f.local.sessionActivity(['s'])),
    ]);

    // Copies taken before the decisions and completions, replayed late: nothing moves back.
    await f.remote.applyReplica({ sessions: [], actions: [awaiting, undecided] });
    await f.remote.applyReplica({ sessions: [], actions: [approved] });
    expect(await f.remote.sessionGraph('s')).toEqual(expected);
    const counts = await testNeo4j
      .admin()
      .executeQuery('MATCH (n) WITH count(n) AS nodes MATCH ()-[r]->() RETURN nodes, count(r) AS edges');
    expect(counts.records[0].toObject()).toEqual({
      nodes: expected.nodes.length,
      edges: expected.edges.length,
    });
  });

  it('reads from Neo4j when it holds the whole session, from the local file otherwise', async () => {
    await f.graph.recordSession({ id: 's', tenant: 't', createdAt: at(0), metadata: {} });
    expect(await f.graph.drain(10_000)).toBe(true);
    const neo4jStatements = (f.graph as unknown as { remote: Neo4jContextGraph }).remote;
    let before = neo4jStatements.statementCount();
    await f.graph.sessionGraph('s');
    expect(neo4jStatements.statementCount() - before).toBe(1);

    // While Neo4j is reported failing, reads stay local and health says degraded with the backlog.
    f.graph.forwarder.reportFailure(new Error('simulated outage'));
    await f.graph.recordActionStarted(start('a', 's'));
    before = neo4jStatements.statementCount();
    expect((await f.graph.getAction('s', 'a'))?.status).toBe('running');
    expect((await f.graph.sessionActivity(['s'])).get('s')?.byStatus).toEqual({ running: 1 });
    expect(neo4jStatements.statementCount()).toBe(before);
    expect(await f.graph.health()).toMatchObject({ store: 'neo4j', status: 'degraded', backlog: 1 });

    // The forwarder checks again on its own, catches up, and reads go back to Neo4j.
    expect(await f.graph.drain(10_000)).toBe(true);
    expect(await f.graph.health()).toEqual({ store: 'neo4j', status: 'ok', backlog: 0 });
    before = neo4jStatements.statementCount();
    expect((await f.graph.getAction('s', 'a'))?.status).toBe('running');
    expect((await f.graph.sessionActivity(['s'])).get('s')?.byStatus).toEqual({ running: 1 });
    expect(neo4jStatements.statementCount() - before).toBe(2);
  });
});

describe('ContextGraphModule with store: neo4j', () => {
  const dir = mkdtempSync(join(tmpdir(), 'replicated-module-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('provides the replicated graph, initialised, and closes it on shutdown', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        ContextGraphModule.forRoot({
          store: 'neo4j',
          sqlitePath: join(dir, 'graph.db'),
          neo4j: neo4jOptions,
        }),
      ],
    }).compile();
    const app = await moduleRef.init();
    const graph = app.get(ContextGraph);
    expect(graph).toBeInstanceOf(ReplicatedContextGraph);
    expect(await graph.health()).toEqual({ store: 'neo4j', status: 'ok', backlog: 0 });
    await app.close();
    await expect(graph.health()).rejects.toBeInstanceOf(ContextGraphClosedError);
  });

  it('fails start-up naming the setting, and leaves nothing open', async () => {
    const compiled = Test.createTestingModule({
      imports: [
        ContextGraphModule.forRoot({
          store: 'neo4j',
          sqlitePath: join(dir, 'refused.db'),
          neo4j: { ...neo4jOptions, password: 'wrong-password' },
        }),
      ],
    }).compile();
    await expect(compiled).rejects.toMatchObject({ setting: 'credentials' });
    // The file was opened and closed again: another store can take it at once.
    const again = new SqliteContextGraph({ sqlitePath: join(dir, 'refused.db'), outbox: true });
    await again.init();
    await again.close();
  });
});
