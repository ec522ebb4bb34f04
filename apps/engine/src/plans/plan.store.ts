import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import type { Plan } from './plan.model';

/** Plans as JSON documents in the engine's SQLite file, so `GET …/plans/:id` survives a restart. */
@Injectable()
export class PlanStore {
  private readonly db: DatabaseSync;

  constructor(private readonly file: EngineDb) {
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

  save(plan: Plan): void {
    if (!this.file.isOpen) return;
    this.db
      .prepare(
        `INSERT INTO plans (id, session_id, status, doc) VALUES (?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, doc = excluded.doc`,
      )
      .run(plan.id, plan.sessionId, plan.status, JSON.stringify(plan));
  }

  get(id: string): Plan | undefined {
    const row = this.db.prepare('SELECT doc FROM plans WHERE id = ?').get(id) as { doc: string } | undefined;
    return row && (JSON.parse(row.doc) as Plan);
  }

  listBySession(sessionId: string): Plan[] {
    return (
      this.db.prepare('SELECT doc FROM plans WHERE session_id = ? ORDER BY rowid').all(sessionId) as {
        doc: string;
      }[]
    ).map((r) => JSON.parse(r.doc) as Plan);
  }

  /** Plans left `running` by a stop. */
  running(): Plan[] {
    return (this.db.prepare("SELECT doc FROM plans WHERE status = 'running'").all() as { doc: string }[]).map(
      (r) => JSON.parse(r.doc) as Plan,
    );
  }
}
