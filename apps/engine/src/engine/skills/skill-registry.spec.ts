import { ForbiddenError, systemClock } from '@switchyard/common';
import { eventually, freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import type { EngineConfig } from '../../platform/config/engine-config';
import { PostgresTenantSkillStore } from '../../state/skills/postgres-tenant-skill.store';
import type { SkillDefinition } from '../../state/skills/skill.types';
import { SkillExistsError, SkillLimitError, SkillRegistry, UnknownSkillError } from './skill-registry';
import { SqliteTenantSkillStore } from '../../state/skills/sqlite-tenant-skill.store';
import type { TenantSkillStore } from '../../state/skills/tenant-skill.store';

const MAX_SKILLS = 3;

const skill = (name: string, over: Partial<SkillDefinition> = {}): SkillDefinition => ({
  name,
  description: `the ${name} skill`,
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  outputSchema: { type: 'string' },
  language: 'python',
  code: 'def main(input, ctx):\n    return input["text"]\n',
  ...over,
});

function registry(store: TenantSkillStore): SkillRegistry {
  const config = {
    skills: { maxTenantSkills: MAX_SKILLS, maxDepth: 10 },
  } as unknown as EngineConfig;
  return new SkillRegistry(config, systemClock, store, [skill('engine-echo')]);
}

/** A store, and another on the same data (the engine after a restart, or another replica). */
interface Backend {
  store: TenantSkillStore;
  another(): Promise<TenantSkillStore>;
  close(): Promise<void>;
}

async function postgresStores() {
  const pg = await freshPostgres();
  const stores: PostgresTenantSkillStore[] = [];
  return {
    open: async () => {
      const store = new PostgresTenantSkillStore(await pg.open());
      await store.init();
      stores.push(store);
      return store;
    },
    close: async () => {
      await Promise.all(stores.map((s) => s.onApplicationShutdown()));
      await pg.close();
    },
  };
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return {
        store: new SqliteTenantSkillStore(file.db),
        another: async () => new SqliteTenantSkillStore(file.db),
        close: async () => file.close(),
      };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await postgresStores();
      return { store: await pg.open(), another: pg.open, close: pg.close };
    },
  ],
];

describe.each(BACKENDS)('SkillRegistry (%s store)', (_name, open) => {
  let backend: Backend;
  let skills: SkillRegistry;

  beforeEach(async () => {
    backend = await open();
    skills = registry(backend.store);
  });
  afterEach(() => backend.close());

  it("offers the engine's skills, then the tenant's own by name, to that tenant only", async () => {
    const added = await skills.add('t1', skill('zeta'));
    await skills.add('t1', skill('alpha', { timeoutMs: 500 }));
    await skills.add('t2', skill('beta'));
    expect(added).toMatchObject({ name: 'zeta', source: 'tenant', createdAt: expect.any(String) });
    expect(skills.list('t1').map((s) => [s.name, s.source])).toEqual([
      ['engine-echo', 'engine'],
      ['alpha', 'tenant'],
      ['zeta', 'tenant'],
    ]);
    expect(skills.find('t1', 'alpha')).toEqual({
      ...skill('alpha', { timeoutMs: 500 }),
      source: 'tenant',
      createdAt: expect.any(String),
    });
    expect(skills.find('t1', 'beta')).toBeUndefined();
    expect(skills.find('t2', 'engine-echo')?.source).toBe('engine');
  });

  it('refuses a name taken by an engine skill or one of the tenant’s, and a tenant at its cap', async () => {
    await expect(skills.add('t1', skill('engine-echo'))).rejects.toBeInstanceOf(SkillExistsError);
    await skills.add('t1', skill('a'));
    await expect(skills.add('t1', skill('a'))).rejects.toBeInstanceOf(SkillExistsError);
    await skills.add('t1', skill('b'));
    await skills.add('t1', skill('c'));
    await expect(skills.add('t1', skill('d'))).rejects.toBeInstanceOf(SkillLimitError);
    await skills.add('t2', skill('d'));
  });

  it("removes a tenant's own skill; 404 for one it does not have, 403 for an engine skill", async () => {
    await skills.add('t1', skill('a'));
    await skills.remove('t1', 'a');
    expect(skills.find('t1', 'a')).toBeUndefined();
    await expect(skills.remove('t1', 'a')).rejects.toBeInstanceOf(UnknownSkillError);
    await expect(skills.remove('t1', 'engine-echo')).rejects.toBeInstanceOf(ForbiddenError);
  });

  it('keeps skills for the next start', async () => {
    const a = await skills.add('t1', skill('a'));
    await skills.add('t1', skill('b'));
    await skills.remove('t1', 'b');
    const next = registry(await backend.another());
    expect(next.find('t1', 'a')).toEqual(a);
    expect(next.find('t1', 'b')).toBeUndefined();
  });
});

describe('SkillRegistry across replicas (postgres store)', () => {
  let pg: Awaited<ReturnType<typeof postgresStores>>;
  let a: SkillRegistry;
  let b: SkillRegistry;

  beforeEach(async () => {
    pg = await postgresStores();
    [a, b] = [registry(await pg.open()), registry(await pg.open())];
  });
  afterEach(() => pg.close());

  it('offers a skill added on one replica on the other within moments, and drops it there once removed', async () => {
    const added = await a.add('t1', skill('echo'));
    const seenIn = await eventually(() => b.find('t1', 'echo') !== undefined);
    expect(b.find('t1', 'echo')).toEqual(added);
    expect(seenIn).toBeLessThan(1000);
    await b.remove('t1', 'echo');
    await eventually(() => a.find('t1', 'echo') === undefined);
    expect(a.list('t1').map((s) => s.name)).toEqual(['engine-echo']);
  });

  it('holds the cap and the names when two replicas add at once', async () => {
    await a.add('t1', skill('one'));
    const results = await Promise.allSettled([
      a.add('t1', skill('two')),
      b.add('t1', skill('three')),
      b.add('t1', skill('four')),
      a.add('t1', skill('same')),
      b.add('t1', skill('same')),
    ]);
    const added = results.filter((r) => r.status === 'fulfilled').length;
    expect(added).toBe(MAX_SKILLS - 1);
    await eventually(() => a.list('t1').length === MAX_SKILLS + 1 && b.list('t1').length === MAX_SKILLS + 1);
  });
});
