import { Module } from '@nestjs/common';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { stateStore } from '../../state/storage/storage.module';
import { AfterHooks } from './after-hooks';
import { BeforeHooks } from './before-hooks';
import { ENGINE_HOOKS, engineHooksProvider } from './engine-hooks';
import { HookClient } from './hook-client';
import { HookDeliveryStore } from '../../state/hooks/hook-deliveries.store';
import { PostgresHookDeliveryStore } from '../../state/hooks/postgres-hook-deliveries.store';
import { SqliteHookDeliveryStore } from '../../state/hooks/sqlite-hook-deliveries.store';

/**
 * Before- and after-action hooks (SWITCHYARD_HOOKS_FILE): signed HTTP deliveries, recorded in the configured state
 * store (engine.db, or Postgres shared by the replicas).
 */
@Module({
  imports: [SessionsModule],
  providers: [
    engineHooksProvider,
    HookClient,
    stateStore(HookDeliveryStore, { sqlite: SqliteHookDeliveryStore, postgres: PostgresHookDeliveryStore }),
    BeforeHooks,
    AfterHooks,
  ],
  exports: [BeforeHooks, AfterHooks, HookDeliveryStore, ENGINE_HOOKS],
})
export class HooksModule {}
