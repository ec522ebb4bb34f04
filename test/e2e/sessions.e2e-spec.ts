import { existsSync } from 'node:fs';
import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

describe('sessions API', () => {
  let engine: EngineHarness;

  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_SWEEP_INTERVAL_MS: '100' });
  });
  afterAll(() => engine.stop());

  it('creates, lists, gets and deletes a session with its workspace', async () => {
    const created = await engine.request('POST', '/v1/sessions', {
      metadata: { agent: 'a1' },
      ttlSeconds: 600,
    });
    expect(created.status).toBe(201);
    const s = created.body;
    expect(s.id).toMatch(/^ses_[0-9a-f]{24}$/);
    expect(s.metadata).toEqual({ agent: 'a1' });
    expect(new Date(s.expiresAt).getTime() - new Date(s.createdAt).getTime()).toBe(600_000);
    expect(existsSync(engine.workspaceOf(s.id))).toBe(true);

    const list = await engine.request('GET', '/v1/sessions');
    expect(list.status).toBe(200);
    expect(list.body.sessions.map((x: { id: string }) => x.id)).toContain(s.id);

    const got = await engine.request('GET', `/v1/sessions/${s.id}`);
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(s.id);

    const del = await engine.request('DELETE', `/v1/sessions/${s.id}`);
    expect(del.status).toBe(204);
    // The answer comes once the session ended; its workspace goes right after, in the background.
    await engine.tornDown();
    expect(existsSync(engine.workspaceOf(s.id))).toBe(false);
    expect((await engine.request('GET', `/v1/sessions/${s.id}`)).status).toBe(404);
    expect((await engine.request('DELETE', `/v1/sessions/${s.id}`)).status).toBe(404);
  });

  it("reports each session's tenant and activity: actions by status, tiers, the latest start", async () => {
    const none = { actions: 0, byStatus: {}, tiers: [], lastActionAt: null };
    const created = await engine.request('POST', '/v1/sessions');
    expect(created.body).toMatchObject({ tenant: 'open', activity: none });
    const sid: string = created.body.id;
    const idle = await engine.createSession();

    const ok = await engine.action(sid, { type: 'code', language: 'bash', code: 'echo ok' });
    const failed = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: 'raise SystemExit(3)',
    });
    const file = await engine.action(sid, { type: 'file', op: 'write', path: 'a.txt', content: 'x' });
    expect([ok, failed, file].map((a: { status: string; tier: string }) => [a.status, a.tier])).toEqual([
      ['succeeded', 'subprocess'],
      ['failed', 'subprocess'],
      ['succeeded', 'engine'],
    ]);
    const activity = {
      actions: 3,
      byStatus: { succeeded: 2, failed: 1 },
      tiers: ['engine', 'subprocess'],
      lastActionAt: file.startedAt,
    };

    const got = await engine.request('GET', `/v1/sessions/${sid}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: sid, tenant: 'open' });
    expect(got.body.activity).toEqual(activity);

    const list = await engine.request('GET', '/v1/sessions');
    expect(list.status).toBe(200);
    const listed = new Map<string, { tenant: string; activity: unknown }>(
      list.body.sessions.map((s: { id: string; tenant: string; activity: unknown }) => [s.id, s]),
    );
    expect(listed.get(sid)).toMatchObject({ tenant: 'open', activity });
    expect(listed.get(idle)).toMatchObject({ tenant: 'open', activity: none });
    expect(list.body.sessions.every((s: { tenant: string }) => s.tenant === 'open')).toBe(true);
  });

  it('defaults to an empty metadata object and a one-hour TTL', async () => {
    const res = await engine.request('POST', '/v1/sessions');
    expect(res.status).toBe(201);
    expect(res.body.metadata).toEqual({});
    expect(res.body.ttlSeconds).toBe(3600);
  });

  it('answers 404 for unknown sessions on every session route', async () => {
    const id = 'ses_000000000000000000000000';
    for (const [method, url, body] of [
      ['GET', `/v1/sessions/${id}`],
      ['DELETE', `/v1/sessions/${id}`],
      ['POST', `/v1/sessions/${id}/actions`, { type: 'file', op: 'list' }],
      ['GET', `/v1/sessions/${id}/actions`],
      ['GET', `/v1/sessions/${id}/actions/act_x`],
      ['GET', `/v1/sessions/${id}/graph`],
    ] as const) {
      const res = await engine.request(method, url, body);
      expect({ url, method, status: res.status }).toEqual({ url, method, status: 404 });
      expect(res.body.error.message).toContain(id);
    }
  });

  it('rejects a TTL above the configured maximum and bad session bodies', async () => {
    const tooLong = await engine.request('POST', '/v1/sessions', { ttlSeconds: 10 * 24 * 3600 });
    expect(tooLong.status).toBe(400);
    expect(fieldsOf(tooLong.body)).toEqual(['ttlSeconds']);
    const wrong = await engine.request('POST', '/v1/sessions', { ttlSeconds: 'soon', color: 'red' });
    expect(wrong.status).toBe(400);
    const fields = fieldsOf(wrong.body);
    expect(fields).toEqual(expect.arrayContaining(['ttlSeconds', 'color']));
  });

  it('expires idle sessions after their TTL and removes their workspace', async () => {
    const id = await engine.createSession({ ttlSeconds: 1 });
    expect(existsSync(engine.workspaceOf(id))).toBe(true);
    await new Promise((r) => setTimeout(r, 1600));
    expect((await engine.request('GET', `/v1/sessions/${id}`)).status).toBe(404);
    expect(existsSync(engine.workspaceOf(id))).toBe(false);
  });

  it('keeps an active session alive past its TTL', async () => {
    const id = await engine.createSession({ ttlSeconds: 1 });
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 400));
      await engine.action(id, { type: 'file', op: 'write', path: `f${i}.txt`, content: 'x' });
    }
    expect((await engine.request('GET', `/v1/sessions/${id}`)).status).toBe(200);
  });
});

describe('API keys and tenants', () => {
  const keyA = 'tenant-a-key-0123456789';
  const keyB = 'tenant-b-key-0123456789';
  let engine: EngineHarness;

  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_API_KEYS: `${keyA},${keyB}` });
  });
  afterAll(() => engine.stop());

  it('requires a valid bearer token on /v1 but not on /health', async () => {
    engine.as(undefined);
    expect((await engine.request('GET', '/v1/sessions')).status).toBe(401);
    expect((await engine.request('GET', '/health')).status).toBe(200);
    engine.as('not-a-valid-key-at-all');
    expect((await engine.request('GET', '/v1/sessions')).status).toBe(401);
  });

  it('says how to authenticate on a 401: WWW-Authenticate: Bearer, and invalid_token for a key it does not know', async () => {
    engine.as(undefined);
    const missing = await engine.request('GET', '/v1/sessions');
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="switchyard"');
    engine.as('not-a-valid-key-at-all');
    const invalid = await engine.request('POST', '/v1/sessions', {});
    expect(invalid.status).toBe(401);
    expect(invalid.headers.get('www-authenticate')).toMatch(
      /^Bearer realm="switchyard", error="invalid_token"/,
    );
    expect(invalid.body).toEqual({ error: { code: 'UNAUTHENTICATED', message: 'invalid bearer token' } });
    // Answers that are not 401 carry no challenge.
    engine.as(keyA);
    const ok = await engine.request('GET', '/v1/sessions');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('www-authenticate')).toBeNull();
    // The OpenAPI document declares the header on the 401 answers.
    const doc = (await engine.request('GET', '/docs-json')).body;
    expect(doc.paths['/v1/sessions'].get.responses['401'].headers).toEqual({
      'WWW-Authenticate': { $ref: '#/components/headers/WWW-Authenticate' },
    });
    expect(doc.components.headers['WWW-Authenticate'].schema).toMatchObject({ type: 'string' });
  });

  it('tells strangers only the status on /health and /health/ready; key holders get the details', async () => {
    engine.as(undefined);
    const health = await engine.request('GET', '/health');
    expect(health.body).toEqual({ status: 'ok' });
    const ready = await engine.request('GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ok' });
    // Nothing operator-only (tier reasons, host paths, the Docker endpoint) reaches a caller without a key.
    expect(JSON.stringify([health.body, ready.body])).not.toMatch(/tiers|docker|graph|\//);
    engine.as('not-a-valid-key-at-all');
    expect((await engine.request('GET', '/health')).body).toEqual({ status: 'ok' });
    engine.as(keyB);
    const full = await engine.request('GET', '/health');
    expect(full.body).toMatchObject({ status: 'ok', auth: 'api-keys', graph: { store: 'embedded' } });
    expect(Object.keys(full.body.tiers)).toEqual(
      expect.arrayContaining(['subprocess', 'pooled', 'container']),
    );
    const details = await engine.request('GET', '/health/ready');
    expect(Object.keys(details.body.details)).toContain('bubblewrap');
  });

  it('keeps /metrics open by default', async () => {
    engine.as(undefined);
    expect((await engine.request('GET', '/metrics')).status).toBe(200);
  });

  it("hides one tenant's sessions from another (404, not 403)", async () => {
    engine.as(keyA);
    const id = await engine.createSession();
    const own = await engine.request('GET', `/v1/sessions/${id}`);
    expect(own.status).toBe(200);
    // The tenant is a hash of the key, never the key.
    expect(own.body.tenant).toMatch(/^t_[0-9a-f]{16}$/);
    expect(JSON.stringify(own.body)).not.toContain(keyA);

    engine.as(keyB);
    expect((await engine.request('GET', `/v1/sessions/${id}`)).status).toBe(404);
    expect((await engine.request('GET', `/v1/sessions/${id}/graph`)).status).toBe(404);
    expect(
      (await engine.request('POST', `/v1/sessions/${id}/actions`, { type: 'file', op: 'list' })).status,
    ).toBe(404);
    expect((await engine.request('DELETE', `/v1/sessions/${id}`)).status).toBe(404);
    const list = await engine.request('GET', '/v1/sessions');
    expect(list.body.sessions.map((s: { id: string }) => s.id)).not.toContain(id);

    engine.as(keyA);
    expect((await engine.request('GET', `/v1/sessions/${id}`)).status).toBe(200);
  });
});

describe('SWITCHYARD_METRICS_AUTH=api-key', () => {
  const key = 'metrics-key-0123456789';
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_API_KEYS: key, SWITCHYARD_METRICS_AUTH: 'api-key' });
  });
  afterAll(() => engine.stop());

  it('answers /metrics only with a valid key', async () => {
    engine.as(undefined);
    const refused = await engine.request('GET', '/metrics');
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="switchyard"');
    expect(JSON.stringify(refused.body)).not.toContain('switchyard_');
    engine.as('wrong-key-0123456789abc');
    expect((await engine.request('GET', '/metrics')).status).toBe(401);
    engine.as(key);
    const ok = await engine.request('GET', '/metrics');
    expect(ok.status).toBe(200);
    expect(String(ok.body)).toContain('switchyard_actions_total');
  });
});
