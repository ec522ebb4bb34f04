import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import { joinPlan, splitPlan } from './plan-doc';
import type { Plan } from './plan.model';
import { PlanStore } from './plan.store';

/**
 * Plans as JSON documents in the engine's SQLite file (SWITCHYARD_STATE=sqlite), their steps' actions in rows of their
 * own, written once (see `splitPlan`).
 */
@Injectable()
export class SqlitePlanStore extends PlanStore {
  private readonly db: DatabaseSync;
  /** Action objects already stored. */
  private readonly written = new WeakSet<object>();

  constructor(private readonly file: EngineDb) {
    super();
    this.db = file.db;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS plans (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        status TEXT NOT NULL,
        doc TEXT NOT NULL
      ) STRICT;
      CREATE INDEX IF NOT EXISTS plans_session ON plans(session_id);
      CREATE TABLE IF NOT EXISTS plan_actions (
        plan_id TEXT NOT NULL,
        key TEXT NOT NULL,
        action TEXT NOT NULL,
        PRIMARY KEY (plan_id, key)
      ) STRICT;
    `);
  }

  // Synchronous inside: each save is written before the call returns, so saves land in call order.
  async save(plan: Plan): Promise<void> {
    if (!this.file.isOpen) return;
    const { doc, actions, stored } = splitPlan(plan, this.written);
    this.db.exec('BEGIN');
    try {
      const putAction = this.db.prepare(
        `INSERT INTO plan_actions (plan_id, key, action) VALUES (?, ?, ?)
         ON CONFLICT (plan_id, key) DO UPDATE SET action = excluded.action`,
      );
      for (const a of actions) putAction.run(plan.id, a.key, a.json);
      this.db
        .prepare(
          `INSERT INTO plans (id, session_id, status, doc) VALUES (?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc`,
        )
        .run(plan.id, plan.sessionId, plan.status, doc);
      this.db.exec('COMMIT');
    } catch (err) {
      this.db.exec('ROLLBACK');
      throw err;
    }
    stored();
  }

  async get(id: string): Promise<Plan | undefined> {
    return this.plans(this.db.prepare('SELECT id, doc FROM plans WHERE id = ?').all(id))[0];
  }

  async listBySession(sessionId: string): Promise<Plan[]> {
    return this.plans(
      this.db.prepare('SELECT id, doc FROM plans WHERE session_id = ? ORDER BY rowid').all(sessionId),
    );
  }

  async running(sessionIds?: readonly string[]): Promise<Plan[]> {
    if (sessionIds === undefined) {
      return this.plans(
        this.db.prepare("SELECT id, doc FROM plans WHERE status = 'running' ORDER BY rowid").all(),
      );
    }
    return this.plans(
      this.db
        .prepare(
          `SELECT id, doc FROM plans WHERE status = 'running'
             AND session_id IN (SELECT value FROM json_each(?)) ORDER BY rowid`,
        )
        .all(JSON.stringify(sessionIds)),
    );
  }

  /** The plans of these rows, each with its actions. */
  private plans(rows: unknown[]): Plan[] {
    const actionsOf = this.db.prepare('SELECT key, action FROM plan_actions WHERE plan_id = ?');
    return (rows as { id: string; doc: string }[]).map((r) => {
      const actions = actionsOf.all(r.id) as { key: string; action: string }[];
      return joinPlan(JSON.parse(r.doc) as Plan, new Map(actions.map((a) => [a.key, JSON.parse(a.action)])));
    });
  }
}
