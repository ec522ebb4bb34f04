import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ActionCompletion, ActionStart } from '../context-graph.types';
import { SqliteContextGraph } from '../embedded/sqlite-context-graph';
import { type ForwarderTimers, OutboxForwarder } from './outbox-forwarder';
import type { ReplicaChanges, ReplicaTarget } from './replication.types';

/** A replica that records what it was given and fails while told to. */
class RecordingReplica implements ReplicaTarget {
  readonly applied: ReplicaChanges[] = [];
  pings = 0;
  down: Error | undefined;
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;

  async applyReplica(changes: ReplicaChanges): Promise<void> {
    await this.gate;
    if (this.down) throw this.down;
    this.applied.push(structuredClone(changes));
  }

  async ping(): Promise<void> {
    this.pings++;
    if (this.down) throw this.down;
  }

  /** Holds every apply until `release()`. */
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  ids(): string[] {
    return this.applied.flatMap((c) => [...c.sessions.map((s) => s.id), ...c.actions.map((a) => a.id)]);
  }
}

/** Timers that fire only when the test says so, and remember the delays asked for. */
class ManualTimers implements ForwarderTimers {
  readonly delays: number[] = [];
  private pending = new Map<number, () => void>();
  private next = 1;

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.next++;
    this.delays.push(ms);
    this.pending.set(id, callback);
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  get scheduled(): number {
    return this.pending.size;
  }

  fireAll(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    due.forEach((callback) => callback());
  }
}

