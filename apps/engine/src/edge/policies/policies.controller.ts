import { Body, Controller, Delete, Get, HttpCode, Param, Put, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiTags,
} from '@nestjs/swagger';
import { InvalidInputError, NotFoundError } from '@switchyard/common';
import { ApprovalGate } from '../../gates/approvals/approval-gate';
import type { Principal } from '../../platform/auth/principal';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Caller } from '../http/tenant.decorator';
import { SessionsService } from '../../session/sessions/sessions.service';
import { ToolsService } from '../../engine/tools/tools.service';
import { PolicyDto } from './dto/policy.dto';
import type { HiddenTool } from '../../gates/policies/policy-evaluator';
import { type EffectivePolicy, PolicyService } from '../../gates/policies/policy.service';
import type { TenantPolicy } from '../../state/policies/tenant-policy.store';

/** A session's policy as `GET …/policy` shows it: every layer, and which tools it leaves out and why. */
export type SessionPolicyView = EffectivePolicy & { tools: { offered: string[]; hidden: HiddenTool[] } };

/** A tenant id as keys make them: `open` (no keys), or `t_` and 16 hex digits of the key's hash. */
const TENANT_ID = /^(open|t_[0-9a-f]{16})$/;

const tenantParam = (tenant: string): string => {
  if (!TENANT_ID.test(tenant)) {
    throw new InvalidInputError(
      'tenant',
      'a tenant id is `open` or `t_` and 16 hex digits (GET /v1/whoami shows yours)',
    );
  }
  return tenant;
};

@ApiTags('policies')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1')
export class PoliciesController {
  constructor(
    private readonly policies: PolicyService,
    private readonly sessions: SessionsService,
    private readonly tools: ToolsService,
    private readonly approvals: ApprovalGate,
  ) {}

  @Get('whoami')
  @ApiOperation({
    summary: 'Who the caller is: its tenant, whether its key is an admin’s, and whether it decides approvals',
  })
  @ApiOkResponse({ description: 'The caller', ...jsonBody('Caller') })
  whoami(@Caller() caller: Principal): Principal & { approver: boolean } {
    return { ...caller, approver: this.approvals.mayDecide(caller, caller.tenant) };
  }

  @Get('sessions/:sessionId/policy')
  @ApiOperation({
    summary: 'The effective policy of a session: each layer with where it came from, and the tools it hides',
    description:
      'Layers apply engine → tenant → session (→ a plan’s, for its steps). Deny wins over ask, ask over allow, in ' +
      'every layer; a layer with allow rules allows only what one of them matches; so a layer only narrows.',
  })
  @ApiOkResponse({ description: 'The effective policy', ...jsonBody('EffectivePolicy') })
  @ApiErrors(404)
  sessionPolicy(@Caller() caller: Principal, @Param('sessionId') sessionId: string): SessionPolicyView {
    const session = this.sessions.get(caller.tenant, sessionId);
    const scope = { tenant: session.tenant, session };
    return { ...this.policies.effective(session), tools: this.tools.policyView(scope) };
  }

  @Get('tenants/:tenant/policy')
  @ApiOperation({ summary: 'A tenant’s policy layer (admins: any tenant; others: their own)' })
  @ApiParam({ name: 'tenant', schema: { type: 'string', pattern: TENANT_ID.source } })
  @ApiOkResponse({ description: 'The tenant’s rules (none: empty `rules`)', ...jsonBody('TenantPolicy') })
  @ApiErrors(400, 403)
  tenantPolicy(
    @Caller() caller: Principal,
    @Param('tenant') tenant: string,
  ): TenantPolicy | { tenant: string; rules: [] } {
    const id = tenantParam(tenant);
    return this.policies.tenantPolicy(caller, id) ?? { tenant: id, rules: [] };
  }

  @Put('tenants/:tenant/policy')
  @ApiOperation({
    summary: 'Set a tenant’s policy layer (admin keys only)',
    description: 'Applies to the tenant’s next actions in every session, under the engine’s layer.',
  })
  @ApiParam({ name: 'tenant', schema: { type: 'string', pattern: TENANT_ID.source } })
  @ApiBody({ schema: schemaRef(PolicyDto) })
  @ApiOkResponse({ description: 'The tenant’s rules as set', ...jsonBody('TenantPolicy') })
  @ApiBodyErrors()
  @ApiErrors(403)
  setTenantPolicy(
    @Caller() caller: Principal,
    @Param('tenant') tenant: string,
    @Body() body: unknown,
  ): Promise<TenantPolicy> {
    return this.policies.setTenantPolicy(caller, tenantParam(tenant), body);
  }

  @Delete('tenants/:tenant/policy')
  @HttpCode(204)
  @ApiOperation({ summary: 'Remove a tenant’s policy layer (admin keys only)' })
  @ApiParam({ name: 'tenant', schema: { type: 'string', pattern: TENANT_ID.source } })
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors(400, 403, 404)
  async deleteTenantPolicy(@Caller() caller: Principal, @Param('tenant') tenant: string): Promise<void> {
    const id = tenantParam(tenant);
    if (!(await this.policies.deleteTenantPolicy(caller, id))) {
      throw new NotFoundError(`tenant ${id} has no policy`, { tenant: id });
    }
  }
}
