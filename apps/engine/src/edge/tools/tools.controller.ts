import { Body, Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { TOOL_CALLS_BODY } from './tool-calls.openapi';
import { TOOL_CALL_ANSWER } from './tool.schemas';
import { ToolCallsService, type ToolAnswer } from '../../engine/tools/tool-calls.service';
import { parseToolListQuery } from '../../engine/tools/tool-list.query';
import { ToolsService } from '../../engine/tools/tools.service';
import { InvalidInputError } from '@switchyard/common';
import { SessionsService } from '../../session/sessions/sessions.service';

@ApiTags('tools')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller()
export class ToolsController {
  constructor(
    private readonly tools: ToolsService,
    private readonly calls: ToolCallsService,
    private readonly sessions: SessionsService,
  ) {}

  @Get('v1/tools')
  @ApiOperation({
    summary: "The engine's tools for a model's tool-calling API",
    description:
      "Pass the list straight to Anthropic's `tools`, OpenAI Chat Completions' `tools` (`format=openai`: " +
      '`{type: "function", function: {…}}`) or the OpenAI Responses API\'s `tools` (`format=openai-responses`: flat ' +
      '`{type: "function", name, description, parameters, strict}`). With `format=openai&strict=true`, and with ' +
      '`format=openai-responses` unless `strict=false` (the Responses API takes a function without `strict` as ' +
      'strict), every function has `strict: true` and a schema OpenAI strict mode accepts: every object closed ' +
      '(`additionalProperties: false`) with all its properties in `required`, optional fields nullable (send ' +
      '`null` to leave one out), maps such as `env` as lists of `{name, value}` pairs, and lengths, bounds and ' +
      'patterns said in the descriptions (the engine still enforces them).',
  })
  @ApiQuery({
    name: 'format',
    schema: { type: 'string', enum: ['anthropic', 'openai', 'openai-responses'], default: 'anthropic' },
    required: false,
    description: 'Default: anthropic',
  })
  @ApiQuery({
    name: 'strict',
    schema: { type: 'string', enum: ['true', 'false'] },
    required: false,
    description:
      'OpenAI strict-mode schemas. Default: false with format=openai (Chat Completions), true with ' +
      'format=openai-responses (as the Responses API reads a function without `strict`). strict=true with ' +
      'format=anthropic (or no format) is a 400 naming `strict`.',
  })
  @ApiQuery({
    name: 'sessionId',
    schema: { type: 'string', minLength: 1 },
    required: false,
    description:
      'List what this session’s policy offers (its own layer too); without it, what the engine’s and the ' +
      'caller’s tenant’s policies offer. A tool whose every call a policy denies is left out.',
  })
  @ApiOkResponse({ description: 'The tools, in the format asked for', ...jsonBody('ToolList') })
  @ApiErrors(400, 404)
  list(
    @Tenant() tenant: string,
    @Query('format') format: unknown,
    @Query('strict') strict: unknown,
    @Query('sessionId') sessionId: unknown,
  ): { tools: unknown[] } {
    const parsed = parseToolListQuery(format, strict);
    if (sessionId !== undefined && (typeof sessionId !== 'string' || sessionId.length === 0)) {
      throw new InvalidInputError('sessionId', 'sessionId must be a session id');
    }
    const session = typeof sessionId === 'string' ? this.sessions.get(tenant, sessionId) : undefined;
    return { tools: this.tools.list(parsed, { tenant, ...(session && { session }) }) };
  }

  @Post('v1/sessions/:sessionId/tool-calls')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Execute a tool call (or an array of them, in order) and answer in tool-result shape',
    description:
      'Takes `{id, name, input}`, an Anthropic `tool_use` block `{type: "tool_use", id, name, input}`, an ' +
      'OpenAI Chat Completions tool call `{id, type: "function", function: {name, arguments}}` (`arguments` a JSON ' +
      'string or an object), an OpenAI Responses API `function_call` item `{type: "function_call", call_id, name, ' +
      "arguments}`, or an array mixing them. Each answer keeps its call's shape: `{tool_use_id, content, is_error}`; " +
      'for a `tool_use` block also `type: "tool_result"` (a `tool_result` block as is); for a Chat Completions call ' +
      'also `tool_call_id` and `message: {role: "tool", tool_call_id, content}` (the message to append as is); for a ' +
      '`function_call` item `call_id` and `item: {type: "function_call_output", call_id, output}` (the item to append ' +
      'as is). Images (a `read` of a PNG, JPEG, GIF or WebP file, a cell’s image results, a browser screenshot, each ' +
      'within SWITCHYARD_TOOL_IMAGE_MAX_BYTES) are attached where the API takes them: `content` becomes a list of ' +
      'Anthropic `text` and `image` blocks, `output` a list of `input_text` and `input_image` items; a Chat ' +
      'Completions tool message takes text only, so there an image is a line naming it and where it is. A field ' +
      'sent as `null` counts as absent. A bad call (unknown tool, invalid input or `arguments`, refusal, timeout) ' +
      "is `is_error: true` with a message naming the tool's own field, not an HTTP error; only a call without an " +
      '`id` (a `function_call` item: without `call_id` or `id`) is a 400.',
  })
  @ApiBody({ schema: TOOL_CALLS_BODY })
  @ApiOkResponse({ description: 'One answer per call, in its shape', schema: TOOL_CALL_ANSWER })
  @ApiBodyErrors()
  @ApiErrors(404)
  call(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
  ): Promise<ToolAnswer | ToolAnswer[]> {
    return this.calls.run(tenant, sessionId, body);
  }
}
