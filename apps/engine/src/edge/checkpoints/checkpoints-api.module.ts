import { Module } from '@nestjs/common';
import { CheckpointsModule } from '../../session/checkpoints/checkpoints.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { IdempotencyModule } from '../../engine/idempotency/idempotency.module';
import { CheckpointsController } from './checkpoints.controller';

/** The REST endpoints of Checkpoints, over the module that does the work. */
@Module({
  imports: [CheckpointsModule, SessionsModule, IdempotencyModule],
  controllers: [CheckpointsController],
})
export class CheckpointsApiModule {}
