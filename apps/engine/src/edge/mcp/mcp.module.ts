import { Module } from '@nestjs/common';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ToolsModule } from '../../engine/tools/tools.module';
import { McpController } from './mcp.controller';
import { McpServerFactory } from './mcp-server.factory';
import { McpSessions } from './mcp-sessions.service';
import { McpToolCalls } from './mcp-tool-calls.service';

/** The engine's tools over MCP (Streamable HTTP at `/mcp`): one engine session per MCP session. */
@Module({
  imports: [SessionsModule, ToolsModule],
  controllers: [McpController],
  providers: [McpSessions, McpServerFactory, McpToolCalls],
})
export class McpModule {}
