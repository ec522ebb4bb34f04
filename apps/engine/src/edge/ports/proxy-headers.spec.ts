import {
  callerResponseHeaders,
  previewCookie,
  upstreamRequestHeaders,
  withoutPreviewCookie,
} from './proxy-headers';

describe('upstreamRequestHeaders', () => {
  const base = {
    port: 8000,
    dropAuthorization: true,
    remoteAddress: '10.0.0.9',
    proto: 'https' as const,
    prefix: '/v1/sessions/ses_1/ports/8000',
    upgrade: false,
  };

  it('drops hop-by-hop headers, the engine’s key and preview cookie, and says where the request came from', () => {
    const out = upstreamRequestHeaders(
      {
        host: 'engine.example.com',
        connection: 'keep-alive, x-hop',
        'keep-alive': 'timeout=5',
        'x-hop': 'gone',
        te: 'trailers',
        'transfer-encoding': 'chunked',
        'proxy-authorization': 'Basic eA==',
        authorization: 'Bearer engine-key',
        cookie: 'app=1; switchyard_preview=tok.sig; theme=dark',
        'x-forwarded-for': '1.2.3.4',
        'x-forwarded-host': 'made-up',
        'content-type': 'text/plain',
        'content-length': '5',
      },
      base,
    );
    expect(out).toEqual({
      host: 'localhost:8000',
      cookie: 'app=1; theme=dark',
      'content-type': 'text/plain',
      'content-length': '5',
      'x-forwarded-for': '1.2.3.4, 10.0.0.9',
      'x-forwarded-host': 'engine.example.com',
      'x-forwarded-proto': 'https',
      'x-forwarded-prefix': '/v1/sessions/ses_1/ports/8000',
    });
  });

  it('keeps the server’s own Authorization when a preview token authenticated, and the upgrade headers', () => {
    const out = upstreamRequestHeaders(
      {
        authorization: 'Basic YXBwOnB3',
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-key': 'k',
        cookie: 'switchyard_preview=t',
      },
      { ...base, dropAuthorization: false, prefix: '', upgrade: true },
    );
    expect(out).toMatchObject({
      authorization: 'Basic YXBwOnB3',
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-key': 'k',
    });
    expect(out).not.toHaveProperty('cookie');
    expect(out).not.toHaveProperty('x-forwarded-prefix');
  });
});

describe('callerResponseHeaders', () => {
  const o = { port: 8000, prefix: '/v1/sessions/ses_1/ports/8000' };

  it('keeps the server’s redirects and cookies under the port’s path through the path proxy', () => {
    const out = callerResponseHeaders(
      {
        location: 'http://localhost:8000/login?next=%2F',
        'set-cookie': ['sid=1; Path=/; Domain=localhost; HttpOnly', 'pref=2', 'deep=3; path=/app'],
        connection: 'close',
        'transfer-encoding': 'chunked',
        'content-type': 'text/html',
      },
      o,
    );
    expect(out).toEqual({
      location: '/v1/sessions/ses_1/ports/8000/login?next=%2F',
      'set-cookie': [
        'sid=1; Path=/v1/sessions/ses_1/ports/8000/; HttpOnly',
        'pref=2; Path=/v1/sessions/ses_1/ports/8000/',
        'deep=3; Path=/v1/sessions/ses_1/ports/8000/app',
      ],
      'content-type': 'text/html',
    });
    expect(callerResponseHeaders({ location: '/x' }, o).location).toBe('/v1/sessions/ses_1/ports/8000/x');
    expect(callerResponseHeaders({ location: 'https://example.com/x' }, o).location).toBe(
      'https://example.com/x',
    );
    expect(callerResponseHeaders({ location: '//example.com/x' }, o).location).toBe('//example.com/x');
    expect(callerResponseHeaders({ location: 'next' }, o).location).toBe('next');
  });

  it('leaves a preview host’s answer as the server sent it, but for hop-by-hop headers', () => {
    expect(
      callerResponseHeaders(
        { location: '/x', 'set-cookie': ['a=1; Path=/'], 'keep-alive': 'x' },
        { port: 1, prefix: '' },
      ),
    ).toEqual({ location: '/x', 'set-cookie': ['a=1; Path=/'] });
  });
});

describe('the preview cookie', () => {
  it('is read from and taken out of a Cookie header', () => {
    expect(previewCookie('a=1; switchyard_preview=x.y; b=2')).toBe('x.y');
    expect(previewCookie('a=1')).toBeUndefined();
    expect(withoutPreviewCookie('switchyard_preview=x')).toBeUndefined();
    expect(withoutPreviewCookie('a=1;switchyard_preview=x;b=2')).toBe('a=1; b=2');
  });
});
