import { Module } from '@nestjs/common';
import { PlansModule } from '../../engine/plans/plans.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { IdempotencyModule } from '../../engine/idempotency/idempotency.module';
import { PlansController } from './plans.controller';

/** The REST endpoints of Plans, over the module that does the work. */
@Module({
  imports: [PlansModule, SessionsModule, IdempotencyModule],
  controllers: [PlansController],
})
export class PlansApiModule {}
