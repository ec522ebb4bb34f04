import { Body, Controller, Delete, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { ApiKeyGuard } from '../http/api-key.guard';
import { Tenant } from '../http/tenant.decorator';
import { validateDto } from '../../platform/validation/validate-dto';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { CreateSessionDto } from './dto/create-session.dto';
import { type SessionResponse, toSessionResponse } from '../../session/sessions/session.response';
import { SessionsService } from '../../session/sessions/sessions.service';
import { GET_NEW_SESSION_LINK } from './session.schemas';

@ApiTags('sessions')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions')
export class SessionsController {
  constructor(private readonly sessions: SessionsService) {}

  @Post()
  @ApiOperation({ summary: 'Open a session with its own workspace' })
  @ApiBody({ schema: schemaRef(CreateSessionDto), required: false })
  @ApiCreatedResponse({
    description: 'The new session',
    ...jsonBody('Session'),
    links: {
      GetSession: GET_NEW_SESSION_LINK,
      RunAction: {
        operationId: 'ActionsController_run',
        parameters: { sessionId: '$response.body#/id' },
        description: 'Run an action in it',
      },
    },
  })
  @ApiBodyErrors()
  @ApiErrors(503)
  async create(@Tenant() tenant: string, @Body() body: unknown): Promise<SessionResponse> {
    const dto = validateDto(CreateSessionDto, body === undefined ? {} : body);
    return toSessionResponse(await this.sessions.create(tenant, dto));
  }

  @Get()
  @ApiOperation({ summary: "List the caller's sessions" })
  @ApiOkResponse({ description: 'The sessions', ...jsonBody('SessionList') })
  async list(@Tenant() tenant: string): Promise<{ sessions: SessionResponse[] }> {
    const sessions = await this.sessions.listAll(tenant);
    const activity = await this.sessions.activityOf(sessions);
    return { sessions: sessions.map((s, i) => toSessionResponse(s, activity[i])) };
  }

  @Get(':sessionId')
  @ApiOperation({ summary: 'Describe a session' })
  @ApiOkResponse({ description: 'The session', ...jsonBody('Session') })
  @ApiErrors(404)
  async get(@Tenant() tenant: string, @Param('sessionId') id: string): Promise<SessionResponse> {
    const session = this.sessions.get(tenant, id);
    const [activity] = await this.sessions.activityOf([session]);
    return toSessionResponse(session, activity);
  }

  @Delete(':sessionId')
  @HttpCode(204)
  @ApiOperation({ summary: 'End a session: stop its actions, release its sandboxes, remove its workspace' })
  @ApiNoContentResponse({ description: 'Ended' })
  @ApiErrors(404)
  async remove(@Tenant() tenant: string, @Param('sessionId') id: string): Promise<void> {
    await this.sessions.delete(tenant, id);
  }
}
