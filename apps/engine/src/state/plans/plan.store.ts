import type { Plan } from './plan.model';

/**
 * Where plans are kept, so `GET …/plans/:id` survives a restart and, with replicas, answers on any of them. Adapters:
 * `SqlitePlanStore` (engine.db) and `PostgresPlanStore` (shared by the replicas), chosen by SWITCHYARD_STATE.
 */
export abstract class PlanStore {
  /**
   * Stores the plan as it is at the call (later changes to the object are not part of this save). Saves of one plan
   * land in the order they were called, so the last one called is the one kept. Resolves once it is stored; a store
   * that is closed (a plan settling during shutdown) skips it.
   */
  abstract save(plan: Plan): Promise<void>;

  abstract get(id: string): Promise<Plan | undefined>;

  /** The session's plans, oldest first. */
  abstract listBySession(sessionId: string): Promise<Plan[]>;

  /**
   * Plans stored as `running`: those a stop left running (all of them), or those of the given sessions (the sessions
   * of a replica that died). Oldest first.
   */
  abstract running(sessionIds?: readonly string[]): Promise<Plan[]>;
}
