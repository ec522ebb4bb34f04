import { freshPostgres, tempEngineDb } from '../../../../test/support/state-stores';
import type { Plan } from './plan.model';
import type { PlanStore } from './plan.store';
import { PostgresPlanStore } from './postgres-plan.store';
import { SqlitePlanStore } from './sqlite-plan.store';

/** A store, and another on the same data (the engine after a restart, or another replica). */
interface Backend {
  store: PlanStore;
  another(): Promise<PlanStore>;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return {
        store: new SqlitePlanStore(file.db),
        another: async () => new SqlitePlanStore(file.db),
        close: async () => file.close(),
      };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await freshPostgres();
      return {
        store: new PostgresPlanStore(await pg.open()),
        another: async () => new PostgresPlanStore(await pg.open()),
        close: () => pg.close(),
      };
    },
  ],
];

let n = 0;
function plan(sessionId: string, over: Partial<Plan> = {}): Plan {
  const now = '2026-01-01T00:00:00.000Z';
  return {
    id: `plan_${++n}`,
    sessionId,
    tenant: 'open',
    status: 'running',
    maxParallel: 1,
    checkpoints: 'none',
    createdAt: now,
    updatedAt: now,
    steps: [
      {
        id: 'a',
        version: 1,
        action: { type: 'code', language: 'python', code: 'print(1)' },
        dependsOn: [],
        allowFailure: false,
        retry: { attempts: 0, backoffMs: 0 },
        status: 'pending',
        attempts: [],
      },
    ],
    ...over,
  };
}

describe.each(BACKENDS)('PlanStore (%s)', (_name, open) => {
  let backend: Backend;
  let store: PlanStore;

  beforeEach(async () => {
    backend = await open();
    store = backend.store;
  });
  afterEach(() => backend.close());

  it('keeps a plan as saved, for another store on the same data too', async () => {
    const p = plan('s1', { goal: 'build it', status: 'needs_replan' });
    await store.save(p);
    expect(await store.get(p.id)).toEqual(p);
    expect(await (await backend.another()).get(p.id)).toEqual(p);
    expect(await store.get('plan_missing')).toBeUndefined();
  });

  it('keeps what a document holds as it came, key order and NUL characters included', async () => {
    const p = plan('s1', { goal: 'out: a\u0000b "quoted" \u00e9' });
    await store.save(p);
    const got = await store.get(p.id);
    expect(JSON.stringify(got)).toBe(JSON.stringify(p));
  });

  it('lists a session’s plans oldest first, an update keeping its place', async () => {
    const [a, b, c] = [plan('s1'), plan('s2'), plan('s1')];
    for (const p of [a, b, c]) await store.save(p);
    a.status = 'succeeded';
    await store.save(a);
    expect((await store.listBySession('s1')).map((p) => [p.id, p.status])).toEqual([
      [a.id, 'succeeded'],
      [c.id, 'running'],
    ]);
    expect(await store.listBySession('s3')).toEqual([]);
  });

  it('stores each save as the plan was at the call, in call order, without waiting between them', async () => {
    const p = plan('s1');
    const saves: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      p.updatedAt = `2026-01-01T00:00:${String(i).padStart(2, '0')}.000Z`;
      saves.push(store.save(p));
    }
    // Changed after the last save: not part of any.
    p.status = 'cancelled';
    await Promise.all(saves);
    const got = await store.get(p.id);
    expect(got?.updatedAt).toBe('2026-01-01T00:00:19.000Z');
    expect(got?.status).toBe('running');
  });

  it('finds the plans left running: all of them, or those of given sessions', async () => {
    const [a, b, c, d] = [plan('s1'), plan('s2'), plan('s3'), plan('s1', { status: 'succeeded' })];
    for (const p of [a, b, c, d]) await store.save(p);
    expect((await store.running()).map((p) => p.id)).toEqual([a.id, b.id, c.id]);
    expect((await store.running(['s1', 's3'])).map((p) => p.id)).toEqual([a.id, c.id]);
    expect(await store.running(['s4'])).toEqual([]);
    expect(await store.running([])).toEqual([]);
  });
});
