import { Module } from '@nestjs/common';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { SessionsController } from './sessions.controller';

/** The REST endpoints of Sessions, over the module that does the work. */
@Module({
  imports: [SessionsModule],
  controllers: [SessionsController],
})
export class SessionsApiModule {}
