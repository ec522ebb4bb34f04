import { type ActionResult, systemClock } from '@switchyard/common';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freshPostgres, tempEngineDb } from '../../../../../test/support/state-stores';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { PolicyFacts } from '../../state/policies/policy.types';
import { AfterHooks } from './after-hooks';
import { HookClient } from './hook-client';
import type { HookDeliveryStore } from '../../state/hooks/hook-deliveries.store';
import type { HookDefinition } from './hook-file';
import type { HookedAction } from './hooked-action';
import { PostgresHookDeliveryStore } from '../../state/hooks/postgres-hook-deliveries.store';
import { SqliteHookDeliveryStore } from '../../state/hooks/sqlite-hook-deliveries.store';

jest.setTimeout(30_000);

/** A hook receiver on 127.0.0.1: `/ok` takes every delivery, `/down` answers 503, `/slow` takes it after 200 ms. */
class Receiver {
  /** Delivery ids taken, by path, in the order they came. */
  readonly got = new Map<string, string[]>();
  private readonly server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '';
      const answer = (status: number) => {
        if (status === 200) {
          this.got.set(path, [...(this.got.get(path) ?? []), String(req.headers['x-switchyard-delivery'])]);
        }
        res.writeHead(status).end();
      };
      if (path === '/down') answer(503);
      else if (path === '/slow') setTimeout(() => answer(200), 200);
      else answer(200);
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The store of one engine (a replica, by id); engines of one backend share their data. */
interface Backend {
  store(replica: string): Promise<HookDeliveryStore>;
  /** A new engine takes over what `replica` left pending: at its start (one engine), or by adopting (replicas). */
  resume(hooks: AfterHooks, replica: string): Promise<void>;
  close(): Promise<void>;
}

const BACKENDS: Array<[string, () => Promise<Backend>]> = [
  [
    'sqlite',
    async () => {
      const file = tempEngineDb();
      return {
        store: async () => new SqliteHookDeliveryStore(file.db),
        resume: (hooks) => hooks.onModuleInit(),
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
        resume: async (hooks, replica) => {
          await hooks.onModuleInit(); // a replica's own id is new at each start: nothing of its own yet
          await hooks.resumeFrom(replica);
        },
        close: () => pg.close(),
      };
    },
  ],
];

const receiver = new Receiver();
let base = '';
beforeAll(async () => {
  base = await receiver.start();
});
afterAll(() => receiver.stop());
beforeEach(() => receiver.got.clear());

function hook(name: string, path: string, over: Partial<HookDefinition> = {}): HookDefinition {
  return {
    name,
    url: `${base}${path}`,
    phase: 'after',
    secret: 'hook-secret-0123456789',
    timeoutMs: 2000,
    retries: 0,
    onFailure: 'allow',
    ...over,
  };
}

let n = 0;
function action(): HookedAction {
  return {
    id: `act_${++n}`,
    sessionId: 's1',
    tenant: 'open',
    type: 'code',
    tool: 'python',
    operation: 'run',
    inputSummary: 'print(1)',
    input: {},
    tier: 'subprocess',
    risk: { level: 'low', reasons: [] },
    startedAt: new Date().toISOString(),
  } as unknown as HookedAction;
}

const result = (a: HookedAction) => ({ id: a.id, status: 'succeeded' }) as unknown as ActionResult;
const facts = {} as PolicyFacts;

function afterHooks(
  store: HookDeliveryStore,
  hooks: HookDefinition[],
  { queue = 100, concurrency = 4 } = {},
): AfterHooks {
  const config = { hooks: { queue, concurrency } } as EngineConfig;
  return new AfterHooks(config, systemClock, new HookClient(systemClock), store, hooks);
}

describe.each(BACKENDS)('AfterHooks (%s)', (_name, open) => {
  let backend: Backend;
  const started: AfterHooks[] = [];
  const engine = async (replica: string, hooks: HookDefinition[], limits = {}) => {
    const store = await backend.store(replica);
    const h = afterHooks(store, hooks, limits);
    started.push(h);
    return { hooks: h, store };
  };

  beforeEach(async () => {
    backend = await open();
  });
  afterEach(async () => {
    for (const h of started.splice(0)) h.onApplicationShutdown();
    await backend.close();
  });

  it('delivers each result in the order queued, and records it delivered', async () => {
    const { hooks, store } = await engine('a', [hook('archive', '/ok')], { concurrency: 1 });
    const actions = [action(), action(), action()];
    for (const a of actions) hooks.enqueue(a, result(a), facts);
    await hooks.settled();
    const recorded = (await Promise.all(actions.map((a) => store.forAction('s1', a.id)))).flat();
    expect(recorded).toMatchObject(
      actions.map((a) => ({ actionId: a.id, status: 'delivered', attempts: 1, lastStatus: 200 })),
    );
    expect(receiver.got.get('/ok')).toEqual(recorded.map((d) => d.id));
    expect(await store.pending()).toEqual([]);
    expect(hooks.backlog).toBe(0);
  });

  it('retries with backoff, then records the delivery failed', async () => {
    const { hooks, store } = await engine('a', [hook('down', '/down', { retries: 1 })]);
    const a = action();
    hooks.enqueue(a, result(a), facts);
    await hooks.settled();
    expect(await store.forAction('s1', a.id)).toMatchObject([
      { status: 'failed', attempts: 2, lastStatus: 503, lastError: 'HTTP 503' },
    ]);
  });

  it('drops the oldest waiting delivery when the queue is full, and records it dropped', async () => {
    const { hooks, store } = await engine('a', [hook('slow', '/slow')], { queue: 2, concurrency: 1 });
    const actions = [action(), action(), action(), action()];
    // The first is under way at once; the second waits, and is dropped when the fourth comes.
    for (const a of actions) hooks.enqueue(a, result(a), facts);
    await hooks.settled();
    const statuses = await Promise.all(
      actions.map(async (a) => (await store.forAction('s1', a.id)).map((d) => [d.status, d.lastError])),
    );
    expect(statuses).toEqual([
      [['delivered', undefined]],
      [['dropped', 'the queue was full (SWITCHYARD_HOOK_QUEUE)']],
      [['delivered', undefined]],
      [['delivered', undefined]],
    ]);
    expect(receiver.got.get('/slow')).toHaveLength(3);
  });

  it('delivers what a stopped engine left pending, dropping those of hooks no longer configured', async () => {
    const first = await engine('a', [hook('archive', '/ok'), hook('gone', '/ok')]);
    first.hooks.onApplicationShutdown(); // stopped: it records, delivers nothing
    const a = action();
    first.hooks.enqueue(a, result(a), facts);
    await first.hooks.settled();
    expect((await first.store.forAction('s1', a.id)).map((d) => d.status)).toEqual(['pending', 'pending']);

    const next = await engine('b', [hook('archive', '/ok')]);
    await backend.resume(next.hooks, 'a');
    await next.hooks.settled();
    const byHook = Object.fromEntries((await next.store.forAction('s1', a.id)).map((d) => [d.hook, d]));
    expect(byHook.archive).toMatchObject({ status: 'delivered', attempts: 1 });
    expect(byHook.gone).toMatchObject({ status: 'dropped', lastError: 'the hook is no longer configured' });
    expect(receiver.got.get('/ok')).toEqual([byHook.archive.id]);
  });
});

describe('AfterHooks (postgres, replicas)', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  const started: AfterHooks[] = [];
  const replica = async (id: string, hooks: HookDefinition[], limits = {}) => {
    const store = new PostgresHookDeliveryStore(await pg.open(), id);
    const h = afterHooks(store, hooks, limits);
    started.push(h);
    return { hooks: h, store };
  };

  beforeEach(async () => {
    pg = await freshPostgres();
  });
  afterEach(async () => {
    for (const h of started.splice(0)) h.onApplicationShutdown();
    await pg.close();
  });

  it('resumes a dead replica’s deliveries on exactly one of the replicas taking it over at once', async () => {
    const a = await replica('a', [hook('archive', '/ok')]);
    a.hooks.onApplicationShutdown(); // it dies with its deliveries pending
    const actions = Array.from({ length: 12 }, action);
    for (const x of actions) a.hooks.enqueue(x, result(x), facts);
    await a.hooks.settled();
    const [b, c] = [
      await replica('b', [hook('archive', '/ok')]),
      await replica('c', [hook('archive', '/ok')]),
    ];

    const taken = await Promise.all([b.hooks.resumeFrom('a'), c.hooks.resumeFrom('a')]);
    expect(taken[0] + taken[1]).toBe(actions.length);
    await Promise.all([b.hooks.settled(), c.hooks.settled()]);
    const adopter = taken[0] > 0 ? b : c;

    // Each delivered once, and shown delivered on every replica (adopter's listing included).
    const got = receiver.got.get('/ok') ?? [];
    expect(new Set(got).size).toBe(actions.length);
    expect(got).toHaveLength(actions.length);
    for (const store of [adopter.store, b.store, c.store, a.store]) {
      const listed = await store.recent(100);
      expect(listed.map((d) => d.actionId).sort()).toEqual(actions.map((x) => x.id).sort());
      expect(listed.every((d) => d.status === 'delivered' && d.attempts === 1)).toBe(true);
    }
    expect(await Promise.all([b.hooks.resumeFrom('a'), c.hooks.resumeFrom('a')])).toEqual([0, 0]);
  });

  it('bounds each replica’s queue by its own deliveries only', async () => {
    const other = await replica('b', [hook('slow', '/slow')]);
    other.hooks.onApplicationShutdown();
    const left = [action(), action(), action()];
    for (const x of left) other.hooks.enqueue(x, result(x), facts);
    await other.hooks.settled();

    const a = await replica('a', [hook('slow', '/slow')], { queue: 2, concurrency: 1 });
    const mine = [action(), action(), action()];
    for (const x of mine) a.hooks.enqueue(x, result(x), facts);
    await a.hooks.settled();
    const status = async (x: HookedAction) => (await a.store.forAction('s1', x.id))[0].status;
    expect(await Promise.all(mine.map(status))).toEqual(['delivered', 'delivered', 'delivered']);
    expect(await Promise.all(left.map(status))).toEqual(['pending', 'pending', 'pending']);
    // Still the other replica's, all of them (those enqueued in one millisecond may come back in any order).
    expect((await other.store.pending()).map((p) => p.delivery.actionId).sort()).toEqual(
      left.map((x) => x.id).sort(),
    );
  });
});
