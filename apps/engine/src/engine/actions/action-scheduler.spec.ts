import { ActionQueueFullError, ActionScheduler } from './action-scheduler';

const tick = () => new Promise((r) => setImmediate(r));

describe('ActionScheduler', () => {
  it('runs one action of a session at a time, in order, while other sessions run alongside', async () => {
    const s = new ActionScheduler({ maxRunning: 4, maxQueued: 10, maxQueuedPerSession: 10 });
    const order: string[] = [];
    const a1 = s.admit('a', 1);
    const a2 = s.admit('a', 1);
    const b1 = s.admit('b', 1);
    void a1.turn().then(() => order.push('a1'));
    void a2.turn().then(() => order.push('a2'));
    void b1.turn().then(() => order.push('b1'));
    await tick();
    expect(order).toEqual(['a1', 'b1']);
    a1.release();
    await tick();
    expect(order).toEqual(['a1', 'b1', 'a2']);
    a2.release();
    b1.release();
    expect(s.stats()).toEqual({ running: 0, queued: 0 });
  });

  it('lets a session run as many actions at once as its concurrency', async () => {
    const s = new ActionScheduler({ maxRunning: 4, maxQueued: 10, maxQueuedPerSession: 10 });
    const tickets = [s.admit('a', 2), s.admit('a', 2), s.admit('a', 2)];
    const started: number[] = [];
    tickets.forEach((t, i) => void t.turn().then(() => started.push(i)));
    await tick();
    expect(started).toEqual([0, 1]);
    tickets[1].release();
    await tick();
    expect(started).toEqual([0, 1, 2]);
  });

  it('caps running actions engine-wide and hands freed slots over in FIFO order', async () => {
    const s = new ActionScheduler({ maxRunning: 1, maxQueued: 10, maxQueuedPerSession: 10 });
    const [a, b, c] = [s.admit('a', 1), s.admit('b', 1), s.admit('c', 1)];
    const started: string[] = [];
    void a.turn().then(() => started.push('a'));
    void b.turn().then(() => started.push('b'));
    void c.turn().then(() => started.push('c'));
    await tick();
    expect(started).toEqual(['a']);
    expect(s.stats()).toEqual({ running: 1, queued: 2 });
    a.release();
    await tick();
    expect(started).toEqual(['a', 'b']);
  });

  it('refuses at once, with a retry hint, when the session or the engine queue is full', () => {
    const s = new ActionScheduler({ maxRunning: 1, maxQueued: 3, maxQueuedPerSession: 2 });
    s.admit('a', 1);
    s.admit('a', 1);
    expect(() => s.admit('a', 1)).toThrow(ActionQueueFullError);
    s.admit('b', 1);
    let error: unknown;
    try {
      s.admit('c', 1);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ActionQueueFullError);
    expect((error as ActionQueueFullError).details.retryAfterSeconds).toBe(1);
    expect((error as ActionQueueFullError).message).toContain('SWITCHYARD_MAX_QUEUED_ACTIONS');
  });

  it('frees the place of an action aborted while waiting, and of one released before its turn', async () => {
    const s = new ActionScheduler({ maxRunning: 1, maxQueued: 10, maxQueuedPerSession: 10 });
    const first = s.admit('a', 1);
    await first.turn();
    const waiting = s.admit('a', 1);
    const abort = new AbortController();
    const turn = waiting.turn(abort.signal);
    abort.abort(new Error('cancelled'));
    await expect(turn).rejects.toThrow('cancelled');
    s.admit('a', 1).release();
    expect(s.stats()).toEqual({ running: 1, queued: 0 });
    first.release();
    const next = s.admit('a', 1);
    await next.turn();
    expect(s.stats()).toEqual({ running: 1, queued: 0 });
    next.release();
    next.release();
    expect(s.stats()).toEqual({ running: 0, queued: 0 });
  });
});
