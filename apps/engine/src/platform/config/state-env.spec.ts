import { problemsOf } from './config.testing';
import { loadEngineConfig } from './engine-config';

const REPLICA_ENV = {
  SWITCHYARD_STATE: 'postgres',
  DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
  SWITCHYARD_GRAPH: 'neo4j',
  SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
};

describe('state settings', () => {
  it('default to one engine on SQLite', () => {
    expect(loadEngineConfig({}).state).toEqual({ store: 'sqlite' });
  });

  it('take Postgres with its URL, a lease, and the URL other replicas reach this one at', () => {
    expect(loadEngineConfig({ ...REPLICA_ENV, PORT: '9000' }).state).toEqual({
      store: 'postgres',
      databaseUrl: 'postgres://u:p@127.0.0.1:5432/db',
      replicaUrl: 'http://127.0.0.1:9000',
      leaseMs: 10_000,
      poolSize: 10,
    });
    expect(
      loadEngineConfig({
        ...REPLICA_ENV,
        HOST: '0.0.0.0',
        SWITCHYARD_REPLICA_URL: 'http://engine-2.internal:8080/',
        SWITCHYARD_REPLICA_LEASE_MS: '3000',
      }).state,
    ).toMatchObject({ replicaUrl: 'http://engine-2.internal:8080', leaseMs: 3000 });
  });

  it('name DATABASE_URL when it is missing or not a Postgres URL', () => {
    const { DATABASE_URL: _omitted, ...withoutUrl } = REPLICA_ENV;
    expect(problemsOf(withoutUrl).map((p) => p.variable)).toEqual(['DATABASE_URL']);
    expect(problemsOf({ ...REPLICA_ENV, DATABASE_URL: 'mysql://x' })[0]).toMatchObject({
      variable: 'DATABASE_URL',
      message: expect.stringContaining('postgres://'),
    });
  });

  it('refuse replicas without a shared graph or a shared cluster, naming the variable and why', () => {
    const problems = problemsOf({ SWITCHYARD_STATE: 'postgres', DATABASE_URL: REPLICA_ENV.DATABASE_URL });
    expect(problems.map((p) => p.variable).sort()).toEqual([
      'SWITCHYARD_GRAPH',
      'SWITCHYARD_SANDBOX_BACKEND',
    ]);
    expect(problems.find((p) => p.variable === 'SWITCHYARD_GRAPH')?.message).toMatch(/neo4j/);
    expect(problemsOf({ ...REPLICA_ENV, SWITCHYARD_STATE: 'mysql' })[0].variable).toBe('SWITCHYARD_STATE');
    expect(problemsOf({ ...REPLICA_ENV, SWITCHYARD_REPLICA_LEASE_MS: '10' })[0].variable).toBe(
      'SWITCHYARD_REPLICA_LEASE_MS',
    );
  });

  it('read nothing of Postgres with SQLite', () => {
    expect(loadEngineConfig({ DATABASE_URL: 'not a url' }).state).toEqual({ store: 'sqlite' });
  });
});
