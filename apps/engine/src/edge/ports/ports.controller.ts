import { Body, Controller, Get, HttpCode, Inject, Param, Post, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiTags,
} from '@nestjs/swagger';
import {
  SessionKernels,
  SessionPorts,
  SessionProcesses,
  type SessionListeningPort,
} from '@switchyard/sandbox';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Principal } from '../../platform/auth/principal';
import { validateDto } from '../../platform/validation/validate-dto';
import { SessionsService } from '../../session/sessions/sessions.service';
import { ACCESS_TOKEN_DEFAULT_SECONDS, AccessTokens } from '../http/access-tokens';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Caller, Tenant } from '../http/tenant.decorator';
import { PortPreviewDto } from './dto/port-preview.dto';
import { parsePort, previewHost, TOKEN_PARAM } from './port-target';

/** A listening port as `GET …/ports` answers it. */
export interface ListeningPortView {
  port: number;
  address: string;
  tier: SessionListeningPort['tier'];
  process: { id: string; name?: string } | null;
  kernel: { id: string; language?: string } | null;
  url: string;
  host?: string;
}

/**
 * A session's ports: what listens in its sandbox, and preview links that open one in a browser. The proxy itself
 * (`/v1/sessions/{id}/ports/{port}/…`, any method, WebSockets included) is `PortProxy`, outside the OpenAPI document:
 * its answers are the session's server's, not the engine's (docs/ports.md).
 */
@ApiTags('ports')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@ApiErrors(404)
@Controller('v1/sessions/:sessionId/ports')
export class PortsController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly sessions: SessionsService,
    private readonly ports: SessionPorts,
    private readonly processes: SessionProcesses,
    private readonly kernels: SessionKernels,
    private readonly tokens: AccessTokens,
  ) {}

  @Get()
  @ApiOperation({
    summary:
      "The ports something listens on in the session's sandbox, with the process that listens and its URL",
    description:
      'Read from the sandbox itself (its TCP sockets in LISTEN), so a server started any way (a `process` action, a ' +
      'kernel cell, a terminal) shows. Empty when the session has no sandbox running; nothing is started to look.',
  })
  @ApiOkResponse({ description: 'The listening ports', ...jsonBody('PortList') })
  async list(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
  ): Promise<{ ports: ListeningPortView[] }> {
    const session = this.sessions.get(tenant, sessionId);
    const listening = await this.ports.list(session.id);
    return { ports: listening.map((p) => this.view(session.id, p)) };
  }

  @Post(':port/preview')
  @HttpCode(201)
  @ApiOperation({
    summary: 'A preview link to a port: a URL (and a token) a browser opens without the API key',
    description:
      'The token (scope `port:<port>`, this session only) rides in the URL once: the proxy sets it as an HttpOnly ' +
      'cookie scoped to the port’s path (or preview host) and sends the browser on without it. 400 naming `port` ' +
      'for a port outside SWITCHYARD_PORTS_ALLOWED; 403 PORTS_DISABLED when SWITCHYARD_PORTS_ENABLED is off. The ' +
      'port need not be listening yet.',
  })
  @ApiParam({
    name: 'port',
    // The default SWITCHYARD_PORTS_ALLOWED: a port outside what the engine allows is the documented 400.
    schema: { type: 'integer', minimum: 1024, maximum: 65535 },
    description: 'A TCP port of the sandbox, within SWITCHYARD_PORTS_ALLOWED (default 1024-65535)',
  })
  @ApiBody({ schema: schemaRef(PortPreviewDto), required: false })
  @ApiCreatedResponse({ description: 'The preview link', ...jsonBody('PortPreview') })
  @ApiBodyErrors()
  @ApiErrors(403)
  preview(
    @Caller() caller: Principal,
    @Param('sessionId') sessionId: string,
    @Param('port') portText: string,
    @Body() body: unknown,
  ): { url: string; token: string; expiresAt: string; host?: string } {
    const port = parsePort(portText);
    this.ports.check(port);
    const session = this.sessions.get(caller.tenant, sessionId);
    const { ttlSeconds } = validateDto(PortPreviewDto, body === undefined ? {} : body);
    const { token, expiresAt } = this.tokens.issue(
      caller,
      session.id,
      `port:${port}`,
      ttlSeconds ?? ACCESS_TOKEN_DEFAULT_SECONDS,
    );
    const domain = this.config.ports.previewDomain;
    return {
      url: `${proxyPath(session.id, port)}?${TOKEN_PARAM}=${encodeURIComponent(token)}`,
      token,
      expiresAt,
      ...(domain !== undefined && { host: previewHost(session.id, port, domain) }),
    };
  }

  private view(sessionId: string, p: SessionListeningPort): ListeningPortView {
    const processName = p.proc === null ? undefined : this.processName(sessionId, p.proc);
    const kernel = p.kernel === null ? undefined : this.kernelLanguage(sessionId, p.kernel);
    const domain = this.config.ports.previewDomain;
    return {
      port: p.port,
      address: p.address,
      tier: p.tier,
      process:
        p.proc === null ? null : { id: p.proc, ...(processName !== undefined && { name: processName }) },
      kernel: p.kernel === null ? null : { id: p.kernel, ...(kernel !== undefined && { language: kernel }) },
      url: proxyPath(sessionId, p.port),
      ...(domain !== undefined && { host: previewHost(sessionId, p.port, domain) }),
    };
  }

  private processName(sessionId: string, id: string): string | undefined {
    try {
      return this.processes.get(sessionId, id).name;
    } catch {
      return undefined;
    }
  }

  private kernelLanguage(sessionId: string, id: string): string | undefined {
    try {
      return this.kernels.get(sessionId, id).language;
    } catch {
      return undefined;
    }
  }
}

const proxyPath = (sessionId: string, port: number): string =>
  `/v1/sessions/${encodeURIComponent(sessionId)}/ports/${port}/`;
