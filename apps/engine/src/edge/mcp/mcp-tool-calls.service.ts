import { Injectable, Logger } from '@nestjs/common';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { NotFoundError } from '@switchyard/common';
import { ToolCallsService, type ToolOutcome } from '../../engine/tools/tool-calls.service';
import { ToolsService } from '../../engine/tools/tools.service';
import { SessionsService } from '../../session/sessions/sessions.service';
import { mcpErrorResult, toMcpResult } from './mcp-tool-result';

/**
 * The engine's tools in MCP terms: the catalog as `tools/list` answers it, and `tools/call` run through the same
 * `ToolCallsService` as `POST /v1/sessions/:id/tool-calls`, so results, errors, images and records are the same.
 */
@Injectable()
export class McpToolCalls {
  private readonly logger = new Logger('Mcp');

  constructor(
    private readonly tools: ToolsService,
    private readonly toolCalls: ToolCallsService,
    private readonly sessions: SessionsService,
  ) {}

  /**
   * The catalog in Anthropic's shape, which is MCP's but for the schema's key: what the engine session's policy offers
   * (its engine, tenant and session layers).
   */
  list(tenant: string, engineSessionId: string): Tool[] {
    const session = this.sessions.find(engineSessionId);
    const scope = { tenant, ...(session && { session }) };
    return (
      this.tools.list('anthropic', scope) as { name: string; description: string; input_schema: unknown }[]
    ).map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.input_schema as Tool['inputSchema'],
    }));
  }

  async call(tenant: string, engineSessionId: string, name: string, input: unknown): Promise<CallToolResult> {
    let outcome: ToolOutcome;
    try {
      outcome = await this.toolCalls.outcome(tenant, engineSessionId, name, input);
    } catch (err) {
      // The engine session ended under the MCP session (expired, deleted through the REST API).
      if (err instanceof NotFoundError) {
        return mcpErrorResult(
          `engine session ${engineSessionId} has ended; open a new MCP session (initialize) to get a new one`,
          engineSessionId,
        );
      }
      this.logger.error({
        msg: 'MCP tool call failed',
        tool: name,
        sessionId: engineSessionId,
        err: String(err),
      });
      throw err;
    }
    return toMcpResult(outcome, engineSessionId);
  }
}
