import { freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import type { HookDelivery, HookDeliveryStore } from './hook-deliveries.store';
import { PostgresHookDeliveryStore } from './postgres-hook-deliveries.store';
import { SqliteHookDeliveryStore } from './sqlite-hook-deliveries.store';

jest.setTimeout(30_000);

/** A store of one engine (a replica, by id), and others on the same data. */
interface Backend {
  store(replica: string): Promise<HookDeliveryStore>;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return {
        store: async () => new SqliteHookDeliveryStore(file.db),
        close: async () => file.close(),
      };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await freshPostgres();
      return {
        store: async (replica) => new PostgresHookDeliveryStore(await pg.open(), replica),
        close: () => pg.close(),
      };
    },
  ],
];

let n = 0;
function delivery(over: Partial<HookDelivery> = {}): HookDelivery {
  const at = new Date(Date.UTC(2026, 0, 1) + ++n * 1000).toISOString();
  return {
    id: `hkd_${String(n).padStart(6, '0')}`,
    hook: 'archive',
    phase: 'after',
    actionId: `act_${n}`,
    sessionId: 's1',
    tenant: 'open',
    status: 'pending',
    attempts: 0,
    createdAt: at,
    updatedAt: at,
    ...over,
  };
}

describe.each(BACKENDS)('HookDeliveryStore (%s)', (_name, open) => {
  let backend: Backend;
  let store: HookDeliveryStore;

  beforeEach(async () => {
    n = 0;
    backend = await open();
    store = await backend.store('a');
  });
  afterEach(() => backend.close());

  it('records each attempt of an action’s deliveries, and lists them oldest first', async () => {
    const before = delivery({ phase: 'before', actionId: 'act_x' });
    const after = delivery({ actionId: 'act_x' });
    await store.insert(before);
    await store.insert(after, '{"event":"action.completed"}');
    await store.insert(delivery({ actionId: 'act_y' }), '{}');
    Object.assign(before, { status: 'delivered', attempts: 1, lastStatus: 200, decision: 'deny' });
    expect(await store.update(before)).toBe(true);
    Object.assign(after, {
      attempts: 1,
      lastStatus: 503,
      lastError: 'HTTP 503',
      nextAttemptAt: '2026-01-01T00:01:00.000Z',
    });
    expect(await store.update(after)).toBe(true);
    expect(await store.forAction('s1', 'act_x')).toEqual([before, after]);
    expect(await store.forAction('s2', 'act_x')).toEqual([]);
  });

  it('keeps the body of a pending after-hook delivery only, and gives those back oldest first', async () => {
    const [a, b, c, d] = [delivery(), delivery(), delivery(), delivery({ phase: 'before' })];
    await store.insert(b, '{"b":"\\u0000 é"}');
    await store.insert(a, '{"a":1}');
    await store.insert(c, '{"c":1}');
    await store.insert(d);
    b.attempts = 1;
    await store.update(b);
    c.status = 'delivered';
    await store.update(c);
    expect(await store.pending()).toEqual([
      { delivery: a, payload: '{"a":1}' },
      { delivery: b, payload: '{"b":"\\u0000 é"}' },
    ]);
    // Ended, it drops its body: a later write back to pending does not bring it back.
    c.status = 'pending';
    await store.update(c);
    expect((await store.pending()).map((p) => p.delivery.id)).toEqual([a.id, b.id]);
  });

  it('lists the latest deliveries newest first, of all tenants or of one', async () => {
    const ds = [delivery(), delivery({ tenant: 't2' }), delivery(), delivery({ tenant: 't2' })];
    for (const d of ds) await store.insert(d);
    expect((await store.recent(3)).map((d) => d.id)).toEqual([ds[3].id, ds[2].id, ds[1].id]);
    expect((await store.recent(10, 't2')).map((d) => d.id)).toEqual([ds[3].id, ds[1].id]);
    expect(await store.recent(10, 't3')).toEqual([]);
  });

  it('counts the deliveries of each hook by status', async () => {
    const ds = [delivery(), delivery(), delivery({ hook: 'audit', phase: 'before' }), delivery()];
    for (const d of ds) await store.insert(d, '{}');
    ds[0].status = 'delivered';
    ds[2].status = 'failed';
    for (const d of ds) await store.update(d);
    expect(await store.counts()).toEqual(
      new Map([
        ['archive', { delivered: 1, pending: 2 }],
        ['audit', { failed: 1 }],
      ]),
    );
  });
});

