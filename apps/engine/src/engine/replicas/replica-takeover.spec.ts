import type { ModuleRef } from '@nestjs/core';
import type { ContextGraph } from '@switchyard/context-graph';
import { FakeClock } from '../../../../../libs/sandbox/test/fake-clock';
import { freshPostgres } from '../../../../../test/support/state-stores';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { SessionEventLog } from '../../state/events/session-event-log';
import { SessionEvents } from '../../session/events/session-events';
import type { AfterHooks } from '../../gates/hooks/after-hooks';
import type { PlanExecutor } from '../plans/plan-executor.service';
import { PostgresSessionStore } from '../../state/sessions/postgres-session.store';
import type { Session } from '../../state/sessions/session.model';
import type { SessionsService } from '../../session/sessions/sessions.service';
import { ReplicaLeases } from './replica-leases';
import { ReplicaTakeover } from './replica-takeover';

jest.setTimeout(30_000);

const LEASE_MS = 1000;
const config = {
  state: { store: 'postgres', databaseUrl: '', replicaUrl: '', leaseMs: LEASE_MS, poolSize: 4 },
} as unknown as EngineConfig;

/** One replica: its leases on a pool of its own, and a takeover whose collaborators record what they were asked. */
async function replica(pg: Awaited<ReturnType<typeof freshPostgres>>, id: string) {
  const db = await pg.open();
  const leases = new ReplicaLeases(
    { ...config, state: { ...config.state, replicaUrl: `http://${id}` } } as EngineConfig,
    id,
    db,
  );
  const calls = {
    interrupted: [] as string[][],
    plans: [] as string[][],
    adopted: [] as string[],
    reaped: [] as string[],
    hooksFrom: [] as string[],
    /** Pods of which dead replicas the Kubernetes backend was allowed to adopt, and when, among the adoptions. */
    order: [] as string[],
  };
  const graph = {
    markRunningInterrupted: async (_at: string, ids: readonly string[]) => {
      calls.interrupted.push([...ids]);
      return ids.length * 2;
    },
  } as unknown as ContextGraph;
  const sessions = {
    adopt: async (s: Session) => {
      await new Promise((r) => setTimeout(r, 50));
      calls.adopted.push(s.id);
      calls.order.push(`adopt ${s.id}`);
    },
  } as unknown as SessionsService;
  const plans = {
    interruptLeftRunning: async (ids: readonly string[]) => {
      calls.plans.push([...ids]);
      return 0;
    },
  } as unknown as PlanExecutor;
  const eventLog = {
    recent: async (sessionId: string) => [{ id: 41, type: 'action.started', at: 'x', data: { sessionId } }],
  } as unknown as SessionEventLog;
  const events = new SessionEvents(10);
  const ref = {
    get: () => ({
      sessions: { adoptFrom: (engine: string) => calls.order.push(`adoptFrom ${engine}`) },
      reaper: {
        reapEngine: async (engine: string) => {
          calls.reaped.push(engine);
          calls.order.push(`reap ${engine}`);
          return [`pod-of-${engine}`];
        },
      },
    }),
  } as unknown as ModuleRef;
  const afterHooks = {
    resumeFrom: async (from: string) => {
      calls.hooksFrom.push(from);
      return 0;
    },
  } as unknown as AfterHooks;
  const takeover = new ReplicaTakeover(
    id,
    new FakeClock(),
    db,
    sessions,
    graph,
    events,
    eventLog,
    plans,
    ref,
    afterHooks,
  );
  return { id, db, leases, takeover, calls, events, store: new PostgresSessionStore(db, id) };
}

function session(n: number): Session {
  const at = new Date(Date.UTC(2026, 0, 1, 0, 0, n));
  return {
    id: `ses_${String(n).padStart(24, '0')}`,
    tenant: 't',
    createdAt: at,
    lastActiveAt: at,
    ttlSeconds: 60,
    metadata: {},
    maxConcurrentActions: 1,
    network: { allow: [] },
  };
}

