import { Body, Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard } from '../http/api-key.guard';
import { RequestValidationError } from '../http/request-validation.error';
import { Tenant } from '../http/tenant.decorator';
import { ToolCallsService, type ToolResult } from './tool-calls.service';
import { ToolsService } from './tools.service';

@ApiTags('tools')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@Controller()
export class ToolsController {
  constructor(
    private readonly tools: ToolsService,
    private readonly calls: ToolCallsService,
  ) {}

  @Get('v1/tools')
  @ApiOperation({
    summary: "The engine's tools for a model's tool-calling API",
    description: "Pass the list straight to Anthropic's `tools` or OpenAI's `tools`.",
  })
  @ApiQuery({ name: 'format', enum: ['anthropic', 'openai'], required: false })
  list(@Query('format') format: string | undefined): { tools: unknown[] } {
    const f = format ?? 'anthropic';
    if (f !== 'anthropic' && f !== 'openai') {
      throw new RequestValidationError([{ field: 'format', message: 'must be anthropic or openai' }]);
    }
    return { tools: this.tools.list(f) };
  }

  @Post('v1/sessions/:sessionId/tool-calls')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Execute a tool call (or an array of them, in order) and answer in tool-result shape',
    description:
      '`{id, name, input}` as the model produced it → `{tool_use_id, content, is_error}`. A bad call is ' +
      '`is_error: true` with a message the model can act on, not an HTTP error.',
  })
  call(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
  ): Promise<ToolResult | ToolResult[]> {
    return this.calls.run(tenant, sessionId, body);
  }
}
