import { Injectable, Logger } from '@nestjs/common';
import { ContextGraph } from '@switchyard/context-graph';
import { type Plan, toPlanGraphRecord } from './plan.model';
import { PlanStore } from './plan.store';

/**
 * Keeps each plan's current state in two places: the engine's store (so `GET …/plans/:id` survives a restart) and the
 * context graph (Plan and Step nodes). Graph writes of one plan land in order, each after the one before it.
 */
@Injectable()
export class PlanRecorder {
  private readonly logger = new Logger('Plan');
  /** Per plan, the last graph write queued. */
  private readonly graphWrites = new Map<string, Promise<void>>();

  constructor(
    private readonly store: PlanStore,
    private readonly graph: ContextGraph,
  ) {}

  /** Persists the plan as it is now; the graph snapshot is taken now and written after earlier ones. */
  save(plan: Plan): void {
    this.store.save(plan);
    const record = toPlanGraphRecord(plan);
    const previous = this.graphWrites.get(plan.id) ?? Promise.resolve();
    const write = previous
      .then(() => this.graph.recordPlan(record))
      .catch((error: unknown) => {
        // Logged, never thrown: the plan keeps running without its graph record.
        this.logger.error({
          msg: 'cannot record the plan in the context graph',
          planId: plan.id,
          sessionId: plan.sessionId,
          error: error instanceof Error ? error.message : String(error),
        });
      })
      .finally(() => {
        if (this.graphWrites.get(plan.id) === write) this.graphWrites.delete(plan.id);
      });
    this.graphWrites.set(plan.id, write);
  }

  /** Resolves once the plan's last snapshot is in the graph. */
  async flushed(planId: string): Promise<void> {
    await this.graphWrites.get(planId);
  }

  /** Resolves once every queued snapshot is in the graph (the graph closes after the engine's shutdown hooks). */
  async flushAll(): Promise<void> {
    await Promise.all([...this.graphWrites.values()]);
  }
}
