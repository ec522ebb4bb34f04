import { Module } from '@nestjs/common';
import { SessionStore } from './session.store';
import { SessionsController } from './sessions.controller';
import { SessionsService } from './sessions.service';
import { SqliteSessionStore } from './sqlite-session.store';
import { PostgresSessionStore } from './postgres-session.store';
import { stateStore } from '../storage/storage.module';

/** Session lifecycles: creation, tenant-scoped lookup, idle expiry, and the hooks that release a session's work. */
@Module({
  controllers: [SessionsController],
  providers: [
    stateStore(SessionStore, { sqlite: SqliteSessionStore, postgres: PostgresSessionStore }),
    SessionsService,
  ],
  exports: [SessionsService],
})
export class SessionsModule {}
