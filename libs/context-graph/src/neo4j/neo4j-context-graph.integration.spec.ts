/**
 * The Neo4j adapter against a real Neo4j 5.26 (`bash scripts/neo4j.sh start`, which `npm test` runs): the
 * shared contract, then what only Neo4j has (schema, integer types, one statement per query, connection
 * failures named by setting). Fails, never skips, when no test Neo4j is running.
 */
import neo4j from 'neo4j-driver';
import { GraphStoreConnectionError } from '../context-graph.errors';
import type { ActionCompletion, ActionStart } from '../context-graph.types';
import {
  type ContextGraphFixture,
  describeContextGraphContract,
  holdTestNeo4j,
  neo4jTestServer,
  wipeNeo4j,
} from '../testing';
import { Neo4jContextGraph, type Neo4jContextGraphOptions } from './neo4j-context-graph';

// Neo4j answers in milliseconds, but the contract's concurrency test queues 200 transactions.
jest.setTimeout(30_000);

const server = neo4jTestServer();
const options: Neo4jContextGraphOptions = {
  uri: server.uri,
  username: server.username,
  password: server.password,
  connectTimeoutMs: 5000,
};

const testNeo4j = holdTestNeo4j(server);

async function neo4jFixture(): Promise<ContextGraphFixture & { graph: Neo4jContextGraph }> {
  await wipeNeo4j(testNeo4j.admin());
  const opened: Neo4jContextGraph[] = [];
  const open = async (): Promise<Neo4jContextGraph> => {
    const graph = new Neo4jContextGraph(options);
    opened.push(graph);
    await graph.init();
    return graph;
  };
  return {
    graph: await open(),
    reopen: open,
    teardown: async () => {
      await Promise.all(opened.map((g) => g.close()));
    },
  };
}

describeContextGraphContract('Neo4j', neo4jFixture);

