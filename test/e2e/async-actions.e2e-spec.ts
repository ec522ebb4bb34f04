import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { SseClient } from '../support/sse-client';
import { fieldsOf } from '../support/error-body';

const bash = (code: string, extra: Record<string, unknown> = {}) => ({
  type: 'code',
  language: 'bash',
  code,
  ...extra,
});

async function pollUntilDone(engine: EngineHarness, sid: string, id: string): Promise<any> {
  for (let i = 0; i < 200; i++) {
    const r = (await engine.request('GET', `/v1/sessions/${sid}/actions/${id}`)).body;
    if (r.status !== 'running') return r;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`action ${id} still running`);
}

describe('asynchronous actions, cancel, live events, idempotency and backpressure', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '0' });
  });
  afterAll(() => engine.stop());

  it('wait:false answers 202 at once; the action shows running, then its result', async () => {
    const sid = await engine.createSession();
    const t0 = Date.now();
    const res = await engine.request(
      'POST',
      `/v1/sessions/${sid}/actions`,
      bash('sleep 1; echo done', { wait: false }),
    );
    expect(res.status).toBe(202);
    expect(Date.now() - t0).toBeLessThan(900);
    expect(res.body).toMatchObject({ sessionId: sid, type: 'code', status: 'running' });
    const running = await engine.request('GET', `/v1/sessions/${sid}/actions/${res.body.id}`);
    expect(running.body.status).toBe('running');
    const done = await pollUntilDone(engine, sid, res.body.id);
    expect(done).toMatchObject({ status: 'succeeded', stdout: 'done\n' });
  });

  it('refuses a wait that is not a boolean, naming the field', async () => {
    const sid = await engine.createSession();
    const res = await engine.request('POST', `/v1/sessions/${sid}/actions`, bash('true', { wait: 'no' }));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual(['wait']);
  });

  it('cancels a running action (and the one queued behind it); 409 once ended, 404 when unknown', async () => {
    const sid = await engine.createSession();
    const long = (
      await engine.request('POST', `/v1/sessions/${sid}/actions`, bash('sleep 30', { wait: false }))
    ).body;
    const queued = (
      await engine.request(
        'POST',
        `/v1/sessions/${sid}/actions`,
        bash('echo never > never.txt', { wait: false }),
      )
    ).body;
    await new Promise((r) => setTimeout(r, 300));
    // The queued one first: cancelling the running one would hand it the session's slot.
    const queuedCancel = await engine.request('POST', `/v1/sessions/${sid}/actions/${queued.id}/cancel`);
    expect(queuedCancel.body).toMatchObject({
      status: 'cancelled',
      error: { message: 'cancelled: cancel requested' },
    });
    const t0 = Date.now();
    const cancelled = await engine.request('POST', `/v1/sessions/${sid}/actions/${long.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: long.id, status: 'cancelled', error: { class: 'cancelled' } });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(() => readFileSync(path.join(engine.workspaceOf(sid), 'never.txt'))).toThrow();

    const again = await engine.request('POST', `/v1/sessions/${sid}/actions/${long.id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('ACTION_ENDED');
    expect((await engine.request('POST', `/v1/sessions/${sid}/actions/act_nope/cancel`)).status).toBe(404);
  });

  it('runs a session actions one at a time by default, and side by side with maxConcurrentActions', async () => {
    const span = async (sid: string): Promise<number> => {
      const code = 'date +%s%N; sleep 0.6; date +%s%N';
      const [a, b] = await Promise.all([engine.action(sid, bash(code)), engine.action(sid, bash(code))]);
      const [a0, a1] = a.stdout.trim().split('\n').map(Number);
      const [b0, b1] = b.stdout.trim().split('\n').map(Number);
      return (Math.max(a1, b1) - Math.min(a0, b0)) / 1e6;
    };
    expect(await span(await engine.createSession())).toBeGreaterThanOrEqual(1150);
    expect(await span(await engine.createSession({ maxConcurrentActions: 2 }))).toBeLessThan(1100);
  });

  it('streams output chunks before the action ends, and resumes with Last-Event-ID', async () => {
    const sid = await engine.createSession();
    const url = `${engine.baseUrl}/v1/sessions/${sid}/events`;
    const sse = await SseClient.open(url);
    const res = await engine.request(
      'POST',
      `/v1/sessions/${sid}/actions`,
      bash('echo first; sleep 1.5; echo second', { wait: false }),
    );
    const id = res.body.id;
    const started = await sse.waitFor((e) => e.event === 'action.started' && e.data.actionId === id);
    const first = await sse.waitFor((e) => e.event === 'action.output' && e.data.chunk.includes('first'));
    // The chunk came while the action was still running.
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions/${id}`)).body.status).toBe('running');
    const completed = await sse.waitFor((e) => e.event === 'action.completed' && e.data.actionId === id);
    expect(completed.data.status).toBe('succeeded');
    expect(first.receivedAt).toBeLessThan(completed.receivedAt - 1000);
    expect(first.data).toMatchObject({ actionId: id, stream: 'stdout' });
    expect(started.id).toBeLessThan(first.id!);
    sse.close();

    const resumed = await SseClient.open(url, { 'Last-Event-ID': String(first.id) });
    const replayed = await resumed.waitFor((e) => e.event === 'action.completed');
    expect(replayed.id).toBe(completed.id);
    expect(resumed.events.every((e) => e.id! > first.id!)).toBe(true);
    expect(resumed.events.some((e) => e.event === 'action.output' && e.data.chunk.includes('second'))).toBe(
      true,
    );
    await engine.request('DELETE', `/v1/sessions/${sid}`);
    await resumed.waitFor((e) => e.event === 'session.ended');
    resumed.close();
  });

  it('an Idempotency-Key returns the first answer without running again; another body under it is 422', async () => {
    const sid = await engine.createSession();
    const body = bash('echo tick >> counter.txt; wc -l < counter.txt');
    const send = (b: unknown, key: string) =>
      engine.request('POST', `/v1/sessions/${sid}/actions`, b, { headers: { 'Idempotency-Key': key } });
    const first = await send(body, 'key-1');
    const second = await send(body, 'key-1');
    expect(second.status).toBe(200);
    expect(second.body.id).toBe(first.body.id);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(readFileSync(path.join(engine.workspaceOf(sid), 'counter.txt'), 'utf8')).toBe('tick\n');
    const [c, d] = await Promise.all([send(body, 'key-2'), send(body, 'key-2')]);
    expect(c.body.id).toBe(d.body.id);
    expect(readFileSync(path.join(engine.workspaceOf(sid), 'counter.txt'), 'utf8')).toBe('tick\ntick\n');

    const other = await send(bash('echo other'), 'key-1');
    expect(other.status).toBe(422);
    expect(other.body.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const async1 = await send(bash('echo a', { wait: false }), 'key-3');
    const async2 = await send(bash('echo a', { wait: false }), 'key-3');
    expect(async1.status).toBe(202);
    expect(async2.body.id).toBe(async1.body.id);
  });
});

describe('backpressure', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({
      SWITCHYARD_MAX_CONCURRENT_ACTIONS: '1',
      SWITCHYARD_MAX_QUEUED_ACTIONS: '2',
      SWITCHYARD_SESSION_MAX_QUEUED: '1',
      SWITCHYARD_POOL_MIN: '0',
    });
  });
  afterAll(() => engine.stop());

  it('answers 429 with Retry-After at once when full, without hurting running work', async () => {
    const a = await engine.createSession();
    const b = await engine.createSession();
    const c = await engine.createSession();
    const post = (sid: string, code: string) =>
      engine.request('POST', `/v1/sessions/${sid}/actions`, bash(code, { wait: false }));
    const running = await post(a, 'sleep 1; echo survived');
    expect(running.status).toBe(202);
    expect((await post(a, 'echo queued-a')).status).toBe(202);
    const t0 = Date.now();
    const sessionFull = await post(a, 'echo too-many');
    expect(sessionFull.status).toBe(429);
    expect(sessionFull.headers.get('retry-after')).toBe('1');
    expect(sessionFull.body.error.code).toBe('QUEUE_FULL');
    expect((await post(b, 'echo queued-b')).status).toBe(202);
    const engineFull = await post(c, 'echo too-many');
    expect(engineFull.status).toBe(429);
    expect(Date.now() - t0).toBeLessThan(500);

    const done = await pollUntilDone(engine, a, running.body.id);
    expect(done).toMatchObject({ status: 'succeeded', stdout: 'survived\n' });
    // Nothing refused was recorded; the queued ones ran.
    const timeline = (await engine.request('GET', `/v1/sessions/${a}/actions`)).body.actions;
    expect(timeline).toHaveLength(2);
    const later = await pollUntilDone(engine, a, timeline[1].id);
    expect(later.stdout).toBe('queued-a\n');
  });
});

describe('resuming events the buffer no longer holds', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_EVENTS_BUFFER: '10' });
  });
  afterAll(() => engine.stop());

  it('starts the replay with an events.gap event naming the first and last missing ids', async () => {
    const sid = await engine.createSession();
    const url = `${engine.baseUrl}/v1/sessions/${sid}/events`;
    // Eight file actions publish 16 events (started, completed): the buffer keeps the last 10, ids 7 to 16.
    for (let i = 0; i < 8; i++)
      await engine.action(sid, { type: 'file', op: 'write', path: `f${i}`, content: 'x' });
    const resumed = await SseClient.open(url, { 'Last-Event-ID': '2' });
    await resumed.waitFor((e) => e.id === 16);
    const [gap, ...replay] = resumed.events;
    expect(gap.event).toBe('events.gap');
    // No id of its own: a client's Last-Event-ID stays at the last event it saw.
    expect(gap.id).toBeUndefined();
    expect(gap.data).toMatchObject({ firstMissingId: 3, lastMissingId: 6, missing: 4 });
    expect(gap.data.message).toContain(`GET /v1/sessions/${sid}/actions`);
    expect(replay.map((e) => e.id)).toEqual([7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    resumed.close();

    // A client that missed nothing still kept gets no gap; nor does one that asks only for what is buffered.
    for (const headers of [{ 'Last-Event-ID': '6' }, {}] as Record<string, string>[]) {
      const sse = await SseClient.open(url, headers);
      await sse.waitFor((e) => e.id === 16);
      expect(sse.events.map((e) => e.event)).not.toContain('events.gap');
      expect(sse.events[0].id).toBe(7);
      sse.close();
    }
    // The query parameter resumes the same way.
    const byQuery = await SseClient.open(`${url}?lastEventId=0`);
    const first = await byQuery.waitFor(() => true);
    expect(first).toMatchObject({ event: 'events.gap', data: { firstMissingId: 1, lastMissingId: 6 } });
    byQuery.close();
    await engine.request('DELETE', `/v1/sessions/${sid}`);
  });
});
