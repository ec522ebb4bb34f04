import { Module } from '@nestjs/common';
import { CLOCK, type Clock } from '@switchyard/common';
import { SessionsModule } from '../sessions/sessions.module';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import { EventsController } from './events.controller';
import { SessionEvents } from './session-events';

/** Per-session Server-Sent Events with a bounded replay buffer. */
@Module({
  imports: [SessionsModule],
  controllers: [EventsController],
  providers: [
    {
      provide: SessionEvents,
      useFactory: (config: EngineConfig, clock: Clock) =>
        new SessionEvents(config.actions.eventsBuffer, () => clock.now()),
      inject: [ENGINE_CONFIG, CLOCK],
    },
  ],
  exports: [SessionEvents],
})
export class EventsModule {}
