import { EngineHarness } from '../support/engine-harness';

describe('context graph and timeline', () => {
  let engine: EngineHarness;
  let sid: string;

  beforeAll(async () => {
    engine = await EngineHarness.start();
    sid = await engine.createSession({ metadata: { purpose: 'graph' } });
  });
  afterAll(() => engine.stop());

  it('links session → actions (HAS_ACTION, NEXT) and actions → files (READ, WROTE)', async () => {
    const w = await engine.action(sid, {
      type: 'file',
      op: 'write',
      path: 'data.csv',
      content: 'a,b\n1,2\n',
    });
    const r = await engine.action(sid, { type: 'file', op: 'read', path: 'data.csv' });
    const c = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: "open('out.txt','w').write(open('data.csv').read().upper())",
    });
    expect(c.status).toBe('succeeded');

    const g = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const node = (id: string) => g.nodes.find((n: { id: string }) => n.id === id);
    const has = (from: string, to: string, type: string) =>
      g.edges.some(
        (e: { from: string; to: string; type: string }) => e.from === from && e.to === to && e.type === type,
      );

    expect(node(sid)).toMatchObject({ label: 'Session' });
    for (const a of [w, r, c]) {
      expect(node(a.id)).toMatchObject({ label: 'Action' });
      expect(has(sid, a.id, 'HAS_ACTION')).toBe(true);
    }
    expect(has(w.id, r.id, 'NEXT')).toBe(true);
    expect(has(r.id, c.id, 'NEXT')).toBe(true);
    const csv = `file:${sid}:data.csv`;
    const out = `file:${sid}:out.txt`;
    expect(node(csv)).toMatchObject({ label: 'File', properties: { path: 'data.csv' } });
    expect(has(w.id, csv, 'WROTE')).toBe(true);
    expect(has(r.id, csv, 'READ')).toBe(true);
    // Code actions record the workspace files they changed.
    expect(has(c.id, out, 'WROTE')).toBe(true);
    expect(node(c.id).properties).toMatchObject({
      status: 'succeeded',
      tier: 'subprocess',
      operation: 'python',
    });
  });

  it('serves the timeline oldest first with cursor pagination, and single actions with their input', async () => {
    const s2 = await engine.createSession();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push((await engine.action(s2, { type: 'file', op: 'write', path: `f${i}`, content: `${i}` })).id);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const q = `limit=3${cursor ? `&cursor=${cursor}` : ''}`;
      const page = await engine.request('GET', `/v1/sessions/${s2}/actions?${q}`);
      expect(page.status).toBe(200);
      expect(page.body.actions.length).toBeLessThanOrEqual(3);
      seen.push(...page.body.actions.map((a: { id: string }) => a.id));
      cursor = page.body.nextCursor;
      // The cursor is the seq of the page's last action, in decimal.
      if (cursor !== undefined) expect(cursor).toBe(String(page.body.actions.at(-1).seq));
    } while (cursor);
    expect(seen).toEqual(ids);

    const one = await engine.request('GET', `/v1/sessions/${s2}/actions/${ids[2]}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({
      id: ids[2],
      seq: 3,
      status: 'succeeded',
      input: { op: 'write', path: 'f2' },
    });
    expect(one.body.files).toEqual([{ path: 'f2', access: 'write' }]);

    expect((await engine.request('GET', `/v1/sessions/${s2}/actions/act_nope`)).status).toBe(404);
    // Another session's action id is not reachable through this session.
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions/${ids[0]}`)).status).toBe(404);
  });

  it('records a refused browser navigation as denied, with the reason', async () => {
    const res = await engine.action(sid, { type: 'browser', op: 'navigate', url: 'http://127.0.0.1/' });
    expect(res).toMatchObject({ status: 'denied', tier: 'browser', error: { class: 'policy' } });
    expect(res.error.message).toContain('loopback');
    const g = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const node = g.nodes.find((n: { id: string }) => n.id === res.id);
    expect(node.properties).toMatchObject({ status: 'denied', tier: 'browser', operation: 'navigate' });
  });
});

describe('health and OpenAPI', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start();
  });
  afterAll(() => engine.stop());

  it('GET /health reports liveness and each tier', async () => {
    const res = await engine.request('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    expect(res.body.auth).toBe('open');
    expect(res.body.tiers.subprocess.available).toBe(true);
    expect(res.body.tiers.pooled.available).toBe(true);
    expect(res.body.tiers.container.available).toBe(true);
    expect(res.body.tiers.browser).toMatchObject({ available: true });
  });

  it('serves the OpenAPI document with the action schemas', async () => {
    const json = await engine.request('GET', '/docs-json');
    expect(json.status).toBe(200);
    expect(json.body.paths['/v1/sessions/{sessionId}/actions'].post).toBeDefined();
    expect(json.body.components.schemas.CodeActionDto.properties.language.enum).toEqual([
      'python',
      'node',
      'bash',
    ]);
    expect(json.body.components.schemas.FileWriteDto.required).toEqual(
      expect.arrayContaining(['path', 'content']),
    );
    const ui = await engine.request('GET', '/docs');
    expect(ui.status).toBe(200);
    expect(String(ui.body)).toContain('swagger');
  });
});
