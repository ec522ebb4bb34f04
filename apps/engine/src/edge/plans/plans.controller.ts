import { Body, Controller, Get, Headers, HttpCode, Param, Post, Res, UseGuards } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBearerAuth,
  ApiBody,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import type { Response } from 'express';
import { ApiKeyGuard } from '../http/api-key.guard';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { validateDto } from '../../platform/validation/validate-dto';
import { IdempotencyService, sendIdempotentStatus } from '../../engine/idempotency/idempotency.service';
import { SessionsService } from '../../session/sessions/sessions.service';
import { readPolicy } from '../../state/policies/policy-rules';
import { CreatePlanDto, ReplanDto } from './dto/plan.dto';
import { parsePlanSteps } from './dto/plan-steps';
import { PlanExecutor } from '../../engine/plans/plan-executor.service';
import type { Plan } from '../../state/plans/plan.model';
import { ApiIdempotencyKey } from '../../engine/idempotency/api-idempotency-key';

const DEFAULT_WAIT_MS = 300_000;

/** Where a plan's answer leads: operations of the same plan, by the ids in its body. */
const planLink = (operationId: string, description: string) => ({
  operationId,
  parameters: { sessionId: '$response.body#/sessionId', planId: '$response.body#/id' },
  description,
});

const PLAN_LINKS = {
  GetPlan: planLink(
    'PlansController_get',
    "The plan as it is now: every step's status, action ids and timings",
  ),
  Replan: planLink('PlansController_replan', 'Add steps or replace those that have not succeeded'),
  CancelPlan: planLink('PlansController_cancel', 'Stop it'),
};

@ApiTags('plans')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId/plans')
export class PlansController {
  constructor(
    private readonly plans: PlanExecutor,
    private readonly sessions: SessionsService,
    private readonly idempotency: IdempotencyService,
  ) {}

  @Post()
  @ApiOperation({
    summary: 'Submit a plan: a DAG of actions run in dependency order',
    description:
      'The whole plan is validated first (duplicate or unknown step ids, cycles, invalid actions: 400 naming the ' +
      'steps, nothing runs). 202 at once, or with `"wait": true` 200 when the plan ends or needs a replan.',
  })
  @ApiIdempotencyKey()
  @ApiBody({ schema: schemaRef(CreatePlanDto) })
  @ApiOkResponse({
    description: '`"wait": true` and the plan ended or needs a replan',
    ...jsonBody('Plan'),
    links: PLAN_LINKS,
  })
  @ApiAcceptedResponse({ description: 'The plan, running', ...jsonBody('Plan'), links: PLAN_LINKS })
  @ApiBodyErrors()
  @ApiErrors(404, 422)
  async create(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ): Promise<Plan> {
    const session = this.sessions.get(tenant, sessionId);
    const dto = validateDto(CreatePlanDto, body);
    const spec = {
      goal: dto.goal,
      maxParallel: dto.maxParallel,
      steps: parsePlanSteps(dto.steps),
      ...(dto.checkpoints !== undefined && { checkpoints: dto.checkpoints }),
      ...(dto.policy !== undefined && { policy: { rules: readPolicy(dto.policy, 'policy') } }),
    };
    const answer = await this.idempotency.run<Plan>(
      tenant,
      idempotencyKey,
      { method: 'POST', path: `/v1/sessions/${sessionId}/plans`, body },
      async () => {
        const plan = await this.plans.create(session, spec);
        if (!dto.wait) return { statusCode: 202, body: plan };
        await this.plans.settle(plan, dto.waitTimeoutMs ?? DEFAULT_WAIT_MS);
        return { statusCode: plan.status === 'running' ? 202 : 200, body: plan };
      },
    );
    const plan = sendIdempotentStatus(res, answer);
    // A replayed plan is shown as it is now, not as it was first answered.
    return answer.replayed ? await this.plans.get(session, plan.id) : plan;
  }

  @Get()
  @ApiOperation({ summary: "The session's plans, oldest first" })
  @ApiOkResponse({ description: 'The plans', ...jsonBody('PlanList') })
  @ApiErrors(404)
  async list(@Tenant() tenant: string, @Param('sessionId') sessionId: string): Promise<{ plans: Plan[] }> {
    return { plans: await this.plans.list(this.sessions.get(tenant, sessionId)) };
  }

  @Get(':planId')
  @ApiOperation({ summary: "A plan with every step's status, action ids and timings" })
  @ApiOkResponse({ description: 'The plan', ...jsonBody('Plan') })
  @ApiErrors(404)
  get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('planId') planId: string,
  ): Promise<Plan> {
    return this.plans.get(this.sessions.get(tenant, sessionId), planId);
  }

  @Post(':planId/replan')
  @ApiOperation({
    summary: 'Add steps or replace steps that have not succeeded, then resume',
    description:
      '409 once the plan has ended. With `"wait": true`, answers when the plan next settles. `restoreTo` puts the ' +
      'workspace back to the checkpoint taken before that step first ran, before anything resumes.',
  })
  @ApiBody({ schema: schemaRef(ReplanDto) })
  @ApiOkResponse({ description: 'The plan, settled: ended or needing a replan', ...jsonBody('Plan') })
  @ApiAcceptedResponse({ description: 'The plan, running again', ...jsonBody('Plan') })
  @ApiBodyErrors()
  @ApiErrors(404, 409)
  async replan(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('planId') planId: string,
    @Body() body: unknown,
    @Res({ passthrough: true }) res: Response,
  ): Promise<Plan> {
    const session = this.sessions.get(tenant, sessionId);
    const dto = validateDto(ReplanDto, body);
    const plan = await this.plans.replan(session, planId, parsePlanSteps(dto.steps), {
      ...(dto.restoreTo !== undefined && { restoreTo: dto.restoreTo }),
    });
    if (dto.wait) await this.plans.settle(plan, dto.waitTimeoutMs ?? DEFAULT_WAIT_MS);
    res.status(plan.status === 'running' ? 202 : 200);
    return plan;
  }

  @Post(':planId/cancel')
  @HttpCode(200)
  @ApiOperation({ summary: "Stop a plan: running steps' actions are cancelled, pending steps never start" })
  @ApiOkResponse({ description: 'The cancelled plan', ...jsonBody('Plan') })
  @ApiErrors(404, 409)
  cancel(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('planId') planId: string,
  ): Promise<Plan> {
    return this.plans.cancel(this.sessions.get(tenant, sessionId), planId);
  }
}
