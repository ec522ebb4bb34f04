import { CanActivate, ExecutionContext, Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';

/** The tenant every request runs as when no API keys are configured. */
export const OPEN_TENANT = 'open';

export interface TenantRequest extends Request {
  tenant?: string;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * Bearer-token auth for `/v1`. Each configured key is a tenant, identified by a hash of the key so the
 * key itself is never stored next to the data it guards.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  private readonly keys: { digest: Buffer; tenant: string }[];

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    this.keys = config.apiKeys.map((key) => ({
      digest: digest(key),
      tenant: `t_${digest(key).toString('hex').slice(0, 16)}`,
    }));
  }

  get open(): boolean {
    return this.keys.length === 0;
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<TenantRequest>();
    if (this.open) {
      req.tenant = OPEN_TENANT;
      return true;
    }
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedException({ message: 'missing bearer token', code: 'UNAUTHENTICATED' });
    const presented = digest(match[1]);
    // Compare against every key in constant time so timing does not reveal which prefix matched.
    let tenant: string | undefined;
    for (const key of this.keys) {
      if (timingSafeEqual(key.digest, presented)) tenant = key.tenant;
    }
    if (!tenant)
      throw new UnauthorizedException({ message: 'invalid bearer token', code: 'UNAUTHENTICATED' });
    req.tenant = tenant;
    return true;
  }
}
