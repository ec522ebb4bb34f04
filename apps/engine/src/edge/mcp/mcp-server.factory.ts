import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpToolCalls } from './mcp-tool-calls.service';

/** Name and version the server gives in its `initialize` answer. */
export const MCP_SERVER_INFO = { name: 'switchyard', version: '0.1.0' } as const;

/** What a client reads in `instructions`: which engine session its tools run in. */
export function mcpInstructions(engineSessionId: string): string {
  return (
    `Switchyard sandbox tools. Every call of this MCP session runs in engine session ${engineSessionId} ` +
    '(one workspace, persistent bash/python/node kernels, one browser), which ends when the MCP session closes. ' +
    `Tool results carry it in _meta["switchyard/sessionId"]; the REST API (/v1/sessions/${engineSessionId}) ` +
    'shows the same session with the same key.'
  );
}

/** One MCP server per MCP session, bound to its engine session and tenant. */
@Injectable()
export class McpServerFactory {
  constructor(private readonly tools: McpToolCalls) {}

  create(tenant: string, engineSessionId: string): Server {
    const server = new Server(MCP_SERVER_INFO, {
      capabilities: { tools: {} },
      instructions: mcpInstructions(engineSessionId),
    });
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: this.tools.list(tenant, engineSessionId),
    }));
    server.setRequestHandler(CallToolRequestSchema, (request) =>
      this.tools.call(tenant, engineSessionId, request.params.name, request.params.arguments),
    );
    return server;
  }
}
