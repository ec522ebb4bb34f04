import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describeContextGraphContract } from '../testing';
import type { ContextGraphFixture } from '../testing';
import type { ActionCompletion, ActionStart } from '../context-graph.types';
import { SessionNotRecordedError } from '../context-graph.errors';
import { SqliteContextGraph } from './sqlite-context-graph';

/** Undoes version 7 on a current file: no checkpoint tables, and an outbox whose CHECK refuses their entries. */
const BACK_TO_V6 = `DROP TABLE restores; DROP TABLE checkpoints; DROP TABLE forks;
  CREATE TABLE old_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('session', 'action', 'plan')), key TEXT NOT NULL, session_id TEXT NOT NULL) STRICT;
  INSERT INTO old_outbox SELECT * FROM outbox; DROP TABLE outbox; ALTER TABLE old_outbox RENAME TO outbox;
  CREATE INDEX outbox_by_session ON outbox(session_id);`;

async function sqliteFixture(): Promise<ContextGraphFixture & { graph: SqliteContextGraph; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'context-graph-'));
  const sqlitePath = join(dir, 'nested', 'graph.sqlite'); // parent dir does not exist yet
  const opened: SqliteContextGraph[] = [];
  const open = async (): Promise<SqliteContextGraph> => {
    const graph = new SqliteContextGraph({ sqlitePath });
    opened.push(graph);
    await graph.init();
    return graph;
  };
  return {
    dir,
    graph: await open(),
    reopen: open,
    teardown: async () => {
      await Promise.all(opened.map((g) => g.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeContextGraphContract('embedded SQLite', sqliteFixture);

describe('SqliteContextGraph', () => {
  let fixture: Awaited<ReturnType<typeof sqliteFixture>>;
  let graph: SqliteContextGraph;
  beforeEach(async () => {
    fixture = await sqliteFixture();
    graph = fixture.graph;
  });
  afterEach(() => fixture.teardown());

  const start = (id: string, sessionId: string): ActionStart => ({
    id,
    sessionId,
    type: 'file',
    operation: 'read',
    input: { path: 'a' },
    inputSummary: 'read a',
    inputHash: '0'.repeat(64),
    startedAt: '2025-01-01T00:00:00.000Z',
    tier: 'engine',
    risk: { score: 0, level: 'low', reasons: [] },
  });

  const at = '2025-01-01T00:00:01.000Z';
  const completion = (id: string, overrides: Partial<ActionCompletion> = {}): ActionCompletion => ({
    status: 'succeeded',
    endedAt: at,
    durationMs: 1000,
    tier: 'engine',
    risk: { score: 0, level: 'low', reasons: [] },
    outputExcerpt: '',
    files: [],
    result: {
      id,
      sessionId: 's',
      type: 'file',
      status: 'succeeded',
      truncated: { stdout: false, stderr: false },
      durationMs: 1000,
      startedAt: '2025-01-01T00:00:00.000Z',
      tier: 'engine',
      risk: { score: 0, level: 'low', reasons: [] },
    },
    ...overrides,
  });

  it('runs in WAL mode (NORMAL sync plus an explicit WAL fsync per commit), foreign keys and a busy timeout', () => {
    expect(graph.pragmas()).toEqual({
      journalMode: 'wal',
      synchronous: 1,
      foreignKeys: true,
      busyTimeoutMs: 5000,
    });
  });

  it('migrates a version-1 file (no sandboxes) in place, keeping its actions', async () => {
    await graph.close();
    const sqlitePath = join(fixture.dir, 'v1.sqlite');
    const v1 = new DatabaseSync(sqlitePath);
    v1.exec(`CREATE TABLE sessions (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at TEXT NOT NULL,
        metadata TEXT NOT NULL, ended_at TEXT, end_reason TEXT) STRICT;
      CREATE TABLE actions (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL, type TEXT NOT NULL, operation TEXT NOT NULL, status TEXT NOT NULL,
        input TEXT NOT NULL, input_summary TEXT NOT NULL, input_hash TEXT NOT NULL, started_at TEXT NOT NULL,
        ended_at TEXT, duration_ms REAL, tier TEXT NOT NULL, risk TEXT NOT NULL, exit_code INTEGER,
        error TEXT, output_excerpt TEXT, result TEXT, retry_of TEXT REFERENCES actions(id),
        UNIQUE (session_id, seq)) STRICT;
      INSERT INTO sessions VALUES ('s', 't', '2025-01-01T00:00:00.000Z', '{}', NULL, NULL);
      PRAGMA user_version = 1;`);
    v1.close();
    graph = new SqliteContextGraph({ sqlitePath });
    await graph.init();
    await graph.recordActionStarted(start('a1', 's'));
    expect((await graph.getAction('s', 'a1'))?.sandbox).toBeUndefined();
    await graph.close();
  });

  it('commits writes requested in the same tick in one transaction', async () => {
    await graph.recordSession({ id: 's', tenant: 't', createdAt: '2025-01-01T00:00:00.000Z', metadata: {} });
    const before = graph.writeStats();
    await Promise.all(Array.from({ length: 50 }, (_, i) => graph.recordActionStarted(start(`a${i}`, 's'))));
    expect(graph.writeStats()).toEqual({ transactions: before.transactions + 1, writes: before.writes + 50 });
  });

  it('splits a long queue into bounded batches', async () => {
    await graph.close();
    graph = new SqliteContextGraph({ sqlitePath: join(fixture.dir, 'small.sqlite'), maxBatchSize: 4 });
    await graph.init();
    await graph.recordSession({ id: 's', tenant: 't', createdAt: '2025-01-01T00:00:00.000Z', metadata: {} });
    await Promise.all(Array.from({ length: 10 }, (_, i) => graph.recordActionStarted(start(`a${i}`, 's'))));
    expect(graph.writeStats()).toEqual({ transactions: 1 + 3, writes: 11 });
    await graph.close();
  });

  it('fails only the bad writes of a batch', async () => {
    await graph.recordSession({ id: 's', tenant: 't', createdAt: '2025-01-01T00:00:00.000Z', metadata: {} });
    const results = await Promise.allSettled([
      graph.recordActionStarted(start('a1', 's')),
      graph.recordActionStarted(start('a1', 's')), // duplicate primary key
      graph.recordActionStarted(start('a2', 'missing')), // unknown session
      graph.recordActionStarted(start('a3', 's')),
    ]);

    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({
      message: expect.stringMatching(/UNIQUE/),
    });
    expect((results[2] as PromiseRejectedResult).reason).toBeInstanceOf(SessionNotRecordedError);
    const { items } = await graph.listActions('s', { limit: 10 });
    expect(items.map((a) => [a.id, a.seq])).toEqual([
      ['a1', 1],
      ['a3', 2],
    ]);
  });

  it('rejects use before init with a clear message', async () => {
    const fresh = new SqliteContextGraph({ sqlitePath: join(fixture.dir, 'unused.sqlite') });
    await expect(fresh.getAction('s', 'a')).rejects.toThrow(/init\(\)/);
    await expect(fresh.recordSession({ id: 's', tenant: 't', createdAt: '', metadata: {} })).rejects.toThrow(
      /init\(\)/,
    );
  });

  describe('outbox', () => {
    const session = { id: 's', tenant: 't', createdAt: '2025-01-01T00:00:00.000Z', metadata: {} };
    const open = async (outbox: boolean, file = 'outbox.sqlite'): Promise<SqliteContextGraph> => {
      const g = new SqliteContextGraph({ sqlitePath: join(fixture.dir, file), outbox });
      await g.init();
      return g;
    };

    it('queues nothing without an outbox', async () => {
      await graph.recordSession(session);
      await graph.recordActionStarted(start('a1', 's'));
      expect(graph.outboxSize()).toBe(0);
      expect(graph.outboxHolds('s')).toBe(false);
      expect(graph.outboxBatch(10)).toEqual({ lastId: 0, entries: 0, sessions: [], actions: [] });
    });

    it('queues what each write changed, in its transaction; a rejected write queues nothing', async () => {
      const g = await open(true);
      await g.recordSession(session);
      await g.recordActionStarted(start('a1', 's'));
      await expect(g.recordActionStarted(start('a2', 'missing'))).rejects.toBeInstanceOf(
        SessionNotRecordedError,
      );
      await g.endSession('s', '2025-01-01T00:01:00.000Z', 'deleted');
      expect(g.outboxSize()).toBe(3);
      expect(g.outboxHolds('s')).toBe(true);
      expect(g.outboxHolds('other')).toBe(false);

      const batch = g.outboxBatch(10);
      expect(batch).toMatchObject({ entries: 3, sessions: [{ id: 's', endReason: 'deleted' }] });
      expect(batch.actions.map((a) => [a.id, a.seq, a.prevId])).toEqual([['a1', 1, undefined]]);
      expect(await g.outboxAck(batch.lastId)).toBe(3);
      expect(g.outboxSize()).toBe(0);
      await g.close();
    });

    it('migrates a version-3 file: keeps its outbox entries and then takes plan entries', async () => {
      const g = await open(true, 'v3.sqlite');
      await g.recordSession(session);
      await g.close();
      // Back to the version-3 shape: no plan tables, an outbox that refuses `plan` entries.
      const v3 = new DatabaseSync(join(fixture.dir, 'v3.sqlite'));
      v3.exec(`DROP TABLE restores; DROP TABLE checkpoints; DROP TABLE forks;
        DROP TABLE step_attempts; DROP TABLE plan_steps; DROP TABLE plans;
        CREATE TABLE old_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT,
          kind TEXT NOT NULL CHECK (kind IN ('session', 'action')), key TEXT NOT NULL, session_id TEXT NOT NULL) STRICT;
        INSERT INTO old_outbox SELECT * FROM outbox; DROP TABLE outbox; ALTER TABLE old_outbox RENAME TO outbox;
        CREATE INDEX outbox_by_session ON outbox(session_id);
        ALTER TABLE sandboxes DROP COLUMN runtime;
        PRAGMA user_version = 3;`);
      v3.close();
      const migrated = await open(true, 'v3.sqlite');
      expect(migrated.outboxSize()).toBe(1);
      await migrated.recordActionStarted(start('a1', 's'));
      await migrated.recordPlan({
        id: 'p',
        sessionId: 's',
        status: 'running',
        maxParallel: 1,
        createdAt: session.createdAt,
        steps: [
          {
            stepId: 'x',
            version: 1,
            status: 'running',
            allowFailure: false,
            dependsOn: [],
            attempts: ['a1'],
          },
        ],
      });
      const batch = migrated.outboxBatch(10);
      expect(batch.entries).toBe(3);
      expect(batch.plans?.map((p) => [p.id, p.steps.map((st) => st.attempts)])).toEqual([['p', [['a1']]]]);
      await migrated.close();
    });

    it('migrates a version-4 file (no kernels or processes): keeps its actions and outbox, then takes both', async () => {
      const g = await open(true, 'v4.sqlite');
      await g.recordSession(session);
      await g.recordActionStarted(start('a1', 's'));
      const box = { tier: 'pooled' as const, containerId: 'c'.repeat(64) };
      await g.recordActionCompleted('a1', completion('a1', { sandbox: box }));
      const before = await g.getAction('s', 'a1');
      await g.close();
      // Back to the version-4 shape: version 5 only added these four tables (and version 6 the sandbox runtime).
      const v4 = new DatabaseSync(join(fixture.dir, 'v4.sqlite'));
      v4.exec(`${BACK_TO_V6}
        DROP TABLE kernel_runs; DROP TABLE kernels; DROP TABLE process_starts; DROP TABLE processes;
        ALTER TABLE sandboxes DROP COLUMN runtime;
        PRAGMA user_version = 4;`);
      v4.close();

      const migrated = await open(true, 'v4.sqlite');
      expect(await migrated.getAction('s', 'a1')).toEqual(before);
      expect(migrated.outboxSize()).toBe(3);
      const kernel = {
        id: 'krn_1',
        language: 'python' as const,
        tier: 'pooled' as const,
        executionCount: 1,
        started: true,
      };
      const process = { id: 'prc_1', command: 'npm run dev', tier: 'pooled' as const, startedAt: at };
      await migrated.recordActionStarted(start('a2', 's'));
      await migrated.recordActionCompleted('a2', completion('a2', { sandbox: box, kernel }));
      await migrated.recordActionStarted(start('a3', 's'));
      await migrated.recordActionCompleted('a3', completion('a3', { startedProcess: process }));
      expect(await migrated.getAction('s', 'a2')).toMatchObject({ sandbox: box, kernel });
      expect((await migrated.getAction('s', 'a3'))?.startedProcess).toStrictEqual(process);
      const batch = migrated.outboxBatch(100);
      expect(batch.actions.map((a) => [a.id, a.kernel?.id, a.startedProcess?.id])).toEqual([
        ['a1', undefined, undefined],
        ['a2', 'krn_1', undefined],
        ['a3', undefined, 'prc_1'],
      ]);
      await migrated.close();
      const check = new DatabaseSync(join(fixture.dir, 'v4.sqlite'));
      expect(check.prepare('PRAGMA user_version').get()).toEqual({ user_version: 7 });
      check.close();
    });

    it('migrates a version-5 file (no sandbox runtime): its sandboxes keep none, new ones keep theirs', async () => {
      const g = await open(true, 'v5.sqlite');
      await g.recordSession(session);
      await g.recordActionStarted(start('a1', 's'));
      const old = { tier: 'container' as const, containerId: 'c'.repeat(64) };
      await g.recordActionCompleted('a1', completion('a1', { sandbox: old }));
      const before = await g.getAction('s', 'a1');
      await g.close();
      const v5 = new DatabaseSync(join(fixture.dir, 'v5.sqlite'));
      v5.exec(`${BACK_TO_V6} ALTER TABLE sandboxes DROP COLUMN runtime; PRAGMA user_version = 5;`);
      v5.close();

      const migrated = await open(true, 'v5.sqlite');
      expect(await migrated.getAction('s', 'a1')).toEqual(before);
      expect(before?.sandbox).toStrictEqual(old);
      const gvisor = { tier: 'container' as const, containerId: 'd'.repeat(64), runtime: 'runsc' };
      await migrated.recordActionStarted(start('a2', 's'));
      await migrated.recordActionCompleted('a2', completion('a2', { sandbox: gvisor }));
      expect((await migrated.getAction('s', 'a2'))?.sandbox).toStrictEqual(gvisor);
      expect(migrated.outboxBatch(100).actions.find((a) => a.id === 'a2')?.sandbox).toStrictEqual(gvisor);
      await migrated.close();
      const check = new DatabaseSync(join(fixture.dir, 'v5.sqlite'));
      expect(check.prepare('PRAGMA user_version').get()).toEqual({ user_version: 7 });
      check.close();
    });

    it('migrates a version-6 file (no checkpoints; an outbox refusing their entries): keeps its data and outbox, then takes checkpoints, restores and forks', async () => {
      const g = await open(true, 'v6.sqlite');
      await g.recordSession(session);
      await g.recordActionStarted(start('a1', 's'));
      await g.recordActionCompleted('a1', completion('a1', { files: [{ path: 'f', access: 'write' }] }));
      await g.recordPlan({
        id: 'p',
        sessionId: 's',
        status: 'running',
        maxParallel: 1,
        createdAt: at,
        steps: [],
      });
      const before = await g.getAction('s', 'a1');
      const view = await g.sessionGraph('s');
      await g.close();
      const v6 = new DatabaseSync(join(fixture.dir, 'v6.sqlite'));
      v6.exec(`${BACK_TO_V6} PRAGMA user_version = 6;`);
      expect(() => v6.exec(`INSERT INTO outbox (kind, key, session_id) VALUES ('fork', 'x', 'x')`)).toThrow(
        /CHECK/,
      );
      v6.close();

      const migrated = await open(true, 'v6.sqlite');
      expect(await migrated.getAction('s', 'a1')).toEqual(before);
      expect(await migrated.sessionGraph('s')).toEqual(view);
      expect(migrated.outboxSize()).toBe(4);
      await migrated.recordSession({ ...session, id: 'f' });
      await migrated.recordCheckpoint({
        id: 'chk_1',
        sessionId: 's',
        createdAt: at,
        files: 1,
        directories: 0,
        bytes: 2,
        auto: true,
        seq: 1,
        beforeActionId: 'a1',
      });
      await migrated.recordRestore({ sessionId: 's', checkpointId: 'chk_1', restoredAt: at });
      await migrated.recordFork({
        sessionId: 'f',
        fromSessionId: 's',
        checkpointId: 'chk_1',
        forkedAt: at,
        seq: 1,
      });
      expect((await migrated.getAction('s', 'a1'))?.checkpoint).toStrictEqual({
        id: 'chk_1',
        createdAt: at,
        auto: true,
      });
      expect((await migrated.fileLineage('f', 'f')).entries.map((e) => [e.sessionId, e.id])).toEqual([
        ['s', 'a1'],
      ]);
      const batch = migrated.outboxBatch(100);
      expect(batch.entries).toBe(4 + 4);
      expect(batch.checkpoints?.map((c) => [c.id, c.beforeActionId, c.restores.length])).toEqual([
        ['chk_1', 'a1', 1],
      ]);
      expect(batch.forks).toEqual([
        { sessionId: 'f', fromSessionId: 's', checkpointId: 'chk_1', forkedAt: at, seq: 1 },
      ]);
      await migrated.close();
      const check = new DatabaseSync(join(fixture.dir, 'v6.sqlite'));
      expect(check.prepare('PRAGMA user_version').get()).toEqual({ user_version: 7 });
      check.close();
    });

    it('migrates a file from before approvals and calls in place: keeps its data and outbox, then takes both', async () => {
      const fresh = new DatabaseSync(join(fixture.dir, 'nested', 'graph.sqlite'));
      const current = fresh.prepare('PRAGMA user_version').get();
      fresh.close();
      const g = await open(true, 'v7.sqlite');
      await g.recordSession(session);
      await g.recordActionStarted(start('a1', 's'));
      await g.recordActionCompleted('a1', completion('a1', { files: [{ path: 'f', access: 'write' }] }));
      await g.recordActionStarted({ ...start('a2', 's'), type: 'skill', operation: 'fix' });
      const before = await g.getAction('s', 'a1');
      const view = await g.sessionGraph('s');
      await g.close();
      // Back to the shape a version-7 engine wrote: no approval or call tables, no index for awaiting actions.
      const v7 = new DatabaseSync(join(fixture.dir, 'v7.sqlite'));
      v7.exec(`DROP TABLE approvals; DROP TABLE action_calls; DROP INDEX actions_awaiting_approval;
        PRAGMA user_version = 7;`);
      v7.close();

      const migrated = await open(true, 'v7.sqlite');
      expect(await migrated.getAction('s', 'a1')).toEqual(before);
      expect(await migrated.sessionGraph('s')).toEqual(view);
      expect(migrated.outboxSize()).toBe(4);
      const approval = {
        rule: '{"effect":"ask"}',
        layer: 'engine',
        reasons: ['writes outside the workspace'],
        requestedAt: at,
        expiresAt: '2025-01-01T00:15:01.000Z',
      };
      await migrated.recordActionStarted({
        ...start('a3', 's'),
        calledBy: { actionId: 'a2', depth: 1 },
        approval,
      });
      expect(await migrated.getAction('s', 'a3')).toMatchObject({
        status: 'awaiting_approval',
        approval,
        calledBy: { actionId: 'a2', depth: 1 },
      });
      await migrated.recordApprovalDecision('a3', {
        decision: 'approved',
        decidedAt: at,
        decidedBy: 'admin:1',
      });
      expect((await migrated.failureContext('s', 'a2', { before: 0 }))?.calls.map((c) => c.id)).toEqual([
        'a3',
      ]);
      expect(migrated.outboxBatch(100).actions.map((a) => [a.id, a.status, a.approval?.decision])).toEqual([
        ['a1', 'succeeded', undefined],
        ['a2', 'running', undefined],
        ['a3', 'running', 'approved'],
      ]);
      await migrated.close();
      const check = new DatabaseSync(join(fixture.dir, 'v7.sqlite'));
      expect(check.prepare('PRAGMA user_version').get()).toEqual(current);
      expect(
        check
          .prepare(
            `SELECT name FROM sqlite_master WHERE name IN ('approvals', 'action_calls', 'actions_awaiting_approval')
            ORDER BY name`,
          )
          .all()
          .map((r) => r.name),
      ).toEqual(['action_calls', 'actions_awaiting_approval', 'approvals']);
      check.close();
    });

    it('queues a decision as its action (carrying its approval), and the awaiting actions a restart interrupts', async () => {
      const g = await open(true);
      await g.recordSession(session);
      const approval = {
        rule: '{}',
        layer: 'session',
        reasons: [],
        requestedAt: at,
        expiresAt: at,
      };
      await g.recordActionStarted({ ...start('a1', 's'), type: 'skill', approval });
      await g.recordActionStarted({ ...start('a2', 's'), calledBy: { actionId: 'a1', depth: 1 } });
      await g.recordActionStarted({ ...start('a3', 's'), approval });
      await g.outboxAck(g.outboxBatch(10).lastId);
      await g.recordApprovalDecision('a1', { decision: 'expired', decidedAt: at });
      const decided = g.outboxBatch(10);
      expect(decided.entries).toBe(1);
      expect(decided.actions.map((a) => [a.id, a.status, a.approval])).toEqual([
        ['a1', 'awaiting_approval', { ...approval, decision: 'expired', decidedAt: at }],
      ]);
      await g.outboxAck(decided.lastId);
      expect(await g.markRunningInterrupted('2025-01-01T00:02:00.000Z')).toBe(3);
      const batch = g.outboxBatch(10);
      expect(batch.actions.map((a) => [a.id, a.status, a.prevId, a.calledBy?.actionId])).toEqual([
        ['a1', 'interrupted', undefined, undefined],
        ['a2', 'interrupted', 'a1', 'a1'],
        ['a3', 'interrupted', 'a2', undefined],
      ]);
      await g.close();
    });

    it('queues a checkpoint once per change, carrying its deletion and every restore; a fork once', async () => {
      const g = await open(true);
      await g.recordSession(session);
      await g.recordSession({ ...session, id: 'f' });
      await g.outboxAck(g.outboxBatch(10).lastId);
      const chk = {
        id: 'chk_1',
        sessionId: 's',
        createdAt: at,
        files: 1,
        directories: 0,
        bytes: 2,
        auto: false,
        seq: 0,
      };
      await g.recordCheckpoint(chk);
      await g.recordCheckpoint(chk); // already recorded: nothing to copy
      await g.recordRestore({ sessionId: 's', checkpointId: 'chk_1', restoredAt: at, planId: 'p' });
      await g.recordRestore({ sessionId: 's', checkpointId: 'chk_1', restoredAt: at, planId: 'p' });
      await g.recordCheckpointDeleted('s', 'chk_1', at, 'pruned');
      await g.recordFork({ sessionId: 'f', fromSessionId: 's', forkedAt: at, seq: 0 });
      await g.recordFork({ sessionId: 'f', fromSessionId: 's', forkedAt: at, seq: 0 });
      expect(g.outboxSize()).toBe(4);
      const batch = g.outboxBatch(10);
      expect(batch).toMatchObject({ entries: 4, sessions: [], actions: [] });
      expect(batch.checkpoints).toEqual([
        {
          ...chk,
          deletedAt: at,
          deleteReason: 'pruned',
          restores: [{ sessionId: 's', checkpointId: 'chk_1', restoredAt: at, planId: 'p' }],
        },
      ]);
      expect(batch.forks).toEqual([{ sessionId: 'f', fromSessionId: 's', forkedAt: at, seq: 0 }]);
      await g.close();
    });

    it('holds a session while an entry waits that its answers draw on: its fork origins’ and its forks’', async () => {
      const g = await open(true);
      await g.recordSession(session);
      await g.recordSession({ ...session, id: 'f' });
      await g.recordSession({ ...session, id: 'other' });
      await g.outboxAck(g.outboxBatch(10).lastId);
      await g.recordFork({ sessionId: 'f', fromSessionId: 's', forkedAt: at, seq: 0 });
      expect(['s', 'f', 'other'].map((id) => g.outboxHolds(id))).toEqual([true, true, false]);
      await g.outboxAck(g.outboxBatch(10).lastId);
      expect(['s', 'f'].map((id) => g.outboxHolds(id))).toEqual([false, false]);
      await g.recordActionStarted(start('a1', 's')); // in f's lineage
      expect(['s', 'f', 'other'].map((id) => g.outboxHolds(id))).toEqual([true, true, false]);
      await g.close();
    });

    it('queues exactly the actions markRunningInterrupted ends', async () => {
      const g = await open(true);
      await g.recordSession(session);
      await g.recordActionStarted(start('a1', 's'));
      await g.recordActionStarted(start('a2', 's'));
      await g.outboxAck(g.outboxBatch(10).lastId);
      expect(await g.markRunningInterrupted('2025-01-01T00:02:00.000Z')).toBe(2);
      const batch = g.outboxBatch(10);
      expect(batch.actions.map((a) => [a.id, a.status, a.prevId])).toEqual([
        ['a1', 'interrupted', undefined],
        ['a2', 'interrupted', 'a1'],
      ]);
      await g.close();
    });

    it('stops a batch at the byte budget, but always takes one entry', async () => {
      const g = await open(true);
      await g.recordSession(session);
      for (const id of ['a1', 'a2', 'a3']) await g.recordActionStarted(start(id, 's'));
      expect(g.outboxBatch(10, 1).entries).toBe(2); // the session, then one action over budget
      expect(g.outboxBatch(10, 10_000).entries).toBe(4);
      await g.close();
    });

    it('switching the outbox on queues the history once; switching it off forgets the queue', async () => {
      await graph.recordSession(session);
      await graph.recordActionStarted(start('a1', 's'));
      await graph.recordActionStarted(start('a2', 's'));
      await graph.close();
      const path = 'nested/graph.sqlite';
      let g = await open(true, path);
      expect(g.outboxSize()).toBe(3);
      await g.close();
      g = await open(true, path); // already on: nothing queued twice
      expect(g.outboxSize()).toBe(3);
      await g.close();
      g = await open(false, path);
      expect(g.outboxSize()).toBe(0);
      await g.recordActionStarted(start('a3', 's'));
      await g.close();
      g = await open(true, path);
      expect(g.outboxBatch(100).actions.map((a) => a.id)).toEqual(['a1', 'a2', 'a3']);
      await g.close();
    });
  });
});
