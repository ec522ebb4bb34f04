import { Test } from '@nestjs/testing';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextGraphClosedError } from './context-graph.errors';
import { ContextGraphModule } from './context-graph.module';
import { ContextGraph } from './context-graph.port';
import { SqliteContextGraph } from './embedded/sqlite-context-graph';

describe('ContextGraphModule', () => {
  const dir = mkdtempSync(join(tmpdir(), 'context-graph-module-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('provides an initialised embedded graph and closes it on shutdown', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [ContextGraphModule.forRoot({ store: 'embedded', sqlitePath: join(dir, 'graph.sqlite') })],
    }).compile();
    const app = await moduleRef.init();
    const graph = app.get(ContextGraph);
    expect(graph).toBeInstanceOf(SqliteContextGraph);
    await graph.recordSession({ id: 's', tenant: 't', createdAt: '2025-01-01T00:00:00.000Z', metadata: {} });

    await app.close();
    await expect(
      graph.recordSession({ id: 's2', tenant: 't', createdAt: '', metadata: {} }),
    ).rejects.toBeInstanceOf(ContextGraphClosedError);
  });

  it('initialises and closes a graph handed in as an instance', async () => {
    const graph = new SqliteContextGraph({ sqlitePath: join(dir, 'instance.sqlite') });
    const moduleRef = await Test.createTestingModule({
      imports: [ContextGraphModule.forRoot({ store: 'instance', graph })],
    }).compile();
    const app = await moduleRef.init();
    expect(app.get(ContextGraph)).toBe(graph);
    expect(await graph.health()).toEqual({ store: 'embedded', status: 'ok', backlog: 0 });
    await app.close();
    await expect(graph.health()).rejects.toBeInstanceOf(ContextGraphClosedError);
  });
});
