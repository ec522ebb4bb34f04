import type { IncomingMessage } from 'node:http';
import type { EngineConfig } from '../../platform/config/engine-config';
import { AccessTokens } from '../http/access-tokens';
import { ApiKeys } from '../http/api-keys';
import { PortAuth } from './port-auth';
import { hostTarget, pathTarget } from './port-target';

describe('PortAuth', () => {
  let now = new Date('2030-01-01T00:00:00Z');
  const clock = { now: () => now, monotonic: () => now.getTime() };
  const config = (apiKeys: string[]) => ({ apiKeys, policy: { adminKeys: [] } }) as unknown as EngineConfig;
  const keys = new ApiKeys(config(['key-a', 'key-b']));
  const tokens = new AccessTokens(config(['key-a', 'key-b']), clock);
  const auth = new PortAuth(keys, tokens, clock);
  const tenantA = keys.principalOf('key-a').tenant;
  const req = (headers: Record<string, string> = {}) => ({ headers }) as unknown as IncomingMessage;
  const path = (url: string) => pathTarget(url)!;
  const token = (scope: `port:${number}`, sessionId = 'ses_1', ttl = 60) =>
    tokens.issue({ tenant: tenantA }, sessionId, scope, ttl).token;

  afterEach(() => (now = new Date('2030-01-01T00:00:00Z')));

  it('takes the bearer key, which is then not forwarded', () => {
    const access = auth.authorize(
      req({ authorization: 'Bearer key-a' }),
      path('/v1/sessions/ses_1/ports/8000/'),
      8000,
      false,
    );
    expect(access).toEqual({ tenant: tenantA, by: 'key' });
    expect(() => auth.authorize(req(), path('/v1/sessions/ses_1/ports/8000/'), 8000, false)).toThrow(
      'missing bearer token',
    );
    expect(() =>
      auth.authorize(
        req({ authorization: 'Bearer nope' }),
        path('/v1/sessions/ses_1/ports/8000/'),
        8000,
        false,
      ),
    ).toThrow('invalid bearer token');
  });

  it('moves a URL’s token into a cookie for the port’s path and sends the caller on without it', () => {
    const t = token('port:8000');
    const access = auth.authorize(
      req(),
      path(`/v1/sessions/ses_1/ports/8000/app/?q=1&switchyard_token=${t}`),
      8000,
      true,
    );
    expect(access.tenant).toBe(tenantA);
    expect(access.redirect).toEqual({
      location: '/v1/sessions/ses_1/ports/8000/app/?q=1',
      cookie: `switchyard_preview=${t}; Path=/v1/sessions/ses_1/ports/8000/; Max-Age=60; HttpOnly; SameSite=Lax; Secure`,
    });
    // At a preview host, the cookie is the host's own, for every path.
    const atHost = auth.authorize(
      req(),
      hostTarget('8000-ses_1.p.test', `/x?switchyard_token=${t}`, 'p.test')!,
      8000,
      false,
    );
    expect(atHost.redirect).toEqual({
      location: '/x',
      cookie: `switchyard_preview=${t}; Path=/; Max-Age=60; HttpOnly; SameSite=Lax`,
    });
  });

  it('takes the cookie for its session and port only; refuses a forged, expired or misplaced one (401)', () => {
    const t = token('port:8000');
    const target = path('/v1/sessions/ses_1/ports/8000/');
    expect(auth.authorize(req({ cookie: `a=1; switchyard_preview=${t}` }), target, 8000, false)).toEqual({
      tenant: tenantA,
      by: 'cookie',
    });
    const refused =
      (cookieToken: string, url = '/v1/sessions/ses_1/ports/8000/', port = 8000) =>
      () =>
        auth.authorize(req({ cookie: `switchyard_preview=${cookieToken}` }), path(url), port, false);
    expect(refused(token('port:3000'))).toThrow('not valid for this session and scope');
    expect(refused(t, '/v1/sessions/ses_2/ports/8000/')).toThrow('not valid for this session and scope');
    expect(refused(`${t.slice(0, -2)}AA`)).toThrow('not valid');
    now = new Date(now.getTime() + 61_000);
    expect(refused(t)).toThrow('not valid');
    // A stale cookie beside a valid key: the key's request.
    expect(
      auth.authorize(
        req({ cookie: `switchyard_preview=${t}`, authorization: 'Bearer key-b' }),
        target,
        8000,
        false,
      ).by,
    ).toBe('key');
    // A forged token in the URL: 401, no cookie.
    expect(() =>
      auth.authorize(req(), path('/v1/sessions/ses_1/ports/8000/?switchyard_token=x.y'), 8000, false),
    ).toThrow('not valid');
  });
});
