import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { ApiKeys } from './api-keys';
import type { Principal } from '../../platform/auth/principal';

export { OPEN_TENANT } from './api-keys';

export interface TenantRequest extends Request {
  tenant?: string;
  principal?: Principal;
}

/** Bearer-token auth for `/v1`: the request runs as the tenant of its key (401 without a valid one). */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(private readonly keys: ApiKeys) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<TenantRequest>();
    req.principal = this.keys.principal(req);
    req.tenant = req.principal.tenant;
    return true;
  }
}
