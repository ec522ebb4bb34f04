import { Module } from '@nestjs/common';
import { SessionStore } from '../../state/sessions/session.store';
import { SessionsService } from './sessions.service';
import { SqliteSessionStore } from '../../state/sessions/sqlite-session.store';
import { PostgresSessionStore } from '../../state/sessions/postgres-session.store';
import { stateStore } from '../../state/storage/storage.module';

/** Session lifecycles: creation, tenant-scoped lookup, idle expiry, and the hooks that release a session's work. */
@Module({
  providers: [
    stateStore(SessionStore, { sqlite: SqliteSessionStore, postgres: PostgresSessionStore }),
    SessionsService,
  ],
  exports: [SessionsService],
})
export class SessionsModule {}
