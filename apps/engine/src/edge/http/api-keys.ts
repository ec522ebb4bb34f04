import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import type { Request } from 'express';
import { createHash, timingSafeEqual } from 'node:crypto';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Principal } from '../../platform/auth/principal';

/** The tenant every request runs as when no API keys are configured. */
export const OPEN_TENANT = 'open';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** What a 401 asks for (RFC 6750's challenge): a bearer token of this engine's realm. */
export const BEARER_CHALLENGE = 'Bearer realm="switchyard"';

/**
 * No valid bearer token: answered 401 with the engine's error body and, in `WWW-Authenticate`, the challenge that
 * says which scheme to use, and for a token presented, that it is not one (`error="invalid_token"`).
 */
export class UnauthenticatedException extends UnauthorizedException {
  constructor(
    message: string,
    readonly challenge: string,
  ) {
    super({ message, code: 'UNAUTHENTICATED' });
  }
}

interface Key {
  digest: Buffer;
  tenant: string;
  admin: boolean;
}

/**
 * The configured bearer keys (SWITCHYARD_API_KEYS and the admins' SWITCHYARD_ADMIN_KEYS). Each key is a tenant,
 * identified by a hash of the key so the key itself is never stored next to the data it guards.
 */
@Injectable()
export class ApiKeys {
  private readonly keys: Key[];

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    const key = (k: string, admin: boolean): Key => ({
      digest: digest(k),
      tenant: `t_${digest(k).toString('hex').slice(0, 16)}`,
      admin,
    });
    this.keys = [
      ...config.apiKeys.map((k) => key(k, false)),
      ...config.policy.adminKeys.map((k) => key(k, true)),
    ];
  }

  /** No keys configured: every request is the open tenant. */
  get open(): boolean {
    return this.keys.length === 0;
  }

  /** The request's tenant; 401 for a missing or unknown bearer token when keys are configured. */
  authenticate(req: Request): string {
    return this.principal(req).tenant;
  }

  /**
   * Who made the request; 401 for a missing or unknown bearer token when keys are configured. With no keys at all
   * the API is open: every request is the open tenant, with an admin's rights (there is no one else to have them).
   */
  principal(req: Request): Principal {
    return this.principalOf(/^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1]);
  }

  /**
   * Who presents `token` (a key taken from a request by the caller's own scheme, e.g. Jupyter's `token KEY`); 401
   * for a missing (`missing` says how to send one) or unknown token when keys are configured.
   */
  principalOf(token: string | undefined, missing = 'missing bearer token'): Principal {
    if (this.open) return { tenant: OPEN_TENANT, admin: true, id: OPEN_TENANT };
    if (token === undefined) throw new UnauthenticatedException(missing, BEARER_CHALLENGE);
    const presented = digest(token);
    // Compare against every key in constant time so timing does not reveal which prefix matched.
    let found: Key | undefined;
    for (const key of this.keys) {
      if (timingSafeEqual(key.digest, presented)) found = key;
    }
    if (!found) {
      throw new UnauthenticatedException(
        'invalid bearer token',
        `${BEARER_CHALLENGE}, error="invalid_token", error_description="the token is not a key of this engine"`,
      );
    }
    return {
      tenant: found.tenant,
      admin: found.admin,
      id: `${found.admin ? 'admin' : 'tenant'}:${found.tenant}`,
    };
  }

  /** True when the request may see operator details: the API is open, or it carries a valid key. */
  trusted(req: Request): boolean {
    try {
      this.authenticate(req);
      return true;
    } catch {
      return false;
    }
  }
}
