import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

const bash = (code: string, extra: Record<string, unknown> = {}) => ({
  type: 'code',
  language: 'bash',
  code,
  ...extra,
});

describe('reflection: retries with revised actions', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_MAX_RETRY_DEPTH: '3', SWITCHYARD_POOL_MIN: '1' });
  });
  afterAll(() => engine.stop());

  const retry = (sid: string, id: string, body: Record<string, unknown> = {}) =>
    engine.request('POST', `/v1/sessions/${sid}/actions/${id}/retry`, body);

  it('runs the revised action linked to the original by RETRY_OF, with the reason', async () => {
    const sid = await engine.createSession();
    const failed = await engine.action(sid, bash('cat nope.txt'));
    expect(failed.status).toBe('failed');
    const res = await retry(sid, failed.id, {
      action: bash('echo fixed'),
      reason: 'the file does not exist',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', stdout: 'fixed\n' });
    const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${res.body.id}`)).body;
    expect(view.retryOf).toBe(failed.id);
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const edge = graph.edges.find((e: any) => e.type === 'RETRY_OF');
    expect(edge).toMatchObject({
      from: res.body.id,
      to: failed.id,
      properties: { reason: 'the file does not exist' },
    });
    // Without a revised action the original input runs again.
    const same = await retry(sid, failed.id);
    expect(same.body).toMatchObject({ status: 'failed' });
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions/${same.body.id}`)).body.input.code).toBe(
      'cat nope.txt',
    );
  });

  it('refuses a chain deeper than SWITCHYARD_MAX_RETRY_DEPTH', async () => {
    const sid = await engine.createSession();
    let last = (await engine.action(sid, bash('exit 1'))).id;
    for (let i = 0; i < 3; i++) last = (await retry(sid, last)).body.id;
    const refused = await retry(sid, last);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain('SWITCHYARD_MAX_RETRY_DEPTH');
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions).toHaveLength(4);
    expect((await retry(sid, 'act_missing')).status).toBe(404);
  });

  it('escalates a timed-out action one tier up, and never runs a retry in a weaker tier', async () => {
    const sid = await engine.createSession();
    const slow = await engine.action(sid, bash('sleep 5', { timeoutMs: 300 }));
    expect(slow).toMatchObject({ status: 'timed_out', tier: 'subprocess' });
    const escalated = await retry(sid, slow.id, {
      action: bash('echo up', { timeoutMs: 20_000 }),
      escalate: true,
    });
    expect(escalated.body).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: 'up\n' });
    // A retry of the pooled action asking for the subprocess tier still runs pooled.
    const lower = await retry(sid, escalated.body.id, { action: bash('echo again', { tier: 'subprocess' }) });
    expect(lower.body).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    // …and says so: the answer's risk reasons name the tier asked for and the floor it ran at instead.
    expect(lower.body.risk.reasons).toContainEqual(
      expect.stringMatching(/tier "subprocess" was asked for but "pooled"/),
    );

    const plainFailure = await engine.action(sid, bash('exit 2'));
    const notLimited = await retry(sid, plainFailure.id, { escalate: true });
    // How the original ended is the action's state: a conflict (409), naming the field, as "no stronger tier" is.
    expect(notLimited.status).toBe(409);
    expect(notLimited.body.error.code).toBe('RETRY_REFUSED');
    expect(fieldsOf(notLimited.body)).toEqual(['escalate']);
    const file = await engine.action(sid, { type: 'file', op: 'read', path: 'missing.txt' });
    const notCode = await retry(sid, file.id, { escalate: true });
    expect(notCode.status).toBe(409);
    expect(notCode.body.error.message).toContain('is a file action');
    const revised = await retry(sid, file.id, {
      escalate: true,
      action: { type: 'file', op: 'read', path: 'other.txt' },
    });
    expect(revised.status).toBe(400);
    expect(fieldsOf(revised.body)).toEqual(['escalate']);
  });
});
