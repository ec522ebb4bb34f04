import { Controller, Get, Param, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ContextGraph, type GraphView } from '@switchyard/context-graph';
import { ApiKeyGuard } from '../http/api-key.guard';
import { Tenant } from '../http/tenant.decorator';
import { SessionsService } from '../sessions/sessions.service';

@ApiTags('graph')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller('v1/sessions/:sessionId/graph')
export class GraphController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
  ) {}

  @Get()
  @ApiOperation({ summary: 'The session as a graph of sessions, actions and files' })
  async get(@Tenant() tenant: string, @Param('sessionId') sessionId: string): Promise<GraphView> {
    this.sessions.get(tenant, sessionId);
    return this.graph.sessionGraph(sessionId);
  }
}
