import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { stateStore } from '../storage/storage.module';
import { AfterHooks } from './after-hooks';
import { BeforeHooks } from './before-hooks';
import { HookClient } from './hook-client';
import { HookDeliveryStore } from './hook-deliveries.store';
import { HooksController } from './hooks.controller';
import { PostgresHookDeliveryStore } from './postgres-hook-deliveries.store';
import { SqliteHookDeliveryStore } from './sqlite-hook-deliveries.store';

/**
 * Before- and after-action hooks (SWITCHYARD_HOOKS_FILE): signed HTTP deliveries, recorded in the configured state
 * store (engine.db, or Postgres shared by the replicas).
 */
@Module({
  imports: [SessionsModule],
  controllers: [HooksController],
  providers: [
    HookClient,
    stateStore(HookDeliveryStore, { sqlite: SqliteHookDeliveryStore, postgres: PostgresHookDeliveryStore }),
    BeforeHooks,
    AfterHooks,
  ],
  exports: [BeforeHooks, AfterHooks],
})
export class HooksModule {}
