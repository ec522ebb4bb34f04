import { Module } from '@nestjs/common';
import { ActionsModule } from '../actions/actions.module';
import { CheckpointsModule } from '../../session/checkpoints/checkpoints.module';
import { EventsModule } from '../../session/events/events.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { stateStore } from '../../state/storage/storage.module';
import { PlanExecutor } from './plan-executor.service';
import { PlanRecorder } from './plan-recorder';
import { PlanStore } from '../../state/plans/plan.store';
import { PostgresPlanStore } from '../../state/plans/postgres-plan.store';
import { SqlitePlanStore } from '../../state/plans/sqlite-plan.store';

/** Plans: DAGs of actions run through the execution engine, persisted and recorded in the graph. */
@Module({
  imports: [ActionsModule, SessionsModule, EventsModule, IdempotencyModule, CheckpointsModule],
  providers: [
    stateStore(PlanStore, { sqlite: SqlitePlanStore, postgres: PostgresPlanStore }),
    PlanRecorder,
    PlanExecutor,
  ],
  exports: [PlanExecutor],
})
export class PlansModule {}
