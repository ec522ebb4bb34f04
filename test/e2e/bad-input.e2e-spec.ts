import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

describe('bad input', () => {
  let engine: EngineHarness;
  let sid: string;
  const url = (): string => `/v1/sessions/${sid}/actions`;

  beforeAll(async () => {
    engine = await EngineHarness.start({
      SWITCHYARD_MAX_BODY_BYTES: '65536',
      SWITCHYARD_MAX_CODE_BYTES: '1024',
    });
    sid = await engine.createSession();
  });
  afterAll(() => engine.stop());

  afterEach(async () => {
    // The engine keeps serving after every bad request.
    const ok = await engine.action(sid, { type: 'file', op: 'list' });
    expect(ok.status).toBe('succeeded');
  });

  it('malformed JSON → 400', async () => {
    const res = await engine.request('POST', url(), undefined, { raw: '{"type": "code", ' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('MALFORMED_JSON');
    expect(fieldsOf(res.body)).toEqual(['body']);
  });

  it('a JSON value that is not an object → 400', async () => {
    for (const raw of ['[1,2]', '"code"', '42', 'null']) {
      const res = await engine.request('POST', url(), undefined, { raw });
      expect(res.status).toBe(400);
    }
  });

  it('a null body where an optional object body goes → 400 naming it (no body at all is {})', async () => {
    const { body: action } = await engine.request<{ id: string }>('POST', url(), {
      type: 'code',
      language: 'bash',
      code: 'true',
    });
    for (const path of [
      '/v1/sessions',
      `/v1/sessions/${sid}/checkpoints`,
      `/v1/sessions/${sid}/fork`,
      `/v1/sessions/${sid}/actions/${action.id}/retry`,
    ]) {
      const res = await engine.request('POST', path, undefined, { raw: 'null' });
      expect({ path, status: res.status, fields: fieldsOf(res.body) }).toEqual({
        path,
        status: 400,
        fields: ['body'],
      });
    }
    expect((await engine.request('POST', '/v1/sessions')).status).toBe(201);
  });

  it('unknown fields → 400 naming them', async () => {
    const res = await engine.request('POST', url(), {
      type: 'code',
      language: 'python',
      code: '1',
      shell: true,
      x: 1,
    });
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual(expect.arrayContaining(['shell', 'x']));
  });

  it('wrong types → 400 naming each field', async () => {
    const res = await engine.request('POST', url(), {
      type: 'code',
      language: 'python',
      code: 42,
      timeoutMs: '100',
      env: 'A=1',
    });
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual(expect.arrayContaining(['code', 'timeoutMs', 'env']));
  });

  it('unknown type, op and language → 400', async () => {
    const t = await engine.request('POST', url(), { type: 'shell', code: 'ls' });
    expect(t.status).toBe(400);
    expect(fieldsOf(t.body)).toEqual(['type']);
    const op = await engine.request('POST', url(), { type: 'file', op: 'chmod', path: 'a' });
    expect(op.status).toBe(400);
    expect(fieldsOf(op.body)).toEqual(['op']);
    const lang = await engine.request('POST', url(), { type: 'code', language: 'ruby', code: 'p 1' });
    expect(lang.status).toBe(400);
    expect(fieldsOf(lang.body)).toEqual(['language']);
    const tier = await engine.request('POST', url(), {
      type: 'code',
      language: 'bash',
      code: 'true',
      tier: 'vm',
    });
    expect(tier.status).toBe(400);
    expect(fieldsOf(tier.body)).toEqual(['tier']);
  });

  it('missing required fields → 400', async () => {
    const res = await engine.request('POST', url(), { type: 'file', op: 'write', path: 'a.txt' });
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual(['content']);
  });

  it('body over the size limit → 413', async () => {
    const res = await engine.request('POST', url(), {
      type: 'file',
      op: 'write',
      path: 'a',
      content: 'x'.repeat(70_000),
    });
    expect(res.status).toBe(413);
    expect(res.body.error.message).toContain('SWITCHYARD_MAX_BODY_BYTES');
  });

  it('code with NUL bytes or over the size limit → 400', async () => {
    const nul = await engine.request('POST', url(), {
      type: 'code',
      language: 'python',
      code: 'print(1)\u0000',
    });
    expect(nul.status).toBe(400);
    expect(fieldsOf(nul.body)).toEqual(['code']);
    const big = await engine.request('POST', url(), {
      type: 'code',
      language: 'python',
      code: `#${'x'.repeat(2000)}`,
    });
    expect(big.status).toBe(400);
    expect(fieldsOf(big.body)).toEqual(['code']);
  });

  it('a timeout above the maximum → 400', async () => {
    const res = await engine.request('POST', url(), {
      type: 'code',
      language: 'bash',
      code: 'true',
      timeoutMs: 10_000_000,
    });
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual(['timeoutMs']);
  });

  it('bad pagination parameters → 400', async () => {
    const res = await engine.request('GET', `${url()}?limit=0`);
    expect(res.status).toBe(400);
    const cursor = await engine.request('GET', `${url()}?cursor=%%%`);
    expect(cursor.status).toBe(400);
  });

  it('a cursor that is not a decimal seq → 400 INVALID_CURSOR naming it', async () => {
    const junk = [
      'abc',
      '-1',
      '01',
      '1.5',
      '1e3',
      ' 1',
      '1000000000000000', // 16 digits
      Buffer.from('seq:1').toString('base64url'), // the former cursor
      '',
    ];
    for (const cursor of junk) {
      const res = await engine.request('GET', `${url()}?cursor=${encodeURIComponent(cursor)}`);
      expect({ cursor, status: res.status, code: res.body.error?.code }).toEqual({
        cursor,
        status: 400,
        code: 'INVALID_CURSOR',
      });
      expect(fieldsOf(res.body)).toEqual(['cursor']);
    }
    // Any decimal the documented pattern admits is a page, an empty one past the last action.
    for (const cursor of ['0', '999999999999999']) {
      expect((await engine.request('GET', `${url()}?cursor=${cursor}`)).status).toBe(200);
    }
    expect((await engine.request('GET', `${url()}?cursor=999999999999999`)).body).toEqual({ actions: [] });
  });

  it('nothing is recorded for rejected requests', async () => {
    const before = (await engine.request('GET', `${url()}?limit=1000`)).body.actions.length;
    await engine.request('POST', url(), { type: 'code', language: 'ruby', code: 'p 1' });
    await engine.request('POST', url(), { type: 'file', op: 'read', path: '../etc/passwd' });
    const after = (await engine.request('GET', `${url()}?limit=1000`)).body.actions.length;
    expect(after).toBe(before);
  });
});
