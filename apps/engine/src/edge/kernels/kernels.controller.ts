import { Controller, Delete, Get, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiV1Errors } from '../http/api-responses';
import { type KernelInfo, SessionKernels } from '@switchyard/sandbox';
import { ApiKeyGuard } from '../http/api-key.guard';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { SessionsService } from '../../session/sessions/sessions.service';

/**
 * A session's kernels (the interpreters its `state: "session"` code actions run in). These act at once, never
 * queued behind the session's actions: an interrupt must reach the cell that is running.
 */
@ApiTags('kernels')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@ApiErrors(404)
@Controller('v1/sessions/:sessionId/kernels')
export class KernelsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly kernels: SessionKernels,
  ) {}

  @Get()
  @ApiOperation({ summary: "The session's live kernels: language, tier, execution count, busy" })
  @ApiOkResponse({ description: 'The kernels', ...jsonBody('KernelList') })
  list(@Tenant() tenant: string, @Param('sessionId') sessionId: string): { kernels: KernelInfo[] } {
    this.sessions.get(tenant, sessionId);
    return { kernels: this.kernels.list(sessionId) };
  }

  @Get(':kernelId')
  @ApiOperation({ summary: 'One kernel of the session' })
  @ApiOkResponse({ description: 'The kernel', ...jsonBody('Kernel') })
  get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): KernelInfo {
    this.sessions.get(tenant, sessionId);
    return this.kernels.get(sessionId, kernelId);
  }

  @Post(':kernelId/interrupt')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Stop the running cell (KeyboardInterrupt); the kernel keeps its state. running: false when idle',
  })
  @ApiOkResponse({ description: 'Interrupted, or idle (`running: false`)', ...jsonBody('KernelInterrupt') })
  async interrupt(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): Promise<{ kernelId: string; running: boolean }> {
    this.sessions.get(tenant, sessionId);
    const { running } = await this.kernels.interrupt(sessionId, kernelId);
    return { kernelId, running };
  }

  @Post(':kernelId/restart')
  @HttpCode(200)
  @ApiOperation({ summary: 'A fresh interpreter under the same id: state cleared; a running cell ends' })
  @ApiOkResponse({ description: 'The restarted kernel', ...jsonBody('Kernel') })
  async restart(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): Promise<KernelInfo> {
    this.sessions.get(tenant, sessionId);
    return this.kernels.restart(sessionId, kernelId);
  }

  @Delete(':kernelId')
  @HttpCode(204)
  @ApiOperation({ summary: 'End the kernel; a running cell ends with its state lost' })
  @ApiNoContentResponse({ description: 'Ended' })
  async remove(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('kernelId') kernelId: string,
  ): Promise<void> {
    this.sessions.get(tenant, sessionId);
    await this.kernels.stop(sessionId, kernelId);
  }
}