describe('HookDeliveryStore (postgres, replicas)', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  const replica = async (id: string) => new PostgresHookDeliveryStore(await pg.open(), id);

  beforeEach(async () => {
    n = 0;
    pg = await freshPostgres();
  });
  afterEach(() => pg.close());

  it('gives each replica its own pending deliveries, and lists every replica’s', async () => {
    const [a, b] = [await replica('a'), await replica('b')];
    const [da, db] = [delivery(), delivery()];
    await a.insert(da, '{"a":1}');
    await b.insert(db, '{"b":1}');
    expect(await a.pending()).toEqual([{ delivery: da, payload: '{"a":1}' }]);
    expect(await b.pending()).toEqual([{ delivery: db, payload: '{"b":1}' }]);
    expect(await (await replica('c')).pending()).toEqual([]);
    for (const store of [a, b]) {
      expect((await store.recent(10)).map((d) => d.id)).toEqual([db.id, da.id]);
      expect(await store.forAction('s1', da.actionId)).toEqual([da]);
      expect(await store.counts()).toEqual(new Map([['archive', { pending: 2 }]]));
    }
    // A replica writes only the rows it claims.
    expect(await b.update({ ...da, status: 'delivered' })).toBe(false);
    expect(await a.forAction('s1', da.actionId)).toEqual([da]);
  });

  it('hands each pending delivery of a dead replica to exactly one of the replicas adopting at once', async () => {
    const dead = ['a1', 'a2', 'a3', 'a4'];
    const adopters = await Promise.all(['b', 'c', 'd'].map(replica));
    const left = new Map<string, HookDelivery[]>();
    for (const id of dead) {
      const store = await replica(id);
      const ds = Array.from({ length: 30 }, () => delivery());
      for (const d of ds) await store.insert(d, JSON.stringify({ id: d.id }));
      // Ended ones and before-hook ones are not adopted.
      const ended = delivery();
      await store.insert(ended, '{}');
      await store.update({ ...ended, status: 'failed' });
      await store.insert(delivery({ phase: 'before' }));
      left.set(id, ds);
    }
    for (const id of dead) {
      const got = await Promise.all(adopters.map((s) => s.adoptFrom(id)));
      const ids = got.flatMap((g) => g.map((p) => p.delivery.id));
      expect(ids.sort()).toEqual(left.get(id)!.map((d) => d.id));
      expect(new Set(ids).size).toBe(ids.length);
      for (const g of got) {
        const ordered = g.map((p) => p.delivery.id);
        expect(ordered).toEqual([...ordered].sort()); // oldest first
        for (const p of g) expect(p.payload).toBe(JSON.stringify({ id: p.delivery.id }));
      }
      // Nothing left to adopt; the adopters now claim them.
      expect((await Promise.all(adopters.map((s) => s.adoptFrom(id)))).flat()).toEqual([]);
    }
    const claimed = (await Promise.all(adopters.map((s) => s.pending()))).flat().map((p) => p.delivery.id);
    expect(claimed.sort()).toEqual([...left.values()].flat().map((d) => d.id));
  });

  it('leaves a dead replica no say over what was adopted, and adopts nothing from itself', async () => {
    const [a, b] = [await replica('a'), await replica('b')];
    const d = delivery();
    await a.insert(d, '{}');
    expect(await a.adoptFrom('a')).toEqual([]);
    const [adopted] = await b.adoptFrom('a');
    expect(adopted).toEqual({ delivery: d, payload: '{}' });
    // The replica judged dead was only slow: its late write is refused, the adopter's lands.
    expect(await a.update({ ...d, status: 'failed', attempts: 9 })).toBe(false);
    expect(await b.update({ ...d, status: 'delivered', attempts: 1 })).toBe(true);
    expect(await a.forAction('s1', d.actionId)).toEqual([{ ...d, status: 'delivered', attempts: 1 }]);
    expect(await b.pending()).toEqual([]);
  });
});
