import { Module } from '@nestjs/common';
import { ActionsModule } from '../../engine/actions/actions.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { IdempotencyModule } from '../../engine/idempotency/idempotency.module';
import { ActionsController } from './actions.controller';

/** The REST endpoints of Actions, over the module that does the work. */
@Module({
  imports: [ActionsModule, SessionsModule, IdempotencyModule],
  controllers: [ActionsController],
})
export class ActionsApiModule {}
