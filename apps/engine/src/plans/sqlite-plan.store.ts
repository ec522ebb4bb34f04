import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import type { Plan } from './plan.model';
import { PlanStore } from './plan.store';

/** Plans as JSON documents in the engine's SQLite file (SWITCHYARD_STATE=sqlite). */
@Injectable()
export class SqlitePlanStore extends PlanStore {
  private readonly db: DatabaseSync;

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
    `);
  }

  // Synchronous inside: each save is written before the call returns, so saves land in call order.
  async save(plan: Plan): Promise<void> {
    if (!this.file.isOpen) return;
    this.db
      .prepare(
        `INSERT INTO plans (id, session_id, status, doc) VALUES (?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc`,
      )
      .run(plan.id, plan.sessionId, plan.status, JSON.stringify(plan));
  }

  async get(id: string): Promise<Plan | undefined> {
    const row = this.db.prepare('SELECT doc FROM plans WHERE id = ?').get(id) as { doc: string } | undefined;
    return row && (JSON.parse(row.doc) as Plan);
  }

  async listBySession(sessionId: string): Promise<Plan[]> {
    return docs(this.db.prepare('SELECT doc FROM plans WHERE session_id = ? ORDER BY rowid').all(sessionId));
  }

  async running(sessionIds?: readonly string[]): Promise<Plan[]> {
    if (sessionIds === undefined) {
      return docs(this.db.prepare("SELECT doc FROM plans WHERE status = 'running' ORDER BY rowid").all());
    }
    return docs(
      this.db
        .prepare(
          `SELECT doc FROM plans WHERE status = 'running'
             AND session_id IN (SELECT value FROM json_each(?)) ORDER BY rowid`,
        )
        .all(JSON.stringify(sessionIds)),
    );
  }
}

function docs(rows: unknown[]): Plan[] {
  return (rows as { doc: string }[]).map((r) => JSON.parse(r.doc) as Plan);
}
