import { Module } from '@nestjs/common';
import { ActionsModule } from '../actions/actions.module';
import { PoliciesModule } from '../policies/policies.module';
import { SessionsModule } from '../sessions/sessions.module';
import { SkillsModule } from '../skills/skills.module';
import { ToolCallsService } from './tool-calls.service';
import { ToolsController } from './tools.controller';
import { ToolsService } from './tools.service';

/** Tools for model loops: the catalog in each API's shape, and tool calls run as actions. */
@Module({
  imports: [ActionsModule, SessionsModule, PoliciesModule, SkillsModule],
  controllers: [ToolsController],
  providers: [ToolsService, ToolCallsService],
  exports: [ToolsService, ToolCallsService],
})
export class ToolsModule {}