describe('Neo4jContextGraph', () => {
  let fixture: Awaited<ReturnType<typeof neo4jFixture>>;
  let graph: Neo4jContextGraph;
  beforeEach(async () => {
    fixture = await neo4jFixture();
    graph = fixture.graph;
  });
  afterEach(() => fixture.teardown());

  const start = (id: string, sessionId: string, overrides: Partial<ActionStart> = {}): ActionStart => ({
    id,
    sessionId,
    type: 'code',
    operation: 'python',
    input: { code: 'print(1)' },
    inputSummary: 'print(1)',
    inputHash: '0'.repeat(64),
    startedAt: '2025-01-01T00:00:01.000Z',
    tier: 'subprocess',
    risk: { score: 10, level: 'low', reasons: [] },
    ...overrides,
  });

  const at = (s: number): string => new Date(Date.parse('2025-01-01T00:00:00.000Z') + s * 1000).toISOString();
  const completion = (id: string, overrides: Partial<ActionCompletion> = {}): ActionCompletion => ({
    status: 'succeeded',
    endedAt: at(2),
    durationMs: 1000,
    tier: 'subprocess',
    risk: { score: 10, level: 'low', reasons: [] },
    exitCode: 0,
    outputExcerpt: '',
    files: [],
    result: {
      id,
      sessionId: 's',
      type: 'code',
      status: 'succeeded',
      truncated: { stdout: false, stderr: false },
      durationMs: 1000,
      startedAt: at(1),
      tier: 'subprocess',
      risk: { score: 10, level: 'low', reasons: [] },
    },
    ...overrides,
  });

  async function seed(): Promise<void> {
    await graph.recordSession({ id: 's', tenant: 't', createdAt: '2025-01-01T00:00:00.000Z', metadata: {} });
    await graph.recordActionStarted(start('a1', 's'));
    await graph.recordActionCompleted('a1', {
      status: 'failed',
      endedAt: '2025-01-01T00:00:02.000Z',
      durationMs: 1000,
      tier: 'subprocess',
      risk: { score: 10, level: 'low', reasons: [] },
      exitCode: 1,
      outputExcerpt: 'boom',
      files: [{ path: 'a.txt', access: 'write' }],
      result: {
        id: 'a1',
        sessionId: 's',
        type: 'code',
        status: 'failed',
        truncated: { stdout: false, stderr: false },
        durationMs: 1000,
        startedAt: '2025-01-01T00:00:01.000Z',
        tier: 'subprocess',
        risk: { score: 10, level: 'low', reasons: [] },
      },
    });
    await graph.recordActionStarted(start('a2', 's', { retryOf: 'a1' }));
  }

  it('creates id constraints and the session/time indexes at start-up', async () => {
    const constraints = await testNeo4j
      .admin()
      .executeQuery('SHOW CONSTRAINTS YIELD name, labelsOrTypes, properties, type');
    expect(
      constraints.records.map((r) => [r.get('labelsOrTypes'), r.get('properties'), r.get('type')]),
    ).toEqual(
      expect.arrayContaining(
        ['Session', 'Action', 'File', 'Sandbox', 'Kernel', 'Process', 'Checkpoint', 'Plan', 'Step'].map(
          (label) => [[label], ['id'], 'UNIQUENESS'],
        ),
      ),
    );
    const indexes = await testNeo4j
      .admin()
      .executeQuery(
        "SHOW INDEXES YIELD labelsOrTypes, properties, state WHERE any(l IN labelsOrTypes WHERE l IN ['Action', 'Session', 'WROTE'])",
      );
    expect(indexes.records.map((r) => [r.get('labelsOrTypes'), r.get('properties'), r.get('state')])).toEqual(
      expect.arrayContaining([
        [['Action'], ['sessionId', 'seq'], 'ONLINE'],
        [['Action'], ['sessionId', 'startedAt'], 'ONLINE'],
        [['Action'], ['status'], 'ONLINE'],
        [['Session'], ['createdAt'], 'ONLINE'],
        [['WROTE'], ['fileId', 'seq'], 'ONLINE'],
      ]),
    );
  });

  it('starts when several stores create the schema at once (replicas starting together)', async () => {
    const admin = testNeo4j.admin();
    const names = async (what: 'CONSTRAINTS' | 'INDEXES') =>
      (
        await admin.executeQuery(
          what === 'CONSTRAINTS'
            ? 'SHOW CONSTRAINTS YIELD name'
            : "SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP'",
        )
      ).records.map((r) => r.get('name') as string);
    for (const name of await names('CONSTRAINTS')) await admin.executeQuery(`DROP CONSTRAINT \`${name}\``);
    for (const name of await names('INDEXES')) await admin.executeQuery(`DROP INDEX \`${name}\``);
    expect(await names('INDEXES')).toEqual([]);
    const stores = Array.from({ length: 8 }, () => new Neo4jContextGraph(options));
    try {
      await Promise.all(stores.map((g) => g.init()));
    } finally {
      await Promise.all(stores.map((g) => g.close()));
    }
    expect((await names('CONSTRAINTS')).length).toBeGreaterThanOrEqual(9);
    expect((await names('INDEXES')).length).toBeGreaterThan(9);
  });

  it('stores integers as Cypher integers and structured values as JSON text, for Cypher users', async () => {
    await seed();
    const { records } = await testNeo4j.admin().executeQuery(
      `MATCH (a:Action {id: 'a1'}) RETURN valueType(a.seq) AS seq, valueType(a.exitCode) AS exitCode,
         valueType(a.riskScore) AS riskScore, a.riskReasons AS reasons, a.result IS :: STRING AS resultIsText`,
    );
    expect(records[0].toObject()).toEqual({
      seq: 'INTEGER NOT NULL',
      exitCode: 'INTEGER NOT NULL',
      riskScore: 'INTEGER NOT NULL',
      reasons: [],
      resultIsText: true,
    });
    const edges = await testNeo4j
      .admin()
      .executeQuery('MATCH (:Action {id: $id})-[r]->(n) RETURN type(r) AS type, n.id AS to ORDER BY type', {
        id: 'a2',
      });
    expect(edges.records.map((r) => [r.get('type'), r.get('to')])).toEqual([['RETRY_OF', 'a1']]);
    // WROTE edges carry what the last-writer index needs.
    const wrote = await testNeo4j
      .admin()
      .executeQuery("MATCH (:Action {id: 'a1'})-[w:WROTE]->(f:File) RETURN w {.*} AS w");
    expect(wrote.records.map((r) => r.get('w') as unknown)).toEqual([{ fileId: 'file:s:a.txt', seq: 1 }]);
  });

  it('keeps kernels and processes as MERGEd nodes with the engine ids, RAN_IN counts as integers', async () => {
    await seed();
    const kernel = {
      id: 'krn_1',
      language: 'python' as const,
      tier: 'subprocess' as const,
      executionCount: 4,
      started: false,
    };
    const process = { id: 'prc_1', command: 'npm run dev', tier: 'subprocess' as const, startedAt: at(3) };
    const before = graph.statementCount();
    await graph.recordActionCompleted('a2', completion('a2', { kernel, startedProcess: process }));
    expect(graph.statementCount() - before).toBe(1);
    await graph.recordActionStarted(start('a3', 's'));
    await graph.recordActionCompleted('a3', completion('a3', { kernel: { ...kernel, executionCount: 5 } }));

    const { records } = await testNeo4j.admin().executeQuery(
      `MATCH (a:Action)-[r:RAN_IN]->(k:Kernel)
       RETURN a.id AS action, k {.*} AS kernel, valueType(r.executionCount) AS countType, r {.*} AS edge
       ORDER BY a.id`,
    );
    expect(records.map((r) => r.toObject())).toEqual(
      ['a2', 'a3'].map((action, i) => ({
        action,
        kernel: {
          id: 'kernel:krn_1',
          kernelId: 'krn_1',
          sessionId: 's',
          language: 'python',
          tier: 'subprocess',
        },
        countType: 'INTEGER NOT NULL',
        edge: { executionCount: 4 + i, started: false },
      })),
    );
    const started = await testNeo4j
      .admin()
      .executeQuery(
        'MATCH (a:Action)-[r:STARTED]->(p:Process) RETURN a.id AS action, p {.*} AS p, r {.*} AS r',
      );
    expect(started.records.map((r) => r.toObject())).toEqual([
      {
        action: 'a2',
        p: {
          id: 'process:prc_1',
          processId: 'prc_1',
          sessionId: 's',
          command: 'npm run dev',
          tier: 'subprocess',
          startedAt: at(3),
        },
        r: {},
      },
    ]);
  });

  it('keeps checkpoints with the engine id as checkpointId and counts as Cypher integers; one statement per write', async () => {
    await seed();
    await graph.recordSession({ id: 'f', tenant: 't', createdAt: at(5), metadata: {} });
    const statements = async (write: () => Promise<unknown>): Promise<number> => {
      const before = graph.statementCount();
      await write();
      return graph.statementCount() - before;
    };
    const checkpoint = {
      id: 'chk_1',
      sessionId: 's',
      createdAt: at(3),
      files: 2,
      directories: 1,
      bytes: 5_000_000_000,
      auto: true,
      seq: 1,
      beforeActionId: 'a2',
    };
    expect(await statements(() => graph.recordCheckpoint(checkpoint))).toBe(1);
    expect(
      await statements(() =>
        graph.recordRestore({ sessionId: 's', checkpointId: 'chk_1', restoredAt: at(4) }),
      ),
    ).toBe(1);
    expect(
      await statements(() =>
        graph.recordFork({
          sessionId: 'f',
          fromSessionId: 's',
          checkpointId: 'chk_1',
          forkedAt: at(5),
          seq: 1,
        }),
      ),
    ).toBe(1);
    expect(await statements(() => graph.recordCheckpointDeleted('s', 'chk_1', at(6), 'pruned'))).toBe(1);

    const { records } = await testNeo4j.admin().executeQuery(
      `MATCH (s:Session)-[:HAS_CHECKPOINT]->(c:Checkpoint)-[:BEFORE]->(a:Action)
       RETURN s.id AS session, a.id AS action, c {.*} AS c, valueType(c.bytes) AS bytesType, valueType(c.seq) AS seqType`,
    );
    expect(records.map((r) => r.toObject())).toEqual([
      {
        session: 's',
        action: 'a2',
        c: {
          id: 'checkpoint:chk_1',
          checkpointId: 'chk_1',
          sessionId: 's',
          createdAt: at(3),
          files: 2,
          directories: 1,
          bytes: 5_000_000_000,
          auto: true,
          seq: 1,
          deletedAt: at(6),
          deleteReason: 'pruned',
        },
        bytesType: 'INTEGER NOT NULL',
        seqType: 'INTEGER NOT NULL',
      },
    ]);
    const edges = await testNeo4j.admin().executeQuery(
      `MATCH (x)-[r:RESTORED|FORKED_FROM]->(y) RETURN type(r) AS type, x.id AS from, y.id AS to, r {.*} AS r,
         valueType(r.seq) AS seqType ORDER BY type`,
    );
    expect(edges.records.map((r) => r.toObject())).toEqual([
      {
        type: 'FORKED_FROM',
        from: 'f',
        to: 's',
        r: { forkedAt: at(5), seq: 1, checkpointId: 'chk_1' },
        seqType: 'INTEGER NOT NULL',
      },
      { type: 'RESTORED', from: 's', to: 'checkpoint:chk_1', r: { restoredAt: at(4) }, seqType: 'NULL' },
    ]);
  });

  it('keeps approvals as Approval nodes (reasons as JSON text), calls as CALLED_BY {depth} integers; one statement per write', async () => {
    await seed();
    const statements = async (write: () => Promise<unknown>): Promise<number> => {
      const before = graph.statementCount();
      await write();
      return graph.statementCount() - before;
    };
    const approval = {
      rule: '{"effect":"ask"}',
      layer: 'tenant',
      reasons: ['network', 'shell'],
      requestedAt: at(3),
      expiresAt: at(903),
    };
    const skill = start('a3', 's', { type: 'skill', operation: 'fix' });
    expect(await statements(() => graph.recordActionStarted(skill))).toBe(1);
    const called = start('a4', 's', { calledBy: { actionId: 'a3', depth: 1 }, approval });
    expect(await statements(() => graph.recordActionStarted(called))).toBe(1);
    expect(
      await statements(() => graph.recordApprovalDecision('a4', { decision: 'expired', decidedAt: at(903) })),
    ).toBe(1);
    expect(await statements(() => graph.failureContext('s', 'a3', { before: 10 }))).toBe(1);

    const { records } = await testNeo4j.admin().executeQuery(
      `MATCH (a:Action)-[h:HAS_APPROVAL]->(ap:Approval), (a)-[c:CALLED_BY]->(caller:Action)
       RETURN a.id AS action, a.status AS status, ap {.*} AS ap, h {.*} AS h, caller.id AS caller,
         c {.*} AS c, valueType(c.depth) AS depthType`,
    );
    expect(records.map((r) => r.toObject())).toEqual([
      {
        action: 'a4',
        status: 'awaiting_approval',
        ap: {
          id: 'approval:a4',
          actionId: 'a4',
          sessionId: 's',
          rule: '{"effect":"ask"}',
          layer: 'tenant',
          reasons: '["network","shell"]',
          requestedAt: at(3),
          expiresAt: at(903),
          decision: 'expired',
          decidedAt: at(903),
        },
        h: {},
        caller: 'a3',
        c: { depth: 1 },
        depthType: 'INTEGER NOT NULL',
      },
    ]);
    const constraints = await testNeo4j
      .admin()
      .executeQuery(
        "SHOW CONSTRAINTS YIELD labelsOrTypes, properties, type WHERE labelsOrTypes = ['Approval']",
      );
    expect(
      constraints.records.map((r) => [r.get('labelsOrTypes'), r.get('properties'), r.get('type')]),
    ).toEqual([[['Approval'], ['id'], 'UNIQUENESS']]);
  });

  it('answers every query with one statement (no N+1)', async () => {
    await seed();
    const statements = async (query: () => Promise<unknown>): Promise<number> => {
      const before = graph.statementCount();
      await query();
      return graph.statementCount() - before;
    };
    expect(await statements(() => graph.getAction('s', 'a1'))).toBe(1);
    expect(await statements(() => graph.listActions('s', { limit: 1 }))).toBe(1);
    expect(await statements(() => graph.sessionGraph('s'))).toBe(1);
    expect(await statements(() => graph.sessionGraph('s', { types: ['code'], limit: 1 }))).toBe(1);
    expect(await statements(() => graph.failureContext('s', 'a2', { before: 10 }))).toBe(1);
    expect(await statements(() => graph.fileLineage('s', 'a.txt'))).toBe(1);
    await graph.recordSession({ id: 'f', tenant: 't', createdAt: at(5), metadata: {} });
    await graph.recordFork({ sessionId: 'f', fromSessionId: 's', forkedAt: at(5), seq: 2 });
    expect(await statements(() => graph.fileLineage('f', 'a.txt'))).toBe(1);
    expect(await statements(() => graph.sessionGraph('f'))).toBe(1);
    expect(await statements(() => graph.sessionActivity(['s', 'f', 'no-such-session']))).toBe(1);
    expect(await statements(() => graph.sessionActivity([]))).toBe(0);
  });

  it('names the bad setting when it cannot be used: credentials, database, address', async () => {
    const attempts: [Neo4jContextGraphOptions, string, RegExp][] = [
      [{ ...options, password: 'not-the-password' }, 'credentials', /refused the login/],
      [{ ...options, username: 'nobody' }, 'credentials', /refused the login/],
      [{ ...options, database: 'nosuchdb' }, 'database', /no database "nosuchdb"/],
      [{ ...options, uri: 'bolt://127.0.0.1:1', connectTimeoutMs: 300 }, 'uri', /bolt:\/\/127\.0\.0\.1:1/],
      [{ ...options, uri: 'http://127.0.0.1:7687' }, 'uri', /invalid Neo4j URI/],
    ];
    for (const [bad, setting, message] of attempts) {
      const other = new Neo4jContextGraph(bad);
      const error = await other.init().then(
        () => undefined,
        (e: unknown) => e,
      );
      await other.close();
      expect(error).toBeInstanceOf(GraphStoreConnectionError);
      expect(error).toMatchObject({ setting, message: expect.stringMatching(message) });
    }
  });

  it('health turns degraded while Neo4j cannot be reached', async () => {
    expect(await graph.health()).toEqual({ store: 'neo4j', status: 'ok', backlog: 0 });
    // A driver pointed at a closed port stands in for a stopped server (the outage e2e stops a real one).
    const down = new Neo4jContextGraph({ ...options, driver: neo4j.driver('bolt://127.0.0.1:1') });
    await expect(down.health()).resolves.toMatchObject({ store: 'neo4j', status: 'degraded', backlog: 0 });
    await down.close();
  });
});
