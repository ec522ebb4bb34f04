import { EngineHarness, LogCapture } from '../support/engine-harness';

/** The value of one sample of a Prometheus text exposition, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
      return Number(line.split(' ').pop());
  }
  return 0;
}

describe('observability', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '1' });
  });
  afterAll(() => engine.stop());

  const metrics = async (): Promise<string> => {
    const res = await fetch(`${engine.baseUrl}/metrics`);
    expect(res.headers.get('content-type')).toContain('text/plain');
    return res.text();
  };

  it('/metrics shows the action, risk, duration and HTTP counters moving after actions', async () => {
    const before = await metrics();
    const sid = await engine.createSession();
    await engine.action(sid, { type: 'code', language: 'bash', code: 'echo hi' });
    await engine.action(sid, { type: 'code', language: 'bash', code: 'exit 1' });
    await engine.action(sid, { type: 'file', op: 'write', path: 'a.txt', content: 'x' });
    const after = await metrics();
    const delta = (name: string, labels: Record<string, string>) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(delta('switchyard_actions_total', { type: 'code', tier: 'subprocess', status: 'succeeded' })).toBe(
      1,
    );
    expect(delta('switchyard_actions_total', { type: 'code', tier: 'subprocess', status: 'failed' })).toBe(1);
    expect(delta('switchyard_actions_total', { type: 'file', tier: 'engine', status: 'succeeded' })).toBe(1);
    expect(delta('switchyard_action_risk_total', { level: 'low' })).toBe(2);
    expect(delta('switchyard_action_duration_seconds_count', { tier: 'subprocess' })).toBe(2);
    expect(
      delta('switchyard_http_requests_total', {
        method: 'POST',
        route: '/v1/sessions/:sessionId/actions',
        status: '200',
      }),
    ).toBe(3);
    expect(after).toMatch(/^switchyard_pool_containers\{state="idle"\} \d+/m);
    expect(after).toMatch(/^switchyard_actions_in_flight\{state="queued"\} 0/m);
    expect(after).toMatch(/^switchyard_browser_contexts\{route="shared"\} \d+/m);
    expect(after).toMatch(/^switchyard_graph_outbox_backlog 0$/m);
    expect(after).toContain('switchyard_process_cpu_seconds_total');
  });

  it('/health/live answers and /health/ready has one indicator per dependency', async () => {
    expect((await engine.request('GET', '/health/live')).body).toEqual({ status: 'ok' });
    const ready = await engine.request('GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(Object.keys(ready.body.details).sort()).toEqual(
      ['bubblewrap', 'chromium', 'container_runtime', 'docker', 'engine', 'graph', 'sandbox_image'].sort(),
    );
    for (const indicator of Object.values(ready.body.details))
      expect(indicator).toMatchObject({ status: 'up' });
  });

  it('/health/ready says shutting_down (503) during graceful shutdown', async () => {
    const own = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '0' });
    const sid = await own.createSession();
    const long = own.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'sleep 3',
    });
    await new Promise((r) => setTimeout(r, 300));
    const stopping = own.stop();
    await new Promise((r) => setTimeout(r, 200));
    const ready = await own.request('GET', '/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.error).toMatchObject({
      code: 'NOT_READY',
      message: expect.stringContaining('engine (shutting_down)'),
    });
    expect(ready.body.error.details.indicators.engine).toEqual({ status: 'down', reason: 'shutting_down' });
    expect((await long).body.status).toBe('succeeded');
    await stopping;
  });

  it('logs one JSON line per action with the request id the result also carries; the level comes from config', async () => {
    const logs = new LogCapture();
    const own = await EngineHarness.start(
      { SWITCHYARD_LOG_LEVEL: 'info', SWITCHYARD_POOL_MIN: '0' },
      { logs },
    );
    try {
      const sid = await own.createSession();
      const res = await own.request(
        'POST',
        `/v1/sessions/${sid}/actions`,
        { type: 'code', language: 'bash', code: 'echo traced' },
        { headers: { 'X-Request-Id': 'agent-req-42' } },
      );
      expect(res.headers.get('x-request-id')).toBe('agent-req-42');
      expect(res.body.requestId).toBe('agent-req-42');
      const line = logs.lines.find(
        (l) => (l.msg as string | undefined) === 'action' && l.actionId === res.body.id,
      );
      expect(line).toMatchObject({
        level: 30,
        requestId: 'agent-req-42',
        sessionId: sid,
        tier: 'subprocess',
        status: 'succeeded',
      });
      expect(typeof line!.time).toBe('string');
      // A generated id when the caller sends none (or an unusable one).
      const generated = await own.request(
        'POST',
        `/v1/sessions/${sid}/actions`,
        { type: 'code', language: 'bash', code: 'true' },
        { headers: { 'X-Request-Id': 'bad id with spaces' } },
      );
      expect(generated.body.requestId).toMatch(/^req_[0-9a-f]{16}$/);
    } finally {
      await own.stop();
    }
    // One line at shutdown says what was drained.
    const drained = logs.lines.find(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('shutdown: drained'),
    );
    expect(drained).toMatchObject({ finished: 0, cancelled: 0 });
    // Nest's start-up chatter (modules initialized, routes mapped) is not at info.
    expect(logs.lines.some((l) => l.context === 'RouterExplorer' || l.context === 'InstanceLoader')).toBe(
      false,
    );
    const quiet = new LogCapture();
    const warnOnly = await EngineHarness.start(
      { SWITCHYARD_LOG_LEVEL: 'warn', SWITCHYARD_POOL_MIN: '0' },
      { logs: quiet },
    );
    try {
      await warnOnly.action(await warnOnly.createSession(), { type: 'code', language: 'bash', code: 'true' });
      expect(quiet.lines.some((l) => l.msg === 'action')).toBe(false);
      expect(quiet.lines.every((l) => (l.level as number) >= 40)).toBe(true);
    } finally {
      await warnOnly.stop();
    }
  });

  it('writes human-readable lines with SWITCHYARD_LOG_FORMAT=pretty, and says how many actions shutdown drained', async () => {
    const logs = new LogCapture();
    const own = await EngineHarness.start(
      { SWITCHYARD_LOG_FORMAT: 'pretty', SWITCHYARD_LOG_LEVEL: 'info', SWITCHYARD_POOL_MIN: '0' },
      { logs },
    );
    const sid = await own.createSession();
    await own.action(sid, { type: 'code', language: 'bash', code: 'echo readable' });
    const running = own.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'sleep 30',
    });
    await new Promise((r) => setTimeout(r, 300));
    await own.stop();
    await running;
    // Not JSON: time, level, context and message first, then key=value fields.
    expect(logs.lines).toEqual([]);
    const action = logs.raw.find((l) => / INFO +\[Action\] action /.test(l));
    expect(action).toMatch(/^\d\d:\d\d:\d\d INFO +\[Action\] action .*status=succeeded/);
    const drained = logs.raw.find((l) => l.includes('shutdown: drained'));
    expect(drained).toContain('1 cancelled');
  });
});
