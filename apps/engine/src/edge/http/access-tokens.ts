import { Inject, Injectable } from '@nestjs/common';
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { CLOCK, type Clock } from '@switchyard/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Principal } from '../../platform/auth/principal';
import { BEARER_CHALLENGE, UnauthenticatedException } from './api-keys';

/**
 * What a token lets its holder do, within one session: open one port of it (`port:<n>`, the proxy and its preview
 * host) or attach to one terminal (`terminal:<id>`). Nothing else: a token is never an API key.
 */
export type AccessScope = `port:${number}` | `terminal:${string}`;

/** What a valid token says. */
export interface AccessGrant {
  tenant: string;
  sessionId: string;
  scope: AccessScope;
  /** Unix time (seconds) it stops being valid. */
  expiresAt: number;
}

/** The longest and the default life of a token. */
export const ACCESS_TOKEN_MAX_SECONDS = 24 * 3600;
export const ACCESS_TOKEN_DEFAULT_SECONDS = 3600;

const b64url = (b: Buffer): string => b.toString('base64url');
/** A token's text is short: a longer one is refused before anything decodes it. */
const MAX_TOKEN_CHARS = 1024;
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{1,800}\.[A-Za-z0-9_-]{43}$/;

/**
 * Short-lived, signed tokens for clients that cannot send an `Authorization` header: a browser opening a preview URL
 * or a terminal's WebSocket. A token is `<payload>.<HMAC-SHA256>`, both base64url; the payload names the tenant, the
 * session, the one scope and the expiry. The signing key is derived from the configured API keys, so every replica
 * of an engine and every restart accept the same tokens, and rotating the keys revokes them all; with no keys (an
 * open engine) it is random per process.
 */
@Injectable()
export class AccessTokens {
  private readonly key: Buffer;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    const keys = [...config.apiKeys, ...config.policy.adminKeys].sort();
    this.key =
      keys.length === 0
        ? randomBytes(32)
        : createHash('sha256').update('switchyard access tokens\0').update(keys.join('\0')).digest();
  }

  /** A token for `principal`'s session and scope, valid for `ttlSeconds` (at most ACCESS_TOKEN_MAX_SECONDS). */
  issue(
    principal: Pick<Principal, 'tenant'>,
    sessionId: string,
    scope: AccessScope,
    ttlSeconds = ACCESS_TOKEN_DEFAULT_SECONDS,
  ): { token: string; expiresAt: string } {
    const seconds = Math.min(Math.max(1, Math.floor(ttlSeconds)), ACCESS_TOKEN_MAX_SECONDS);
    const exp = Math.floor(this.clock.now().getTime() / 1000) + seconds;
    const payload = b64url(
      Buffer.from(JSON.stringify({ t: principal.tenant, s: sessionId, k: scope, e: exp })),
    );
    return { token: `${payload}.${this.sign(payload)}`, expiresAt: new Date(exp * 1000).toISOString() };
  }

  /**
   * The grant of `token` when it is valid, unexpired, and for `sessionId` and `scope`; a 401 otherwise (one message
   * for every way it can be wrong, so a guess learns nothing).
   */
  verify(token: string, sessionId: string, scope: AccessScope): AccessGrant {
    const grant = this.read(token);
    if (!grant || grant.sessionId !== sessionId || grant.scope !== scope) {
      throw new UnauthenticatedException(
        'the access token is not valid for this session and scope, or it has expired',
        `${BEARER_CHALLENGE}, error="invalid_token"`,
      );
    }
    return grant;
  }

  /** What `token` grants, or undefined for a malformed, forged or expired one. */
  read(token: string): AccessGrant | undefined {
    if (token.length > MAX_TOKEN_CHARS || !TOKEN_SHAPE.test(token)) return undefined;
    const [payload, signature] = token.split('.');
    const expected = Buffer.from(this.sign(payload));
    const presented = Buffer.from(signature);
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
    let body: unknown;
    try {
      body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    const { t, s, k, e } = (body ?? {}) as Record<string, unknown>;
    if (typeof t !== 'string' || typeof s !== 'string' || typeof k !== 'string' || typeof e !== 'number') {
      return undefined;
    }
    if (e * 1000 <= this.clock.now().getTime()) return undefined;
    return { tenant: t, sessionId: s, scope: k as AccessScope, expiresAt: e };
  }

  private sign(payload: string): string {
    return b64url(createHmac('sha256', this.key).update(payload).digest());
  }
}
