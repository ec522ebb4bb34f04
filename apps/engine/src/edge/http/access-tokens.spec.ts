import type { Clock } from '@switchyard/common';
import { loadEngineConfig } from '../../platform/config/engine-config';
import { AccessTokens, ACCESS_TOKEN_MAX_SECONDS } from './access-tokens';
import { UnauthenticatedException } from './api-keys';

describe('AccessTokens', () => {
  let nowMs = Date.UTC(2026, 10, 29, 12, 0, 0);
  const clock: Clock = { now: () => new Date(nowMs), monotonic: () => nowMs };
  const config = (keys: string) => loadEngineConfig({ SWITCHYARD_API_KEYS: keys });
  const tenant = { tenant: 't_1' };
  beforeEach(() => (nowMs = Date.UTC(2026, 10, 29, 12, 0, 0)));

  it('a token verifies for its session and scope until it expires, and says who issued it', () => {
    const tokens = new AccessTokens(config('k'.repeat(16)), clock);
    const { token, expiresAt } = tokens.issue(tenant, 'ses_1', 'port:3000', 60);
    expect(expiresAt).toBe('2026-11-29T12:01:00.000Z');
    expect(tokens.verify(token, 'ses_1', 'port:3000')).toEqual({
      tenant: 't_1',
      sessionId: 'ses_1',
      scope: 'port:3000',
      expiresAt: Date.UTC(2026, 10, 29, 12, 1, 0) / 1000,
    });
    nowMs += 60_000;
    expect(() => tokens.verify(token, 'ses_1', 'port:3000')).toThrow(UnauthenticatedException);
  });

  it('refuses another session, another scope, a forged signature and garbage, with one message', () => {
    const tokens = new AccessTokens(config('k'.repeat(16)), clock);
    const { token } = tokens.issue(tenant, 'ses_1', 'terminal:trm_a');
    const refused = (t: string, s: string, scope: 'terminal:trm_a' | 'port:1') => {
      try {
        tokens.verify(t, s, scope);
      } catch (err) {
        return (err as Error).message;
      }
      return 'accepted';
    };
    const message = 'the access token is not valid for this session and scope, or it has expired';
    expect(refused(token, 'ses_2', 'terminal:trm_a')).toBe(message);
    expect(refused(token, 'ses_1', 'port:1')).toBe(message);
    const [payload, sig] = token.split('.');
    const flipped = `${payload}.${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`;
    expect(refused(flipped, 'ses_1', 'terminal:trm_a')).toBe(message);
    expect(refused('not-a-token', 'ses_1', 'terminal:trm_a')).toBe(message);
    expect(refused(`${'a'.repeat(5000)}.${sig}`, 'ses_1', 'terminal:trm_a')).toBe(message);
  });

  it('engines with the same API keys accept each other’s tokens (replicas, restarts); other keys do not', () => {
    const a = new AccessTokens(config(`${'k'.repeat(16)},${'m'.repeat(16)}`), clock);
    const b = new AccessTokens(config(`${'m'.repeat(16)},${'k'.repeat(16)}`), clock);
    const c = new AccessTokens(config('z'.repeat(16)), clock);
    const { token } = a.issue(tenant, 'ses_1', 'port:8000');
    expect(b.read(token)?.sessionId).toBe('ses_1');
    expect(c.read(token)).toBeUndefined();
  });

  it('caps the life of a token at ACCESS_TOKEN_MAX_SECONDS', () => {
    const tokens = new AccessTokens(config(''), clock);
    const { expiresAt } = tokens.issue(tenant, 'ses_1', 'port:1', 10 * ACCESS_TOKEN_MAX_SECONDS);
    expect(Date.parse(expiresAt) - nowMs).toBe(ACCESS_TOKEN_MAX_SECONDS * 1000);
  });
});
