import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { TenantRequest } from './api-key.guard';
import type { Principal } from '../../platform/auth/principal';

/** The tenant resolved by `ApiKeyGuard` for this request. */
export const Tenant = createParamDecorator((_data: unknown, ctx: ExecutionContext): string => {
  const tenant = ctx.switchToHttp().getRequest<TenantRequest>().tenant;
  if (!tenant) throw new Error('Tenant used on a route without ApiKeyGuard');
  return tenant;
});

/** Who made the request (`ApiKeyGuard`): tenant, admin or not, and an id safe to record. */
export const Caller = createParamDecorator((_data: unknown, ctx: ExecutionContext): Principal => {
  const principal = ctx.switchToHttp().getRequest<TenantRequest>().principal;
  if (!principal) throw new Error('Caller used on a route without ApiKeyGuard');
  return principal;
});
