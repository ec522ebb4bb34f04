import { Module } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { CLOCK, type Clock } from '@switchyard/common';
import { SessionsModule } from '../sessions/sessions.module';
import { SessionsService } from '../sessions/sessions.service';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { PostgresDb } from '../../state/storage/postgres-db';
import { SessionEventLog } from '../../state/events/session-event-log';
import { SessionEvents } from './session-events';

/** Per-session Server-Sent Events with a bounded replay buffer (kept in Postgres too, with replicas). */
@Module({
  imports: [SessionsModule],
  providers: [
    {
      provide: SessionEventLog,
      useFactory: (
        config: EngineConfig,
        ref: ModuleRef,
        sessions: SessionsService,
      ): SessionEventLog | null => {
        if (config.state.store !== 'postgres') return null;
        const log = new SessionEventLog(ref.get(PostgresDb, { strict: false }), config.actions.eventsBuffer);
        sessions.onSessionEnd((sessionId) => log.drop(sessionId));
        return log;
      },
      inject: [ENGINE_CONFIG, ModuleRef, SessionsService],
    },
    {
      provide: SessionEvents,
      useFactory: (config: EngineConfig, clock: Clock, log: SessionEventLog | null) =>
        new SessionEvents(
          config.actions.eventsBuffer,
          () => clock.now(),
          log ? (sessionId, event) => log.append(sessionId, event) : undefined,
        ),
      inject: [ENGINE_CONFIG, CLOCK, SessionEventLog],
    },
  ],
  exports: [SessionEvents, SessionEventLog],
})
export class EventsModule {}
