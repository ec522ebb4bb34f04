import { Global, Module } from '@nestjs/common';
import { EngineDb } from './engine-db';

/** The engine's own SQLite file, shared by the sessions, plans and idempotency stores. */
@Global()
@Module({ providers: [EngineDb], exports: [EngineDb] })
export class StorageModule {}
