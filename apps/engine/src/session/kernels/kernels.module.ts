import { Module } from '@nestjs/common';
import { EventsModule } from '../events/events.module';
import { SessionsModule } from '../sessions/sessions.module';
import { StatefulEvents } from './stateful-events';

/** Session kernels over REST, and kernels and background processes on the session's event stream. */
@Module({
  imports: [SessionsModule, EventsModule],
  providers: [StatefulEvents],
})
export class KernelsModule {}
