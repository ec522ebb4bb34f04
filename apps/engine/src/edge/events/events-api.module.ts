import { Module } from '@nestjs/common';
import { EventsModule } from '../../session/events/events.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { EventsController } from './events.controller';

/** The REST endpoints of Events, over the module that does the work. */
@Module({
  imports: [EventsModule, SessionsModule],
  controllers: [EventsController],
})
export class EventsApiModule {}
