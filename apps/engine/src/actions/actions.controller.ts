import { Body, Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { ActionResult } from '@switchyard/common';
import { NotFoundError } from '@switchyard/common';
import { ContextGraph } from '@switchyard/context-graph';
import { ApiKeyGuard } from '../http/api-key.guard';
import { schemaRef } from '../http/openapi';
import { Tenant } from '../http/tenant.decorator';
import { validateDto } from '../http/validate-dto';
import { SessionsService } from '../sessions/sessions.service';
import { type ActionView, toActionView } from './action.view';
import { ACTION_DTO_CLASSES, parseActionBody } from './dto/action-body';
import { ListActionsQuery } from './dto/list-actions.query';
import { ExecutionEngine } from './execution-engine.service';

@ApiTags('actions')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('v1/sessions/:sessionId/actions')
export class ActionsController {
  constructor(
    private readonly engine: ExecutionEngine,
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
  ) {}

  @Post()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Run one action and return its result',
    description: 'HTTP 200 whatever the outcome: `status` tells how the action ended.',
  })
  @ApiBody({ schema: { oneOf: ACTION_DTO_CLASSES.map(schemaRef) } })
  run(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
  ): Promise<ActionResult> {
    // Session first: an unknown session is a 404 even when the body is also wrong.
    this.sessions.get(tenant, sessionId);
    return this.engine.run(tenant, sessionId, parseActionBody(body));
  }

  @Get()
  @ApiOperation({ summary: 'Timeline of the session, oldest first, paginated by cursor' })
  async list(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
  ): Promise<{ actions: ActionView[]; nextCursor?: string }> {
    const q = validateDto(ListActionsQuery, query);
    this.sessions.get(tenant, sessionId);
    const page = await this.graph.listActions(sessionId, { cursor: q.cursor, limit: q.limit ?? 100 });
    return {
      actions: page.items.map((r) => toActionView(r, false)),
      ...(page.nextCursor && { nextCursor: page.nextCursor }),
    };
  }

  @Get(':actionId')
  @ApiOperation({ summary: 'One action with its input and the files it touched' })
  async get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
  ): Promise<ActionView> {
    this.sessions.get(tenant, sessionId);
    const record = await this.graph.getAction(sessionId, actionId);
    if (!record)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    return toActionView(record, true);
  }
}
