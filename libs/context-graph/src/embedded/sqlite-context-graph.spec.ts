import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describeContextGraphContract } from '../testing';
import type { ContextGraphFixture } from '../testing';
import type { ActionStart } from '../context-graph.types';
import { SessionNotRecordedError } from '../context-graph.errors';
import { SqliteContextGraph } from './sqlite-context-graph';

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
});
