import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { AfterHooks } from './after-hooks';
import { BeforeHooks } from './before-hooks';
import { HookClient } from './hook-client';
import { HookDeliveryStore } from './hook-deliveries.store';
import { HooksController } from './hooks.controller';

/** Before- and after-action hooks (SWITCHYARD_HOOKS_FILE): signed HTTP deliveries, recorded in engine.db. */
@Module({
  imports: [SessionsModule],
  controllers: [HooksController],
  providers: [HookClient, HookDeliveryStore, BeforeHooks, AfterHooks],
  exports: [BeforeHooks, AfterHooks],
})
export class HooksModule {}
