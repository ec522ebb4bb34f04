import { Controller, Get, Param, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiV1Errors } from '../http/api-responses';
import { ACTION_STATUSES, ACTION_TYPES, NotFoundError } from '@switchyard/common';
import {
  ContextGraph,
  type FailureContext,
  type FileLineage,
  type GraphView,
} from '@switchyard/context-graph';
import type { Response } from 'express';
import { posix } from 'node:path';
import { ApiKeyGuard } from '../http/api-key.guard';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { validateDto } from '../../platform/validation/validate-dto';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import { SessionsService } from '../../session/sessions/sessions.service';
import { FileLineageQuery } from './dto/file-lineage.query';
import { FailureContextQueryDto, GraphQuery, MAX_GRAPH_LIMIT } from './dto/graph.query';

const DEFAULT_BEFORE = 10;

/**
 * Graph queries for planners and reflection loops. Every answer carries where the graph stands:
 * `X-Graph-Store` (`embedded`|`neo4j`), `X-Graph-Status` (`degraded` while Neo4j cannot be reached) and
 * `X-Graph-Lag` (records committed but not yet in Neo4j: what someone querying Neo4j directly would miss).
 */
@ApiTags('graph')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId')
export class GraphController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly redactor: SecretRedactor,
  ) {}

  @Get('graph')
  @ApiOperation({ summary: 'The session as a graph of actions, files and sandboxes, optionally filtered' })
  @ApiQuery({
    name: 'since',
    required: false,
    schema: { type: 'string', format: 'date-time' },
    description: 'Only actions started at or after (ISO 8601)',
  })
  @ApiQuery({
    name: 'types',
    required: false,
    schema: { type: 'array', minItems: 1, items: { type: 'string', enum: [...ACTION_TYPES] } },
    style: 'form',
    explode: false,
    description: `Comma-separated (or repeated): ${ACTION_TYPES.join(', ')}`,
  })
  @ApiQuery({
    name: 'status',
    required: false,
    schema: { type: 'array', minItems: 1, items: { type: 'string', enum: [...ACTION_STATUSES] } },
    style: 'form',
    explode: false,
    description: `Comma-separated (or repeated): ${ACTION_STATUSES.join(', ')}`,
  })
  @ApiQuery({
    name: 'limit',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: MAX_GRAPH_LIMIT },
    description: 'The latest N actions',
  })
  @ApiOkResponse({ description: 'The graph', ...jsonBody('Graph') })
  @ApiErrors(400, 404, 503)
  async get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
    @Res({ passthrough: true }) res: Response,
  ): Promise<GraphView> {
    const q = validateDto(GraphQuery, query);
    this.sessions.get(tenant, sessionId);
    const view = await this.graph.sessionGraph(sessionId, q);
    await this.describeStore(res);
    return view;
  }

  @Get('actions/:actionId/context')
  @ApiOperation({
    summary: 'Failure context of an action, for reflection',
    description:
      'The action (input, output excerpt, error), its retry chain (every RETRY_OF ancestor and descendant), ' +
      'the actions before it, the files it touched with their last earlier writer, its plan step, its kernel, and ' +
      'the checkpoint taken before it (what a retry with restore: true goes back to).',
  })
  @ApiQuery({
    name: 'before',
    required: false,
    schema: { type: 'integer', minimum: 0, maximum: 100, default: DEFAULT_BEFORE },
    description: 'Preceding actions to include',
  })
  @ApiOkResponse({ description: 'The failure context', ...jsonBody('FailureContext') })
  @ApiErrors(400, 404, 503)
  async context(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
    @Query() query: Record<string, unknown>,
    @Res({ passthrough: true }) res: Response,
  ): Promise<FailureContext> {
    const q = validateDto(FailureContextQueryDto, query);
    this.sessions.get(tenant, sessionId);
    const context = await this.graph.failureContext(sessionId, actionId, {
      before: q.before ?? DEFAULT_BEFORE,
    });
    if (!context)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    // The graph keeps the input as sent (a retry reruns it); what leaves the engine is redacted.
    context.action.input = this.redactor.value(context.action.input).value;
    await this.describeStore(res);
    return context;
  }

  @Get('files/lineage')
  @ApiOperation({
    summary: 'Which actions wrote and read a workspace file, in order',
    description:
      "In a fork, the source session's actions up to the fork point come first (each entry names its session).",
  })
  @ApiQuery({
    name: 'path',
    required: true,
    schema: { type: 'string', minLength: 1, maxLength: 4096 },
    description: 'Workspace-relative path, e.g. src/app.py',
  })
  @ApiOkResponse({ description: 'The lineage', ...jsonBody('FileLineage') })
  @ApiErrors(400, 404, 503)
  async lineage(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
    @Res({ passthrough: true }) res: Response,
  ): Promise<FileLineage> {
    const q = validateDto(FileLineageQuery, query);
    this.sessions.get(tenant, sessionId);
    // Recorded paths are normalised (`src/app.py`); accept `./src/app.py` and `src//app.py` for them.
    const lineage = await this.graph.fileLineage(sessionId, posix.normalize(q.path).replace(/\/$/, ''));
    await this.describeStore(res);
    return lineage;
  }

  private async describeStore(res: Response): Promise<void> {
    const health = await this.graph.health();
    res.setHeader('X-Graph-Store', health.store);
    res.setHeader('X-Graph-Status', health.status);
    res.setHeader('X-Graph-Lag', String(health.backlog));
  }
}