describe('ReplicaTakeover (Postgres)', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  beforeEach(async () => {
    pg = await freshPostgres();
  });
  afterEach(() => pg.close());

  it("takes a dead replica's sessions over once, whoever else tries at the same time", async () => {
    const [dead, b, c] = await Promise.all([replica(pg, 'dead'), replica(pg, 'b'), replica(pg, 'c')]);
    await Promise.all([dead.leases.register(), b.leases.register(), c.leases.register()]);
    await dead.store.insert(session(1));
    await dead.store.insert(session(2));
    await c.store.insert(session(3));
    // A live lease is never taken.
    expect(await b.takeover.takeOver('dead')).toBeUndefined();
    expect(await b.leases.route(session(1).id)).toMatchObject({ owner: 'dead', alive: true });

    await new Promise((r) => setTimeout(r, LEASE_MS + 200)); // dead stops renewing; b and c keep theirs
    await Promise.all([b.leases.renew(), c.leases.renew()]);
    expect(await b.leases.expired()).toEqual(['dead']);
    const [fromB, fromC] = await Promise.all([b.takeover.takeOver('dead'), c.takeover.takeOver('dead')]);
    const reports = [fromB, fromC].filter((r) => r !== undefined);
    expect(reports).toHaveLength(1);
    const winner = fromB ? b : c;
    const loser = fromB ? c : b;
    const ids = [session(1).id, session(2).id];
    expect(reports[0]).toEqual({
      replica: 'dead',
      sessions: ids,
      interrupted: 4,
      podsReaped: ['pod-of-dead'],
    });
    expect(winner.calls).toEqual({
      interrupted: [ids],
      plans: [ids],
      adopted: ids,
      reaped: ['dead'],
      hooksFrom: ['dead'],
      // The dead replica's session pods are adopted with its sessions; what is left of its pods is reaped after.
      order: ['adoptFrom dead', ...ids.map((i) => `adopt ${i}`), 'reap dead'],
    });
    expect(loser.calls).toEqual({
      interrupted: [],
      plans: [],
      adopted: [],
      reaped: [],
      hooksFrom: [],
      order: [],
    });
    // Event ids continue where the dead replica's stopped.
    expect(winner.events.publish(session(1).id, 'action.started', {}).id).toBe(42);

    for (const id of ids)
      expect(await loser.leases.route(id)).toMatchObject({ owner: winner.id, alive: true });
    expect(await loser.leases.route(session(3).id)).toMatchObject({ owner: 'c' });
    const [row] = await winner.db.query('SELECT taken_over_by, interrupted FROM replicas WHERE id = $1', [
      'dead',
    ]);
    expect(row).toEqual({ taken_over_by: winner.id, interrupted: 4 });
    // Nothing is left to take over, and the dead replica cannot renew its way back in.
    expect(await winner.leases.expired()).toEqual([]);
    expect(await dead.leases.renew()).toBe(false);
  });

  it('makes requests for a session being adopted wait until it is ready', async () => {
    const [dead, b] = await Promise.all([replica(pg, 'dead'), replica(pg, 'b')]);
    await Promise.all([dead.leases.register(), b.leases.register()]);
    await dead.store.insert(session(7));
    await dead.leases.release(); // a clean stop ends the lease at once
    const running = b.takeover.takeOver('dead');
    // Once the claim has committed (the session's row names b), the session is being adopted: ready() must wait.
    for (;;) {
      const [row] = await b.db.query('SELECT owner FROM sessions WHERE id = $1', [session(7).id]);
      if (row.owner === b.id) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setImmediate(r));
    await b.takeover.ready(session(7).id);
    expect(b.calls.adopted).toEqual([session(7).id]);
    expect(await running).toMatchObject({ sessions: [session(7).id] });
    // A replica with no sessions is taken over too, with nothing to mark.
    const [empty] = await Promise.all([replica(pg, 'empty')]);
    await empty.leases.register();
    await empty.leases.release();
    expect(await b.takeover.takeOver('empty')).toMatchObject({ sessions: [], interrupted: 0 });
    expect(b.calls.interrupted).toEqual([[session(7).id]]);
  });
});
