import { Injectable } from '@nestjs/common';
import { PostgresDb } from '../storage/postgres-db';
import type { Plan } from './plan.model';
import { PlanStore } from './plan.store';

/** Plans in the replicas' shared Postgres (SWITCHYARD_STATE=postgres), one row per plan: its document as `json`. */
@Injectable()
export class PostgresPlanStore extends PlanStore {
  /** Per plan, its last save queued: each waits for the one before, so they commit in call order. */
  private readonly writes = new Map<string, Promise<void>>();

  constructor(private readonly db: PostgresDb) {
    super();
  }

  save(plan: Plan): Promise<void> {
    if (!this.db.isOpen) return Promise.resolve();
    // Serialised now: the snapshot is the plan as it is at the call.
    const params = [plan.id, plan.sessionId, plan.status, JSON.stringify(plan)];
    const previous = this.writes.get(plan.id) ?? Promise.resolve();
    const write = previous
      .catch(() => undefined) // an earlier save's failure is its caller's; this one still runs
      .then(async () => {
        if (!this.db.isOpen) return;
        await this.db.query(
          `INSERT INTO plans (id, session_id, status, doc) VALUES ($1, $2, $3, $4::json)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc`,
          params,
        );
      })
      .finally(() => {
        if (this.writes.get(plan.id) === write) this.writes.delete(plan.id);
      });
    this.writes.set(plan.id, write);
    return write;
  }

  async get(id: string): Promise<Plan | undefined> {
    const [row] = await this.db.query<{ doc: Plan }>('SELECT doc FROM plans WHERE id = $1', [id]);
    return row?.doc;
  }

  async listBySession(sessionId: string): Promise<Plan[]> {
    const rows = await this.db.query<{ doc: Plan }>(
      'SELECT doc FROM plans WHERE session_id = $1 ORDER BY seq',
      [sessionId],
    );
    return rows.map((r) => r.doc);
  }

  async running(sessionIds?: readonly string[]): Promise<Plan[]> {
    const rows = await this.db.query<{ doc: Plan }>(
      `SELECT doc FROM plans WHERE status = 'running' AND ($1::text[] IS NULL OR session_id = ANY ($1::text[]))
       ORDER BY seq`,
      [sessionIds ?? null],
    );
    return rows.map((r) => r.doc);
  }
}
