import { Module } from '@nestjs/common';
import { HooksModule } from '../../gates/hooks/hooks.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { HooksController } from './hooks.controller';

/** The REST endpoints of Hooks, over the module that does the work. */
@Module({
  imports: [HooksModule, SessionsModule],
  controllers: [HooksController],
})
export class HooksApiModule {}
