import { Body, Controller, Delete, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiTags,
} from '@nestjs/swagger';
import { NotFoundError } from '@switchyard/common';
import { SessionsService } from '../../session/sessions/sessions.service';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { parseStartKernel, StartKernelDto } from './dto/start-kernel.dto';
import { JupyterAuthGuard } from './jupyter-auth.guard';
import { type JupyterKernelModel, JupyterKernels } from './jupyter-kernels';
import {
  DEFAULT_KERNELSPEC,
  isKernelspecName,
  KERNELSPEC_NAMES,
  type KernelspecModel,
  kernelspecModel,
  kernelspecsModel,
} from './jupyter-kernelspecs';

/** What a started Jupyter kernel leads to: the operations on it, by the id in its answer. */
const kernelLink = (operationId: string, description: string) => ({
  operationId,
  parameters: { sessionId: '$request.path.sessionId', kernelId: '$response.body#/id' },
  description,
});

/**
 * The session's kernels for Jupyter clients: the REST half of the Kernel Gateway protocol jupyter_server's gateway
 * client speaks (`jupyter server --gateway-url=…/v1/sessions/{id}/jupyter`). The other half, each kernel's
 * `channels` WebSocket, is `JupyterChannels`. Keys are accepted as `token KEY` (the gateway client's `auth_token`)
 * or `Bearer KEY`.
 */
@ApiTags('jupyter')
@ApiBearerAuth()
@UseGuards(JupyterAuthGuard)
@ApiV1Errors()
@ApiErrors(404)
@Controller('v1/sessions/:sessionId/jupyter/api')
export class JupyterController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly kernels: JupyterKernels,
  ) {}

  @Get('kernelspecs')
  @ApiOperation({
    summary: 'Kernelspecs: python3, javascript (node) and bash, one per language of the session kernels',
  })
  @ApiOkResponse({ description: 'The kernelspecs and the default one', ...jsonBody('JupyterKernelspecs') })
  specs(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
  ): ReturnType<typeof kernelspecsModel> {
    this.sessions.get(tenant, sessionId);
    return kernelspecsModel();
  }

  @Get('kernelspecs/:name')
  @ApiOperation({ summary: 'One kernelspec' })
  @ApiParam({ name: 'name', schema: { type: 'string', enum: [...KERNELSPEC_NAMES] } })
  @ApiOkResponse({ description: 'The kernelspec', ...jsonBody('JupyterKernelspec') })
  spec(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('name') name: string,
  ): KernelspecModel {
    this.sessions.get(tenant, sessionId);
    if (!isKernelspecName(name)) {
      throw new NotFoundError(`no kernelspec ${name}: the kernelspecs are python3, javascript and bash`, {
        name,
      });
    }
    return kernelspecModel(name);
  }

  @Get('kernels')
  @ApiOperation({ summary: 'The session’s Jupyter kernels' })
  @ApiOkResponse({ description: 'The Jupyter kernels, oldest first', ...jsonBody('JupyterKernelList') })
  list(@Tenant() tenant: string, @Param('sessionId') sessionId: string): JupyterKernelModel[] {
    this.sessions.get(tenant, sessionId);
    return this.kernels.list(sessionId).map((k) => this.kernels.model(k));
  }

  @Post('kernels')
  @ApiOperation({
    summary: 'Start a Jupyter kernel: a handle onto the session kernel of the kernelspec’s language',
    description:
      'The session kernel itself starts with the first cell (or is the one REST and MCP cells already use: state ' +
      'is shared). Each cell sent on its `channels` WebSocket is a code action with `state: "session"`. 409 ' +
      '`JUPYTER_KERNEL_LIMIT` past 64 Jupyter kernels in the session.',
  })
  @ApiBody({ schema: schemaRef(StartKernelDto), required: false })
  @ApiCreatedResponse({
    description: 'The new Jupyter kernel',
    ...jsonBody('JupyterKernel'),
    links: {
      GetJupyterKernel: kernelLink('JupyterController_get', 'The Jupyter kernel'),
      InterruptJupyterKernel: kernelLink('JupyterController_interrupt', 'Interrupt its running cell'),
      RestartJupyterKernel: kernelLink('JupyterController_restart', 'Restart its session kernel'),
      DeleteJupyterKernel: kernelLink('JupyterController_remove', 'Delete it'),
    },
  })
  @ApiBodyErrors()
  @ApiErrors(409)
  start(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
  ): JupyterKernelModel {
    const session = this.sessions.get(tenant, sessionId);
    const { name, cellTimeoutMs } = parseStartKernel(body);
    return this.kernels.model(this.kernels.start(session, name ?? DEFAULT_KERNELSPEC, cellTimeoutMs));
  }

  @Get('kernels/:kernelId')
  @ApiOperation({ summary: 'One Jupyter kernel' })
  @ApiOkResponse({ description: 'The Jupyter kernel', ...jsonBody('JupyterKernel') })
  get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): JupyterKernelModel {
    this.sessions.get(tenant, sessionId);
    return this.kernels.model(this.kernels.get(sessionId, kernelId));
  }

  @Delete('kernels/:kernelId')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Delete a Jupyter kernel: its session kernel stops (its state is gone) and its WebSockets close',
  })
  @ApiNoContentResponse({ description: 'Deleted' })
  async remove(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): Promise<void> {
    const session = this.sessions.get(tenant, sessionId);
    await this.kernels.remove(session, this.kernels.get(sessionId, kernelId));
  }

  @Post('kernels/:kernelId/interrupt')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Interrupt the running cell (KeyboardInterrupt); the session kernel keeps its state',
    description: 'A cell that has not reached its kernel yet (queued, or awaiting approval) is cancelled.',
  })
  @ApiNoContentResponse({ description: 'Interrupted (or nothing was running)' })
  async interrupt(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): Promise<void> {
    const session = this.sessions.get(tenant, sessionId);
    await this.kernels.interrupt(session, this.kernels.get(sessionId, kernelId));
  }

  @Post('kernels/:kernelId/restart')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Restart: a fresh interpreter for the session kernel of the language (state cleared, for REST too)',
  })
  @ApiOkResponse({ description: 'The Jupyter kernel', ...jsonBody('JupyterKernel') })
  async restart(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): Promise<JupyterKernelModel> {
    this.sessions.get(tenant, sessionId);
    const kernel = this.kernels.get(sessionId, kernelId);
    await this.kernels.restart(kernel);
    return this.kernels.model(kernel);
  }
}
