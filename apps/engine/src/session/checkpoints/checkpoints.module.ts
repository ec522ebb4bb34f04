import { Module } from '@nestjs/common';
import { EventsModule } from '../events/events.module';
import { SessionsModule } from '../sessions/sessions.module';
import { SessionCheckpoints } from './session-checkpoints';

/** Workspace checkpoints, restores and forks over REST, recorded in the graph; actions and plans use them too. */
@Module({
  imports: [SessionsModule, EventsModule],
  providers: [SessionCheckpoints],
  exports: [SessionCheckpoints],
})
export class CheckpointsModule {}
