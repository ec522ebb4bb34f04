import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { TenantRequest } from './api-key.guard';

/** The tenant resolved by `ApiKeyGuard` for this request. */
export const Tenant = createParamDecorator((_data: unknown, ctx: ExecutionContext): string => {
  const tenant = ctx.switchToHttp().getRequest<TenantRequest>().tenant;
  if (!tenant) throw new Error('Tenant used on a route without ApiKeyGuard');
  return tenant;
});
