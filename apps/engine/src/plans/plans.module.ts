import { Module } from '@nestjs/common';
import { ActionsModule } from '../actions/actions.module';
import { CheckpointsModule } from '../checkpoints/checkpoints.module';
import { EventsModule } from '../events/events.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { SessionsModule } from '../sessions/sessions.module';
import { stateStore } from '../storage/storage.module';
import { PlanExecutor } from './plan-executor.service';
import { PlanRecorder } from './plan-recorder';
import { PlanStore } from './plan.store';
import { PostgresPlanStore } from './postgres-plan.store';
import { SqlitePlanStore } from './sqlite-plan.store';
import { PlansController } from './plans.controller';

/** Plans: DAGs of actions run through the execution engine, persisted and recorded in the graph. */
@Module({
  imports: [ActionsModule, SessionsModule, EventsModule, IdempotencyModule, CheckpointsModule],
  controllers: [PlansController],
  providers: [
    stateStore(PlanStore, { sqlite: SqlitePlanStore, postgres: PostgresPlanStore }),
    PlanRecorder,
    PlanExecutor,
  ],
  exports: [PlanExecutor],
})
export class PlansModule {}
