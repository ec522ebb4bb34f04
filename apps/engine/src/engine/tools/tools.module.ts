import { Module } from '@nestjs/common';
import { ActionsModule } from '../actions/actions.module';
import { PoliciesModule } from '../../gates/policies/policies.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { SkillsModule } from '../skills/skills.module';
import { ToolCallsService } from './tool-calls.service';
import { ToolResultContent } from './tool-result-content.service';
import { ToolsService } from './tools.service';

/** Tools for model loops: the catalog in each API's shape, and tool calls run as actions. */
@Module({
  imports: [ActionsModule, SessionsModule, PoliciesModule, SkillsModule],
  providers: [ToolsService, ToolCallsService, ToolResultContent],
  exports: [ToolsService, ToolCallsService],
})
export class ToolsModule {}
