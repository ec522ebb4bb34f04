import { Body, Controller, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { NotFoundError, SwitchyardError } from '@switchyard/common';
import { ContextGraph } from '@switchyard/context-graph';
import type { Principal } from '../../platform/auth/principal';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Caller } from '../http/tenant.decorator';
import { validateDto } from '../../platform/validation/validate-dto';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../../session/sessions/sessions.service';
import { type Decided, ApprovalGate, type PendingApproval } from '../../gates/approvals/approval-gate';
import { DecideApprovalDto } from './dto/decide-approval.dto';

/** The action is not waiting for a decision (never did, already decided, or ended). */
export class NotAwaitingApprovalError extends SwitchyardError {
  readonly code = 'APPROVAL_NOT_PENDING';
  readonly kind = 'conflict' as const;
}

/**
 * Approvals: actions a policy rule holds until a person decides. Admin keys decide for every tenant; with
 * SWITCHYARD_APPROVERS=tenant a session's own key decides too.
 */
@ApiTags('approvals')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1')
export class ApprovalsController {
  constructor(
    private readonly gate: ApprovalGate,
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
  ) {}

  @Get('approvals')
  @ApiOperation({
    summary: 'Actions waiting for approval',
    description: 'Those the caller may decide (all tenants’ for an admin key), and its own tenant’s.',
  })
  @ApiOkResponse({ description: 'Waiting actions, oldest first', ...jsonBody('ApprovalList') })
  list(@Caller() caller: Principal): { approvals: PendingApproval[] } {
    return { approvals: this.gate.list(caller) };
  }

  @Post('sessions/:sessionId/actions/:actionId/approve')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Approve an action waiting for approval: it runs',
    description:
      'The decision, who made it and why are recorded in the graph. 409 when the action is not waiting.',
  })
  @ApiBody({ schema: schemaRef(DecideApprovalDto), required: false })
  @ApiOkResponse({ description: 'Approved: the action now runs', ...jsonBody('ApprovalDecision') })
  @ApiBodyErrors()
  @ApiErrors(403, 404, 409)
  approve(
    @Caller() caller: Principal,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
    @Body() body: unknown,
  ): Promise<Decided> {
    return this.decide(caller, sessionId, actionId, 'approved', body);
  }

  @Post('sessions/:sessionId/actions/:actionId/reject')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Reject an action waiting for approval: it ends denied',
    description: 'Its error names who rejected it and why. 409 when the action is not waiting.',
  })
  @ApiBody({ schema: schemaRef(DecideApprovalDto), required: false })
  @ApiOkResponse({ description: 'Rejected: the action ended `denied`', ...jsonBody('ApprovalDecision') })
  @ApiBodyErrors()
  @ApiErrors(403, 404, 409)
  reject(
    @Caller() caller: Principal,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
    @Body() body: unknown,
  ): Promise<Decided> {
    return this.decide(caller, sessionId, actionId, 'rejected', body);
  }

  private async decide(
    caller: Principal,
    sessionId: string,
    actionId: string,
    decision: 'approved' | 'rejected',
    body: unknown,
  ): Promise<Decided> {
    // Admins decide for any tenant: they see every session; others only their own (404 for the rest).
    const session: Session | undefined = caller.admin
      ? this.sessions.find(sessionId)
      : this.sessions.get(caller.tenant, sessionId);
    if (!session) throw new NotFoundError(`session ${sessionId} not found`, { sessionId });
    const { reason } = validateDto(DecideApprovalDto, body === undefined ? {} : body);
    const pending = this.gate.find(sessionId, actionId);
    const decided = pending && this.gate.decide(caller, pending, decision, reason);
    if (decided) return decided;
    const record = await this.graph.getAction(sessionId, actionId);
    if (!record)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    throw new NotAwaitingApprovalError(
      `action ${actionId} is not waiting for approval (status ${record.status}` +
        (record.approval?.decision ? `, ${record.approval.decision}` : '') +
        ')',
      { actionId, status: record.status },
    );
  }
}
