import { type Clock, InvalidInputError, systemClock } from '@switchyard/common';
import { freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { PostgresDb } from '../../state/storage/postgres-db';
import { IdempotencyKeyReusedError, IdempotencyService, requestHash } from './idempotency.service';
import type { IdempotencyStore } from '../../state/idempotency/idempotency.store';
import { PostgresIdempotencyStore } from '../../state/idempotency/postgres-idempotency.store';
import { SqliteIdempotencyStore } from '../../state/idempotency/sqlite-idempotency.store';

const TTL_SECONDS = 3600;

/** A wall clock the test moves (monotonic time is not used here). */
class TestClock implements Clock {
  at = Date.parse('2026-01-01T00:00:00Z');
  now = () => new Date(this.at);
  monotonic = () => this.at;
}

function config(leaseMs = 10_000): EngineConfig {
  return {
    actions: { idempotencyTtlSeconds: TTL_SECONDS },
    state: { store: 'postgres', leaseMs },
  } as unknown as EngineConfig;
}

interface Backend {
  store: IdempotencyStore;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return { store: new SqliteIdempotencyStore(file.db), close: async () => file.close() };
    },
  ],
  [
    'postgres',
    async () => {
      const pg = await freshPostgres();
      return { store: new PostgresIdempotencyStore(await pg.open(), 'replica-a'), close: () => pg.close() };
    },
  ],
];

const request = (body: unknown = { code: 'print(1)' }) => ({ method: 'POST', path: '/v1/x', body });

/** A handler that counts its runs and answers `statusCode` with the run's number, after `delayMs`. */
function counter(statusCode = 200, delayMs = 0) {
  let runs = 0;
  let started!: () => void;
  const firstStarted = new Promise<void>((resolve) => (started = resolve));
  return {
    runs: () => runs,
    /** Resolves when the first run begins. */
    firstStarted,
    handler: async () => {
      const run = ++runs;
      started();
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      return { statusCode, body: { run, out: 'a\u0000b' } };
    },
  };
}

describe.each(BACKENDS)('IdempotencyService (%s store)', (_name, open) => {
  let backend: Backend;
  let clock: TestClock;
  let service: IdempotencyService;

  beforeEach(async () => {
    backend = await open();
    clock = new TestClock();
    service = new IdempotencyService(config(), clock, backend.store);
  });
  afterEach(() => backend.close());

  it('runs every request without a key', async () => {
    const c = counter();
    await service.run('t', undefined, request(), c.handler);
    const again = await service.run('t', undefined, request(), c.handler);
    expect(c.runs()).toBe(2);
    expect(again.replayed).toBe(false);
  });

  it('answers a repeat with the first answer without running it again; keys are per tenant', async () => {
    const c = counter(201);
    const first = await service.run('t', 'k1', request(), c.handler);
    const again = await service.run('t', 'k1', request(), c.handler);
    expect(first).toEqual({ statusCode: 201, body: { run: 1, out: 'a\u0000b' }, replayed: false });
    expect(again).toEqual({ ...first, replayed: true });
    await service.run('u', 'k1', request(), c.handler);
    expect(c.runs()).toBe(2);
  });

  it('refuses the key with another request (422), and a malformed key', async () => {
    const c = counter();
    await service.run('t', 'k1', request(), c.handler);
    await expect(service.run('t', 'k1', request({ code: 'print(2)' }), c.handler)).rejects.toBeInstanceOf(
      IdempotencyKeyReusedError,
    );
    await expect(service.run('t', 'bad key', request(), c.handler)).rejects.toBeInstanceOf(InvalidInputError);
    expect(c.runs()).toBe(1);
  });

  it('keeps only successful answers: a refused or failed request may be sent again', async () => {
    const refused = counter(400);
    await service.run('t', 'k1', request(), refused.handler);
    await service.run('t', 'k1', request(), refused.handler);
    expect(refused.runs()).toBe(2);
    const failing = jest
      .fn()
      .mockRejectedValueOnce(new Error('boom'))
      .mockResolvedValue({ statusCode: 200, body: 1 });
    await expect(service.run('t', 'k2', request(), failing)).rejects.toThrow('boom');
    expect(await service.run('t', 'k2', request(), failing)).toEqual({
      statusCode: 200,
      body: 1,
      replayed: false,
    });
    // A refused first request lets another body use the key.
    expect((await service.run('t', 'k1', request({ other: true }), counter().handler)).replayed).toBe(false);
  });

  it('makes a repeat that arrives while the first runs wait for its answer', async () => {
    const c = counter(200, 50);
    const [a, b] = await Promise.all([
      service.run('t', 'k1', request(), c.handler),
      service.run('t', 'k1', request(), c.handler),
    ]);
    expect(c.runs()).toBe(1);
    expect(b).toEqual({ ...a, replayed: true });
  });

  it('forgets an answer after the TTL: the key runs again', async () => {
    const c = counter();
    await service.run('t', 'k1', request(), c.handler);
    clock.at += TTL_SECONDS * 1000 - 1;
    expect((await service.run('t', 'k1', request(), c.handler)).replayed).toBe(true);
    clock.at += 1;
    expect((await service.run('t', 'k1', request({ another: 'body' }), c.handler)).replayed).toBe(false);
    expect(c.runs()).toBe(2);
  });
});

