import { Module } from '@nestjs/common';
import { stateStore } from '../../state/storage/storage.module';
import { IdempotencyService } from './idempotency.service';
import { IdempotencyStore } from '../../state/idempotency/idempotency.store';
import { PostgresIdempotencyStore } from '../../state/idempotency/postgres-idempotency.store';
import { SqliteIdempotencyStore } from '../../state/idempotency/sqlite-idempotency.store';

/** `Idempotency-Key` answers, kept in the configured state store (engine.db, or Postgres shared by the replicas). */
@Module({
  providers: [
    stateStore(IdempotencyStore, { sqlite: SqliteIdempotencyStore, postgres: PostgresIdempotencyStore }),
    IdempotencyService,
  ],
  exports: [IdempotencyService],
})
export class IdempotencyModule {}
