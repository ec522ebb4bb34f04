import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Principal } from '../../platform/auth/principal';
import type { TenantRequest } from '../http/api-key.guard';
import { ApiKeys } from '../http/api-keys';

/** What a Jupyter client is told when it sends no key. */
export const MISSING_JUPYTER_TOKEN =
  'missing API key: send `Authorization: token <key>` (jupyter_server’s GatewayClient.auth_token) or ' +
  '`Authorization: Bearer <key>`';

/** The key of an `Authorization` header in Jupyter's scheme (`token KEY`, what a gateway client sends) or `Bearer`. */
export function jupyterToken(authorization: string | undefined): string | undefined {
  return /^(?:token|Bearer)\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

/** Who sends `authorization`: the tenant of its key (401 without a valid one when keys are configured). */
export const jupyterPrincipal = (keys: ApiKeys, authorization: string | undefined): Principal =>
  keys.principalOf(jupyterToken(authorization), MISSING_JUPYTER_TOKEN);

/**
 * The Jupyter routes' auth: the session's tenant key, as for the rest of `/v1`, in either scheme a Jupyter client
 * sends it. With no keys configured the routes are open, like the rest of the API.
 */
@Injectable()
export class JupyterAuthGuard implements CanActivate {
  constructor(private readonly keys: ApiKeys) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<TenantRequest>();
    req.principal = jupyterPrincipal(this.keys, req.headers.authorization);
    req.tenant = req.principal.tenant;
    return true;
  }
}