describe('IdempotencyService across replicas (postgres)', () => {
  const LEASE_MS = 600;
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  let dbs: PostgresDb[];

  beforeEach(async () => {
    pg = await freshPostgres();
    dbs = [await pg.open(), await pg.open()];
  });
  afterEach(() => pg.close());

  const replica = (i: number) =>
    new IdempotencyService(
      config(LEASE_MS),
      systemClock,
      new PostgresIdempotencyStore(dbs[i], `replica-${i}`),
    );

  it('runs a key given to two replicas at once once; both answer the same', async () => {
    const [a, b] = [replica(0), replica(1)];
    const c = counter(201, 200);
    const answers = await Promise.all([
      a.run('t', 'k1', request(), c.handler),
      b.run('t', 'k1', request(), c.handler),
    ]);
    expect(c.runs()).toBe(1);
    expect(answers.map((x) => x.body)).toEqual([answers[0].body, answers[0].body]);
    expect(answers.map((x) => x.replayed).sort()).toEqual([false, true]);
    expect(answers.every((x) => x.statusCode === 201)).toBe(true);
  });

  it('refuses another request under a key another replica is running (422) at once', async () => {
    const [a, b] = [replica(0), replica(1)];
    const c = counter(200, 300);
    const first = a.run('t', 'k1', request(), c.handler);
    await c.firstStarted;
    await expect(b.run('t', 'k1', request({ other: 1 }), c.handler)).rejects.toBeInstanceOf(
      IdempotencyKeyReusedError,
    );
    await first;
  });

  it('keeps a long request’s claim alive: the other replica waits for its answer past the claim timeout', async () => {
    const [a, b] = [replica(0), replica(1)];
    const c = counter(200, LEASE_MS * 3);
    const first = a.run('t', 'k1', request(), c.handler);
    await c.firstStarted;
    const second = await b.run('t', 'k1', request(), c.handler);
    expect(c.runs()).toBe(1);
    expect(second).toEqual({ ...(await first), replayed: true });
  });

  it('lets the waiting replica run the request itself when the first was refused', async () => {
    const [a, b] = [replica(0), replica(1)];
    let runs = 0;
    let started!: () => void;
    const firstStarted = new Promise<void>((resolve) => (started = resolve));
    const handler = async () => {
      const run = ++runs;
      started();
      await new Promise((resolve) => setTimeout(resolve, 150));
      return run === 1 ? { statusCode: 409, body: 'busy' } : { statusCode: 200, body: 'done' };
    };
    const first = a.run('t', 'k1', request(), handler);
    await firstStarted;
    const second = await b.run('t', 'k1', request(), handler);
    expect((await first).statusCode).toBe(409);
    expect(second).toEqual({ statusCode: 200, body: 'done', replayed: false });
    expect(runs).toBe(2);
  });

  it('takes over the claim of a replica that died once it goes unrenewed for the claim timeout', async () => {
    // Replica 0 claims the key and dies: it never renews, answers or releases.
    const now = Date.now();
    const dead = await new PostgresIdempotencyStore(dbs[0], 'replica-0').claim({
      tenant: 't',
      key: 'k1',
      requestHash: requestHash(request()),
      now,
      expiredAt: now - TTL_SECONDS * 1000,
      staleAt: now - LEASE_MS,
    });
    expect(dead.state).toBe('claimed');
    const c = counter();
    const started = performance.now();
    const answer = await replica(1).run('t', 'k1', request(), c.handler);
    const waited = performance.now() - started;
    expect(answer).toEqual({ statusCode: 200, body: { run: 1, out: 'a\u0000b' }, replayed: false });
    expect(waited).toBeGreaterThanOrEqual(LEASE_MS * 0.8);
    expect(waited).toBeLessThan(LEASE_MS + 2000);
    // The answer is kept for both replicas.
    expect((await replica(0).run('t', 'k1', request(), c.handler)).replayed).toBe(true);
    expect(c.runs()).toBe(1);
  });
});
