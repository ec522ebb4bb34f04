import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import type { Request } from 'express';
import { createHash, timingSafeEqual } from 'node:crypto';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';

/** The tenant every request runs as when no API keys are configured. */
export const OPEN_TENANT = 'open';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * The configured bearer keys. Each key is a tenant, identified by a hash of the key so the key itself is never
 * stored next to the data it guards.
 */
@Injectable()
export class ApiKeys {
  private readonly keys: { digest: Buffer; tenant: string }[];

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    this.keys = config.apiKeys.map((key) => ({
      digest: digest(key),
      tenant: `t_${digest(key).toString('hex').slice(0, 16)}`,
    }));
  }

  /** No keys configured: every request is the open tenant. */
  get open(): boolean {
    return this.keys.length === 0;
  }

  /** The request's tenant; 401 for a missing or unknown bearer token when keys are configured. */
  authenticate(req: Request): string {
    if (this.open) return OPEN_TENANT;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match) throw new UnauthorizedException({ message: 'missing bearer token', code: 'UNAUTHENTICATED' });
    const presented = digest(match[1]);
    // Compare against every key in constant time so timing does not reveal which prefix matched.
    let tenant: string | undefined;
    for (const key of this.keys) {
      if (timingSafeEqual(key.digest, presented)) tenant = key.tenant;
    }
    if (!tenant)
      throw new UnauthorizedException({ message: 'invalid bearer token', code: 'UNAUTHENTICATED' });
    return tenant;
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
