import { Controller, Delete, Get, Post, Req, Res, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ApiKeyGuard } from '../http/api-key.guard';
import { Tenant } from '../http/tenant.decorator';
import { McpSessions } from './mcp-sessions.service';

/**
 * `/mcp`: the Model Context Protocol over Streamable HTTP (JSON-RPC, answered as JSON or an event stream by the
 * SDK's transport), behind the same bearer keys as `/v1`. Left out of the OpenAPI document: its operations are
 * JSON-RPC methods, not REST routes (docs/tools-and-mcp.md documents them).
 */
@ApiExcludeController()
@UseGuards(ApiKeyGuard)
@Controller('mcp')
export class McpController {
  constructor(private readonly sessions: McpSessions) {}

  @Post()
  post(@Tenant() tenant: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.sessions.handle(tenant, req, res);
  }

  @Get()
  stream(@Tenant() tenant: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.sessions.handle(tenant, req, res);
  }

  @Delete()
  close(@Tenant() tenant: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.sessions.handle(tenant, req, res);
  }
}
