import { Injectable, Logger } from '@nestjs/common';
import { ContextGraph } from '@switchyard/context-graph';
import { type Plan, toPlanGraphRecord } from '../../state/plans/plan.model';
import { PlanStore } from '../../state/plans/plan.store';

/**
 * Keeps each plan's current state in two places: the engine's store (so `GET …/plans/:id` survives a restart and
 * answers on every replica) and the context graph (Plan and Step nodes). Writes of one plan land in order in each,
 * each after the one before it (the store orders its own saves).
 */
@Injectable()
export class PlanRecorder {
  private readonly logger = new Logger('Plan');
  /** Per plan, the last graph write queued. */
  private readonly graphWrites = new Map<string, Promise<void>>();
  /** Per plan, the last store save made (failures already logged). */
  private readonly storeWrites = new Map<string, Promise<void>>();

  constructor(
    private readonly store: PlanStore,
    private readonly graph: ContextGraph,
  ) {}

  /**
   * Persists the plan as it is now: both snapshots are taken now and written after earlier ones. Resolves once the
   * store has it; rejects when the store refused it (a caller that does not wait may ignore that: it is logged here).
   */
  save(plan: Plan): Promise<void> {
    const stored = this.store.save(plan);
    const logged = stored.catch((error: unknown) => {
      this.logger.error({
        msg: 'cannot store the plan',
        planId: plan.id,
        sessionId: plan.sessionId,
        error: error instanceof Error ? error.message : String(error),
      });
    });
    this.track(this.storeWrites, plan.id, logged);
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
      });
    this.track(this.graphWrites, plan.id, write);
    return stored;
  }

  /** Resolves once the plan's last snapshot is in the store and in the graph. */
  async flushed(planId: string): Promise<void> {
    await Promise.all([this.storeWrites.get(planId), this.graphWrites.get(planId)]);
  }

  /** Resolves once every queued snapshot is stored and in the graph (both close after the engine's shutdown hooks). */
  async flushAll(): Promise<void> {
    await Promise.all([...this.storeWrites.values(), ...this.graphWrites.values()]);
  }

  private track(writes: Map<string, Promise<void>>, planId: string, write: Promise<void>): void {
    writes.set(planId, write);
    void write.finally(() => {
      if (writes.get(planId) === write) writes.delete(planId);
    });
  }
}
