import { freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import type { Session } from './session.model';
import { PostgresSessionStore } from './postgres-session.store';
import type { SessionStore } from './session.store';
import { SqliteSessionStore } from './sqlite-session.store';

/** A store, and another on the same data: the engine after a restart (SQLite), or another replica (Postgres). */
interface Backend {
  store: SessionStore;
  another(): Promise<SessionStore>;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return {
        store: new SqliteSessionStore(file.db),
        another: async () => new SqliteSessionStore(file.db),
        close: async () => file.close(),
      };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await freshPostgres();
      return {
        store: new PostgresSessionStore(await pg.open(), 'replica-a'),
        another: async () => new PostgresSessionStore(await pg.open(), 'replica-b'),
        close: () => pg.close(),
      };
    },
  ],
];

let n = 0;
function session(over: Partial<Session> = {}): Session {
  const at = new Date(Date.UTC(2026, 0, 1, 0, 0, n));
  return {
    id: `ses_${String(++n).padStart(24, '0')}`,
    tenant: 't_1',
    createdAt: at,
    lastActiveAt: at,
    ttlSeconds: 600,
    metadata: { n, nested: { ok: true } },
    maxConcurrentActions: 2,
    network: { allow: ['pypi.org'] },
    ...over,
  };
}

describe.each(BACKENDS)('SessionStore (%s)', (name, open) => {
  let backend: Backend;
  beforeEach(async () => {
    backend = await open();
  });
  afterEach(() => backend.close());

  it('keeps every field of a session, the options included, for the engine that serves it', async () => {
    const full = session({
      template: 'data-science',
      forkedFrom: { sessionId: 'ses_x', checkpointId: 'chk_1' },
      policy: { rules: [{ effect: 'deny', match: { language: 'bash' } }] },
    });
    const plain = session({ network: { allow: [] } });
    await backend.store.insert(full);
    await backend.store.insert(plain);
    expect(await backend.store.loadAll()).toEqual([full, plain]);
  });

  it('updates activity in one batch and removes a session', async () => {
    const [s1, s2] = [session(), session()];
    await backend.store.insert(s1);
    await backend.store.insert(s2);
    const later = new Date(Date.UTC(2026, 5, 1));
    await backend.store.updateLastActive([{ id: s1.id, lastActiveAt: later }]);
    await backend.store.updateLastActive([]);
    await backend.store.remove(s2.id);
    expect(await backend.store.loadAll()).toEqual([{ ...s1, lastActiveAt: later }]);
  });

  if (name === 'sqlite') {
    it('is the whole list of one engine: a restart loads every session, and there is no shared list', async () => {
      const s = session();
      await backend.store.insert(s);
      expect(await (await backend.another()).loadAll()).toEqual([s]);
      expect(await backend.store.listShared('t_1')).toBeUndefined();
    });
  } else {
    it("gives each replica its own sessions at start-up, and lists a tenant's across replicas", async () => {
      const mine = session();
      const other = session({ tenant: 't_2' });
      await backend.store.insert(mine);
      const b = await backend.another();
      await b.insert(other);
      const theirs = session();
      await b.insert(theirs);
      expect(await backend.store.loadAll()).toEqual([mine]);
      expect(await b.loadAll()).toEqual([other, theirs]);
      expect((await backend.store.listShared('t_1'))?.map((s) => s.id)).toEqual([mine.id, theirs.id]);
      expect(await b.listShared('t_2')).toEqual([other]);
    });

    it('refuses a second session with the same id (nothing is overwritten)', async () => {
      const s = session();
      await backend.store.insert(s);
      await expect((await backend.another()).insert({ ...s, tenant: 'thief' })).rejects.toThrow(/duplicate/);
      expect((await backend.store.listShared('t_1'))?.map((x) => x.tenant)).toEqual(['t_1']);
    });
  }
});
