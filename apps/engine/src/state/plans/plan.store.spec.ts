import { freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import type { Plan } from './plan.model';
import type { PlanStore } from './plan.store';
import { PostgresPlanStore } from './postgres-plan.store';
import { SqlitePlanStore } from './sqlite-plan.store';

/** A store, and another on the same data (the engine after a restart, or another replica). */
interface Backend {
  store: PlanStore;
  another(): Promise<PlanStore>;
  /** The stored document's size in bytes, as the store holds it. */
  docBytes(id: string): Promise<number>;
  /** Stores a document as stores did before actions were kept apart: the whole plan, actions inline. */
  putLegacy(plan: Plan): Promise<void>;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      const store = new SqlitePlanStore(file.db);
      return {
        store,
        another: async () => new SqlitePlanStore(file.db),
        docBytes: async (id) =>
          (
            file.db.db.prepare('SELECT length(CAST(doc AS BLOB)) AS n FROM plans WHERE id = ?').get(id) as {
              n: number;
            }
          ).n,
        putLegacy: async (p) => {
          file.db.db
            .prepare('INSERT INTO plans (id, session_id, status, doc) VALUES (?, ?, ?, ?)')
            .run(p.id, p.sessionId, p.status, JSON.stringify(p));
        },
        close: async () => file.close(),
      };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await freshPostgres();
      const db = await pg.open();
      return {
        store: new PostgresPlanStore(db),
        another: async () => new PostgresPlanStore(await pg.open()),
        docBytes: async (id) =>
          Number(
            (
              await db.query<{ n: string }>('SELECT octet_length(doc::text) AS n FROM plans WHERE id = $1', [
                id,
              ])
            )[0].n,
          ),
        putLegacy: async (p) => {
          await db.query('INSERT INTO plans (id, session_id, status, doc) VALUES ($1, $2, $3, $4::json)', [
            p.id,
            p.sessionId,
            p.status,
            JSON.stringify(p),
          ]);
        },
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

  it('writes a step action once: later saves of the plan rewrite only its document', async () => {
    const p = plan('s1');
    p.steps[0].action = { type: 'code', language: 'bash', code: `${' '.repeat(512 * 1024)}echo big` };
    await store.save(p);
    p.steps[0].status = 'running';
    await store.save(p);
    expect(await backend.docBytes(p.id)).toBeLessThan(4096);
    expect(await store.get(p.id)).toEqual(p);
    expect(JSON.stringify(await (await backend.another()).get(p.id))).toBe(JSON.stringify(p));
  });

  it('keeps every version of a replaced step with its own action, key order included', async () => {
    const p = plan('s1');
    await store.save(p);
    const old = p.steps[0];
    p.steps[0] = {
      ...old,
      version: 2,
      action: { type: 'code', language: 'python', code: 'print(2)' },
      replaced: [old],
    };
    await store.save(p);
    expect(JSON.stringify(await store.get(p.id))).toBe(JSON.stringify(p));
    expect((await store.listBySession('s1')).map((x) => x.steps[0].replaced?.[0].action)).toEqual([
      old.action,
    ]);
  });

  it('reads a document stored with its actions inline (before they were kept apart)', async () => {
    const p = plan('s1');
    await backend.putLegacy(p);
    expect(JSON.stringify(await store.get(p.id))).toBe(JSON.stringify(p));
    expect((await store.running(['s1'])).map((x) => x.id)).toEqual([p.id]);
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
