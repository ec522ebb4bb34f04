import { Module } from '@nestjs/common';
import { ToolsModule } from '../../engine/tools/tools.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ToolsController } from './tools.controller';

/** The REST endpoints of Tools, over the module that does the work. */
@Module({
  imports: [ToolsModule, SessionsModule],
  controllers: [ToolsController],
})
export class ToolsApiModule {}
