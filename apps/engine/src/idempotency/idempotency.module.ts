import { Module } from '@nestjs/common';
import { IdempotencyService } from './idempotency.service';

/** `Idempotency-Key` answers, kept in the engine's SQLite file. */
@Module({ providers: [IdempotencyService], exports: [IdempotencyService] })
export class IdempotencyModule {}
