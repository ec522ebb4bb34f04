import { eventually, freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import { PostgresTenantPolicyStore } from './postgres-tenant-policy.store';
import type { PolicyRule } from './policy.types';
import { SqliteTenantPolicyStore } from './sqlite-tenant-policy.store';
import type { TenantPolicy, TenantPolicyStore } from './tenant-policy.store';

/** A store, and another on the same data (the engine after a restart, or another replica). */
interface Backend {
  store: TenantPolicyStore;
  another(): Promise<TenantPolicyStore>;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return {
        store: new SqliteTenantPolicyStore(file.db),
        another: async () => new SqliteTenantPolicyStore(file.db),
        close: async () => file.close(),
      };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await freshPostgres();
      const stores: PostgresTenantPolicyStore[] = [];
      const open = async () => {
        const store = new PostgresTenantPolicyStore(await pg.open());
        await store.init();
        stores.push(store);
        return store;
      };
      return {
        store: await open(),
        another: open,
        close: async () => {
          await Promise.all(stores.map((s) => s.onApplicationShutdown()));
          await pg.close();
        },
      };
    },
  ],
];

const DENY_SHELL: PolicyRule[] = [{ effect: 'deny', match: { type: 'code', language: 'bash' } }];

const policy = (
  tenant: string,
  rules: PolicyRule[] = DENY_SHELL,
  at = '2026-01-01T00:00:00.000Z',
): TenantPolicy => ({
  tenant,
  rules,
  updatedAt: at,
  updatedBy: 'admin:ops',
});

describe.each(BACKENDS)('TenantPolicyStore (%s)', (_name, open) => {
  let backend: Backend;
  let store: TenantPolicyStore;

  beforeEach(async () => {
    backend = await open();
    store = backend.store;
  });
  afterEach(() => backend.close());

  it('has no layer for a tenant that set none', () => {
    expect(store.get('t_0000000000000001')).toBeUndefined();
  });

  it('reads a layer right after it is set, and replaces it on the next PUT', async () => {
    await store.put(policy('t1'));
    expect(store.get('t1')).toEqual(policy('t1'));
    const allowAll: PolicyRule[] = [{ effect: 'allow', match: {} }];
    await store.put(policy('t1', allowAll, '2026-01-02T03:04:05.678Z'));
    expect(store.get('t1')).toEqual(policy('t1', allowAll, '2026-01-02T03:04:05.678Z'));
    expect(store.get('t2')).toBeUndefined();
  });

  it('keeps layers for the next start', async () => {
    await store.put(policy('t1'));
    await store.put(policy('t2'));
    await store.delete('t2');
    const next = await backend.another();
    expect(next.get('t1')).toEqual(policy('t1'));
    expect(next.get('t2')).toBeUndefined();
  });

  it('removes a layer, saying whether there was one', async () => {
    await store.put(policy('t1'));
    expect(await store.delete('t1')).toBe(true);
    expect(store.get('t1')).toBeUndefined();
    expect(await store.delete('t1')).toBe(false);
  });
});

describe('TenantPolicyStore across replicas (postgres)', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  let a: PostgresTenantPolicyStore;
  let b: PostgresTenantPolicyStore;

  beforeEach(async () => {
    pg = await freshPostgres();
    [a, b] = [new PostgresTenantPolicyStore(await pg.open()), new PostgresTenantPolicyStore(await pg.open())];
    await Promise.all([a.init(), b.init()]);
  });
  afterEach(async () => {
    await Promise.all([a.onApplicationShutdown(), b.onApplicationShutdown()]);
    await pg.close();
  });

  it('applies a PUT and a DELETE on one replica to the other’s synchronous reads within moments', async () => {
    await a.put(policy('t1'));
    const seenIn = await eventually(() => b.get('t1')?.rules.length === 1, 2000);
    expect(b.get('t1')).toEqual(policy('t1'));
    expect(seenIn).toBeLessThan(1000);

    await b.put(policy('t1', [], '2026-02-01T00:00:00.000Z'));
    await eventually(() => a.get('t1')?.updatedAt === '2026-02-01T00:00:00.000Z');
    expect(a.get('t1')?.rules).toEqual([]);

    expect(await a.delete('t1')).toBe(true);
    await eventually(() => b.get('t1') === undefined);
  });

  it('ends with the last of quick successive PUTs from both replicas on each', async () => {
    for (let i = 0; i < 10; i++) {
      await (i % 2 === 0 ? a : b).put(policy('t1', DENY_SHELL, `2026-01-01T00:00:0${i}.000Z`));
    }
    const last = '2026-01-01T00:00:09.000Z';
    await eventually(() => a.get('t1')?.updatedAt === last && b.get('t1')?.updatedAt === last);
  });
});
