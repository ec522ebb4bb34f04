import {
  Body,
  Controller,
  Delete,
  Get,
  Headers,
  HttpCode,
  Param,
  Post,
  Query,
  Res,
  UseGuards,
} from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import type { Checkpoint, CheckpointDiff } from '@switchyard/workspace';
import type { Response } from 'express';
import { ApiKeyGuard } from '../http/api-key.guard';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { validateDto } from '../../platform/validation/validate-dto';
import { IdempotencyService, sendIdempotentStatus } from '../../engine/idempotency/idempotency.service';
import { type SessionResponse, toSessionResponse } from '../../session/sessions/session.response';
import { SessionsService } from '../../session/sessions/sessions.service';
import { CheckpointDiffQuery } from './dto/checkpoint-diff.query';
import { CreateCheckpointDto } from './dto/create-checkpoint.dto';
import { ForkSessionDto } from './dto/fork-session.dto';
import { type RestoreOutcome, SessionCheckpoints } from '../../session/checkpoints/session-checkpoints';
import { ApiIdempotencyKey } from '../../engine/idempotency/api-idempotency-key';
import { GET_NEW_SESSION_LINK } from '../sessions/session.schemas';

/**
 * A session's workspace checkpoints (take, list, delete, restore, diff) and forks. Copy-on-write where the workspace
 * allows it (btrfs images): taking one costs milliseconds and, while nothing changes, almost no space.
 */
@ApiTags('checkpoints')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId')
export class CheckpointsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly checkpoints: SessionCheckpoints,
    private readonly idempotency: IdempotencyService,
  ) {}

  @Post('checkpoints')
  @ApiOperation({
    summary: "Checkpoint the session's workspace: its files, directories, modes and links as they are now",
    description:
      '201 with the checkpoint. 409 (CHECKPOINT_LIMIT) past SWITCHYARD_MAX_CHECKPOINTS; 413 (CHECKPOINT_SPACE) ' +
      "when the workspace's cap has no room for it. An `Idempotency-Key` header makes a repeated request answer " +
      'the first checkpoint.',
  })
  @ApiIdempotencyKey()
  @ApiBody({ schema: schemaRef(CreateCheckpointDto), required: false })
  @ApiCreatedResponse({ description: 'The checkpoint', ...jsonBody('Checkpoint') })
  @ApiBodyErrors()
  @ApiErrors(404, 409, 422)
  async create(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ): Promise<Checkpoint> {
    const session = this.sessions.get(tenant, sessionId);
    const { label } = validateDto(CreateCheckpointDto, body === undefined ? {} : body);
    const answer = await this.idempotency.run<Checkpoint>(
      tenant,
      idempotencyKey,
      { method: 'POST', path: `/v1/sessions/${sessionId}/checkpoints`, body },
      async () => ({
        statusCode: 201,
        body: await this.checkpoints.create(session, label !== undefined ? { label } : {}),
      }),
    );
    return sendIdempotentStatus(res, answer);
  }

  @Get('checkpoints')
  @ApiOperation({ summary: "The session's checkpoints, oldest first" })
  @ApiOkResponse({ description: 'The checkpoints', ...jsonBody('CheckpointList') })
  @ApiErrors(404)
  async list(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
  ): Promise<{ checkpoints: Checkpoint[] }> {
    return { checkpoints: await this.checkpoints.list(this.sessions.get(tenant, sessionId)) };
  }

  @Get('checkpoints/:checkpointId')
  @ApiOperation({ summary: 'One checkpoint' })
  @ApiOkResponse({ description: 'The checkpoint', ...jsonBody('Checkpoint') })
  @ApiErrors(404)
  get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('checkpointId') checkpointId: string,
  ): Promise<Checkpoint> {
    return this.checkpoints.get(this.sessions.get(tenant, sessionId), checkpointId);
  }

  @Delete('checkpoints/:checkpointId')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a checkpoint (its graph node stays, marked deleted)' })
  @ApiNoContentResponse({ description: 'Deleted' })
  @ApiErrors(404)
  async remove(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('checkpointId') checkpointId: string,
  ): Promise<void> {
    await this.checkpoints.remove(this.sessions.get(tenant, sessionId), checkpointId);
  }

  @Post('checkpoints/:checkpointId/restore')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Put the workspace back exactly as it was at the checkpoint',
    description:
      '409 (ACTIONS_RUNNING) while an action of the session runs: cancel it first. Kernels and background ' +
      'processes are not part of a checkpoint and keep running: `running` lists them and `note` says so.',
  })
  @ApiOkResponse({ description: 'Restored', ...jsonBody('CheckpointRestore') })
  @ApiErrors(404, 409)
  restore(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('checkpointId') checkpointId: string,
  ): Promise<RestoreOutcome> {
    return this.checkpoints.restore(this.sessions.get(tenant, sessionId), checkpointId);
  }

  @Get('checkpoints/:checkpointId/diff')
  @ApiOperation({
    summary:
      'What changed since the checkpoint: added, removed and modified paths, unified diffs of small text files',
    description:
      '`to`: `current` (default, the workspace now) or another checkpoint. Text files up to 64 KiB get a unified ' +
      'diff (1 MiB in all); others say why not (`diffOmitted`). `truncated` past 10 000 paths.',
  })
  @ApiQuery({
    name: 'to',
    required: false,
    schema: { type: 'string', pattern: '^(current|chk_[0-9a-f]{24})$', default: 'current' },
    description: '`current` (the workspace now) or the id of another checkpoint of the session',
  })
  @ApiOkResponse({ description: 'The changes', ...jsonBody('CheckpointDiff') })
  @ApiErrors(400, 404)
  diff(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('checkpointId') checkpointId: string,
    @Query() query: Record<string, unknown>,
  ): Promise<CheckpointDiff> {
    const session = this.sessions.get(tenant, sessionId);
    const { to } = validateDto(CheckpointDiffQuery, query);
    return this.checkpoints.diff(session, checkpointId, to ?? 'current');
  }

  @Post('fork')
  @ApiTags('sessions')
  @ApiOperation({
    summary: 'Fork the session: a new session whose workspace is a copy of this one, now or at a checkpoint',
    description:
      "201 with the new session (same tenant and settings, `forkedFrom`). The copy is the workspace's files only: " +
      'no checkpoints, kernels or processes; the two are isolated both ways from then on.',
  })
  @ApiIdempotencyKey()
  @ApiBody({ schema: schemaRef(ForkSessionDto), required: false })
  @ApiCreatedResponse({
    description: 'The new session',
    ...jsonBody('Session'),
    links: {
      GetSession: GET_NEW_SESSION_LINK,
    },
  })
  @ApiBodyErrors()
  @ApiErrors(404, 409, 422, 503)
  async fork(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ): Promise<SessionResponse> {
    const source = this.sessions.get(tenant, sessionId);
    const { checkpointId } = validateDto(ForkSessionDto, body === undefined ? {} : body);
    const answer = await this.idempotency.run<SessionResponse>(
      tenant,
      idempotencyKey,
      { method: 'POST', path: `/v1/sessions/${sessionId}/fork`, body },
      async () => ({
        statusCode: 201,
        body: toSessionResponse(await this.checkpoints.fork(source, checkpointId)),
      }),
    );
    return sendIdempotentStatus(res, answer);
  }
}
