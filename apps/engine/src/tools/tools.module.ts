import { Module } from '@nestjs/common';
import { ActionsModule } from '../actions/actions.module';
import { SessionsModule } from '../sessions/sessions.module';
import { ToolCallsService } from './tool-calls.service';
import { ToolsController } from './tools.controller';
import { ToolsService } from './tools.service';

/** Tools for model loops: the catalog in each API's shape, and tool calls run as actions. */
@Module({
  imports: [ActionsModule, SessionsModule],
  controllers: [ToolsController],
  providers: [ToolsService, ToolCallsService],
  exports: [ToolsService, ToolCallsService],
})
export class ToolsModule {}