/** Lets the forwarder work for a moment (its acks are fsynced SQLite commits, so real time passes). */
const settle = (ms = 100): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds (polling), failing the test after two seconds. */
async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met in time: ${check.toString()}`);
    await settle(5);
  }
}

const T = '2025-01-01T00:00:00.000Z';
const start = (id: string, sessionId: string): ActionStart => ({
  id,
  sessionId,
  type: 'file',
  operation: 'write',
  input: { path: id, content: 'x'.repeat(100) },
  inputSummary: `write ${id}`,
  inputHash: '0'.repeat(64),
  startedAt: T,
  tier: 'engine',
  risk: { score: 0, level: 'low', reasons: [] },
});
const done = (id: string, sessionId: string): ActionCompletion => ({
  status: 'succeeded',
  endedAt: T,
  durationMs: 1,
  tier: 'engine',
  risk: { score: 0, level: 'low', reasons: [] },
  outputExcerpt: '',
  files: [{ path: id, access: 'write' }],
  result: {
    id,
    sessionId,
    type: 'file',
    status: 'succeeded',
    truncated: { stdout: false, stderr: false },
    durationMs: 1,
    startedAt: T,
    tier: 'engine',
    risk: { score: 0, level: 'low', reasons: [] },
  },
});

describe('OutboxForwarder', () => {
  let dir: string;
  let local: SqliteContextGraph;
  let replica: RecordingReplica;
  let timers: ManualTimers;
  let forwarder: OutboxForwarder;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'forwarder-'));
    local = new SqliteContextGraph({ sqlitePath: join(dir, 'graph.db'), outbox: true });
    await local.init();
    replica = new RecordingReplica();
    timers = new ManualTimers();
    forwarder = new OutboxForwarder(local, replica, {
      timers,
      random: () => 0.5, // jitter factor 0.75
      initialBackoffMs: 100,
      maxBackoffMs: 1000,
      batchEntries: 3,
      lingerMs: 0,
    });
  });
  afterEach(async () => {
    replica.release();
    await forwarder.close();
    await local.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function history(): Promise<void> {
    await local.recordSession({ id: 's', tenant: 't', createdAt: T, metadata: {} });
    for (const id of ['a1', 'a2', 'a3']) {
      await local.recordActionStarted(start(id, 's'));
      await local.recordActionCompleted(id, done(id, 's'));
    }
  }

  it('copies the outbox in order, in bounded batches, and acknowledges what was copied', async () => {
    await history();
    expect(forwarder.state()).toEqual({ status: 'ok', failures: 0, backlog: 7 });
    forwarder.start();
    await until(() => forwarder.state().backlog === 0);

    // 7 entries, 3 per batch: [s, a1 start, a1 done] [a2, a2, a3] [a3]; each record once per batch.
    expect(replica.applied.map((c) => [c.sessions.map((s) => s.id), c.actions.map((a) => a.id)])).toEqual([
      [['s'], ['a1']],
      [[], ['a2', 'a3']],
      [[], ['a3']],
    ]);
    // A batch carries the current state, so a1 arrives already completed, with its predecessor for NEXT.
    expect(replica.applied[0].actions[0]).toMatchObject({
      status: 'succeeded',
      seq: 1,
      files: [{ path: 'a1' }],
    });
    expect(replica.applied[1].actions.map((a) => a.prevId)).toEqual(['a1', 'a2']);
    expect(forwarder.state()).toEqual({ status: 'ok', failures: 0, backlog: 0 });
    expect(local.outboxSize()).toBe(0);
  });

  it('wakes on new writes, including ones made while a copy is in flight', async () => {
    forwarder.start();
    replica.hold();
    await local.recordSession({ id: 's', tenant: 't', createdAt: T, metadata: {} });
    forwarder.wake();
    await settle();
    await local.recordActionStarted(start('a1', 's'));
    forwarder.wake(); // arrives while the first copy waits
    replica.release();
    await until(() => forwarder.state().backlog === 0);
    expect(replica.ids()).toEqual(['s', 'a1']);
    expect(forwarder.state().backlog).toBe(0);
  });

  it('keeps everything while the replica is down, backs off exponentially, then drains when it returns', async () => {
    replica.down = new Error('connect ECONNREFUSED 127.0.0.1:7687');
    await history();
    forwarder.start();
    await settle();
    expect(forwarder.state()).toEqual({
      status: 'degraded',
      failures: 1,
      backlog: 7,
      error: 'connect ECONNREFUSED 127.0.0.1:7687',
    });

    // Writes while degraded wait for the retry timer instead of hitting the replica again.
    await local.recordActionStarted(start('a4', 's'));
    forwarder.wake();
    await settle();
    expect(timers.scheduled).toBe(1);

    for (let i = 0; i < 5; i++) {
      timers.fireAll();
      await settle();
    }
    // 100, 200, 400, 800, 1000 (capped), 1000, each × 0.75 jitter.
    expect(timers.delays).toEqual([75, 150, 300, 600, 750, 750]);
    expect(forwarder.state()).toMatchObject({ status: 'degraded', failures: 6, backlog: 8 });
    expect(replica.applied).toEqual([]);

    replica.down = undefined;
    timers.fireAll();
    await until(() => forwarder.state().backlog === 0);
    expect(forwarder.state()).toEqual({ status: 'ok', failures: 0, backlog: 0 });
    expect(replica.ids()).toEqual(['s', 'a1', 'a2', 'a3', 'a3', 'a4']);
  });

  it('after a failure seen elsewhere, pings the replica until it answers', async () => {
    forwarder.start();
    await settle();
    replica.down = new Error('down');
    forwarder.reportFailure(new Error('read failed'));
    expect(forwarder.state()).toMatchObject({ status: 'degraded', error: 'read failed', backlog: 0 });
    timers.fireAll();
    await settle();
    expect(replica.pings).toBe(1);
    expect(forwarder.state()).toMatchObject({ status: 'degraded', failures: 2 });
    replica.down = undefined;
    timers.fireAll();
    await settle();
    expect(replica.pings).toBe(2);
    expect(forwarder.state()).toEqual({ status: 'ok', failures: 0, backlog: 0 });
  });

  it('lingers after a wake, so a burst of writes is copied in one batch', async () => {
    const lingering = new OutboxForwarder(local, replica, { timers, lingerMs: 20 });
    await history();
    for (let i = 0; i < 5; i++) lingering.wake();
    expect(timers.delays).toEqual([20]);
    expect(replica.applied).toEqual([]);
    timers.fireAll();
    await until(() => lingering.state().backlog === 0);
    expect(replica.applied).toHaveLength(1);
    await lingering.close();
  });

  it('close waits for the copy in flight, clears its timer, and ignores later wakes', async () => {
    await history();
    replica.hold();
    forwarder.start();
    await settle();
    const closing = forwarder.close();
    replica.release();
    await closing;
    expect(replica.applied).toHaveLength(1); // the batch in flight finished, no further batch started
    await local.recordActionStarted(start('a9', 's'));
    forwarder.wake();
    forwarder.reportFailure(new Error('late'));
    await settle();
    expect(replica.applied).toHaveLength(1);
    expect(timers.scheduled).toBe(0);
  });

  it('drain resolves true once everything is copied, false when time runs out', async () => {
    const real = new OutboxForwarder(local, replica);
    await history();
    real.start();
    await expect(real.drain(5000)).resolves.toBe(true);
    replica.down = new Error('down');
    await local.recordActionStarted(start('a4', 's'));
    real.wake();
    await expect(real.drain(100)).resolves.toBe(false);
    await real.close();
  });
});
