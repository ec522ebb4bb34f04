import { Injectable } from '@nestjs/common';
import { PostgresDb } from '../storage/postgres-db';
import { joinPlan, splitPlan } from './plan-doc';
import type { Plan } from './plan.model';
import { PlanStore } from './plan.store';

/**
 * Plans in the replicas' shared Postgres (SWITCHYARD_STATE=postgres), one row per plan: its document as `json`, its
 * steps' actions in `plan_actions`, written once (see `splitPlan`).
 */
@Injectable()
export class PostgresPlanStore extends PlanStore {
  /** Per plan, its last save queued: each waits for the one before, so they commit in call order. */
  private readonly writes = new Map<string, Promise<void>>();
  /** Action objects already stored. */
  private readonly written = new WeakSet<object>();

  constructor(private readonly db: PostgresDb) {
    super();
  }

  save(plan: Plan): Promise<void> {
    if (!this.db.isOpen) return Promise.resolve();
    // Serialised now: the snapshot is the plan as it is at the call.
    const { doc, actions, stored } = splitPlan(plan, this.written);
    const params = [plan.id, plan.sessionId, plan.status, doc];
    const previous = this.writes.get(plan.id) ?? Promise.resolve();
    const write = previous
      .catch(() => undefined) // an earlier save's failure is its caller's; this one still runs
      .then(async () => {
        if (!this.db.isOpen) return;
        await this.db.tx(async (client) => {
          for (const a of actions) {
            await client.query(
              `INSERT INTO plan_actions (plan_id, key, action) VALUES ($1, $2, $3::json)
               ON CONFLICT (plan_id, key) DO UPDATE SET action = excluded.action`,
              [plan.id, a.key, a.json],
            );
          }
          await client.query(
            `INSERT INTO plans (id, session_id, status, doc) VALUES ($1, $2, $3, $4::json)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc`,
            params,
          );
        });
        stored();
      })
      .finally(() => {
        if (this.writes.get(plan.id) === write) this.writes.delete(plan.id);
      });
    this.writes.set(plan.id, write);
    return write;
  }

  async get(id: string): Promise<Plan | undefined> {
    const [plan] = await this.plans(
      await this.db.query<{ doc: Plan }>('SELECT doc FROM plans WHERE id = $1', [id]),
    );
    return plan;
  }

  async listBySession(sessionId: string): Promise<Plan[]> {
    return this.plans(
      await this.db.query<{ doc: Plan }>('SELECT doc FROM plans WHERE session_id = $1 ORDER BY seq', [
        sessionId,
      ]),
    );
  }

  async running(sessionIds?: readonly string[]): Promise<Plan[]> {
    return this.plans(
      await this.db.query<{ doc: Plan }>(
        `SELECT doc FROM plans WHERE status = 'running' AND ($1::text[] IS NULL OR session_id = ANY ($1::text[]))
         ORDER BY seq`,
        [sessionIds ?? null],
      ),
    );
  }

  /** The plans of these rows, each with its actions (one query for all of them). */
  private async plans(rows: { doc: Plan }[]): Promise<Plan[]> {
    if (rows.length === 0) return [];
    const actions = await this.db.query<{ plan_id: string; key: string; action: unknown }>(
      'SELECT plan_id, key, action FROM plan_actions WHERE plan_id = ANY ($1::text[])',
      [rows.map((r) => r.doc.id)],
    );
    const byPlan = new Map<string, Map<string, unknown>>();
    for (const a of actions) {
      let m = byPlan.get(a.plan_id);
      if (!m) byPlan.set(a.plan_id, (m = new Map<string, unknown>()));
      m.set(a.key, a.action);
    }
    return rows.map((r) => joinPlan(r.doc, byPlan.get(r.doc.id) ?? new Map()));
  }
}
