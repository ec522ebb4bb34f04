import { Logger } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { eventually, freshPostgres } from '../../../../../test/support/state-stores';
import type { PostgresDb } from './postgres-db';
import { PostgresTenantCache } from './postgres-tenant-cache';

describe('PostgresTenantCache', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  let caches: PostgresTenantCache<string>[];

  beforeEach(async () => {
    pg = await freshPostgres();
    caches = [];
    const db = await pg.open();
    await db.query('CREATE TABLE notes (tenant text PRIMARY KEY, note text NOT NULL)');
  });
  afterEach(async () => {
    await Promise.all(caches.map((c) => c.stop()));
    await pg.close();
  });

  async function cache(resyncMs?: number): Promise<{ cache: PostgresTenantCache<string>; db: PostgresDb }> {
    const db = await pg.open();
    const c = new PostgresTenantCache<string>(
      db,
      {
        channel: 'notes',
        loadAll: async () =>
          new Map(
            (await db.query<{ tenant: string; note: string }>('SELECT * FROM notes')).map((r) => [
              r.tenant,
              r.note,
            ]),
          ),
        loadOne: async (tenant) =>
          (await db.query<{ note: string }>('SELECT note FROM notes WHERE tenant = $1', [tenant]))[0]?.note,
        ...(resyncMs !== undefined && { resyncMs }),
      },
      new Logger('test'),
    );
    await c.start();
    caches.push(c);
    return { cache: c, db };
  }

  const put = (tenant: string, note: string) => (client: PoolClient) =>
    client.query(
      'INSERT INTO notes VALUES ($1, $2) ON CONFLICT (tenant) DO UPDATE SET note = excluded.note',
      [tenant, note],
    );

  it('starts with what is stored, and holds a write here once it resolves', async () => {
    const { db } = await cache();
    await db.query("INSERT INTO notes VALUES ('t1', 'before')");
    const { cache: c } = await cache();
    expect(c.get('t1')).toBe('before');
    await c.write('t2', put('t2', 'mine'));
    expect(c.get('t2')).toBe('mine');
  });

  it('reads a tenant again when another replica announces it changed', async () => {
    const [{ cache: a }, { cache: b }] = [await cache(), await cache()];
    await a.write('t1', put('t1', 'one'));
    await eventually(() => b.get('t1') === 'one');
    await b.write('t1', (client) => client.query("DELETE FROM notes WHERE tenant = 't1'"));
    await eventually(() => a.get('t1') === undefined);
  });

  it('catches a change nobody announced (a notification lost while reconnecting) at the next full read', async () => {
    const { cache: c, db } = await cache(100);
    await db.query("INSERT INTO notes VALUES ('t1', 'silent')");
    await eventually(() => c.get('t1') === 'silent');
    await db.query("DELETE FROM notes WHERE tenant = 't1'");
    await eventually(() => c.get('t1') === undefined);
  });
});
