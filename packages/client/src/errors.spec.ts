import { SwitchyardClient } from './client';
import { errorFromResponse, SwitchyardError } from './errors';

describe('errorFromResponse', () => {
  it('maps the engine error body: status, code, message, fields, details', () => {
    const error = errorFromResponse(400, {
      error: {
        code: 'VALIDATION_FAILED',
        message: 'invalid request',
        fields: [{ path: 'code', message: 'code must be a string' }],
        details: { limit: 3 },
      },
    });
    expect(error).toBeInstanceOf(SwitchyardError);
    expect(error).toMatchObject({
      status: 400,
      code: 'VALIDATION_FAILED',
      message: 'invalid request',
      fields: [{ path: 'code', message: 'code must be a string' }],
      details: { limit: 3 },
    });
  });

  it('falls back to the status for bodies that are not the error envelope', () => {
    expect(errorFromResponse(404, { error: { code: 'NOT_FOUND', message: 'gone' } })).toMatchObject({
      code: 'NOT_FOUND',
      message: 'gone',
      fields: [],
    });
    expect(errorFromResponse(404, { message: 'a proxy said so' })).toMatchObject({
      status: 404,
      code: 'HTTP_404',
    });
    expect(errorFromResponse(502, '<html>bad gateway</html>')).toMatchObject({
      status: 502,
      code: 'HTTP_502',
      message: 'HTTP 502: <html>bad gateway</html>',
    });
  });
});

describe('SwitchyardClient requests', () => {
  it('sends the key, JSON body and query, and throws the mapped error on non-2xx', async () => {
    const calls: Array<{ url: string; init: RequestInit }> = [];
    const fakeFetch = (async (url: URL | string, init: RequestInit = {}) => {
      calls.push({ url: String(url), init });
      return new Response(JSON.stringify({ error: { code: 'NO_CHECKPOINT', message: 'none' } }), {
        status: 409,
      });
    }) as typeof fetch;
    const client = new SwitchyardClient({ baseUrl: 'http://engine:1/', apiKey: 'key1', fetch: fakeFetch });
    await expect(client.actions.retry('ses_1', 'act_1', { restore: true })).rejects.toMatchObject({
      status: 409,
      code: 'NO_CHECKPOINT',
    });
    await expect(client.tools.list({ format: 'openai', strict: true })).rejects.toBeInstanceOf(
      SwitchyardError,
    );
    expect(calls[0].url).toBe('http://engine:1/v1/sessions/ses_1/actions/act_1/retry');
    expect(calls[0].init.headers).toMatchObject({
      authorization: 'Bearer key1',
      'content-type': 'application/json',
    });
    expect(calls[0].init.body).toBe('{"restore":true}');
    expect(calls[1].url).toBe('http://engine:1/v1/tools?format=openai&strict=true');
  });

  it('takes its settings from the environment when not given', () => {
    const saved = { url: process.env.SWITCHYARD_URL, key: process.env.SWITCHYARD_API_KEY };
    try {
      process.env.SWITCHYARD_URL = 'http://env-host:9';
      delete process.env.SWITCHYARD_API_KEY;
      expect(new SwitchyardClient().baseUrl).toBe('http://env-host:9');
      delete process.env.SWITCHYARD_URL;
      expect(new SwitchyardClient().baseUrl).toBe('http://127.0.0.1:8080');
      expect(new SwitchyardClient().authHeaders()).toEqual({});
    } finally {
      if (saved.url === undefined) delete process.env.SWITCHYARD_URL;
      else process.env.SWITCHYARD_URL = saved.url;
      if (saved.key !== undefined) process.env.SWITCHYARD_API_KEY = saved.key;
    }
  });
});
