import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import {
  type DeliveryStatus,
  type HookDelivery,
  HookDeliveryStore,
  type PendingDelivery,
} from './hook-deliveries.store';
import { countsFromRows, deliveryFromRow, type HookDeliveryRow } from './hook-delivery-row';

/**
 * Hook deliveries in the engine's SQLite file (SWITCHYARD_STATE=sqlite): one engine, so every row is its own, and
 * what it left pending at a stop or crash it delivers at its next start. Each write is done when the call returns.
 */
@Injectable()
export class SqliteHookDeliveryStore extends HookDeliveryStore {
  private readonly db: DatabaseSync;

  constructor(file: EngineDb) {
    super();
    this.db = file.db;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS hook_deliveries (
        id TEXT PRIMARY KEY,
        hook TEXT NOT NULL,
        phase TEXT NOT NULL,
        action_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_status INTEGER,
        last_error TEXT,
        decision TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        next_attempt_at TEXT,
        payload TEXT
      ) STRICT;
      CREATE INDEX IF NOT EXISTS hook_deliveries_action ON hook_deliveries (session_id, action_id);
      CREATE INDEX IF NOT EXISTS hook_deliveries_pending ON hook_deliveries (status, created_at);
    `);
  }

  async insert(d: HookDelivery, payload?: string): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO hook_deliveries (id, hook, phase, action_id, session_id, tenant, status, attempts, created_at,
           updated_at, next_attempt_at, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        d.id,
        d.hook,
        d.phase,
        d.actionId,
        d.sessionId,
        d.tenant,
        d.status,
        d.attempts,
        d.createdAt,
        d.updatedAt,
        d.nextAttemptAt ?? null,
        payload ?? null,
      );
  }

  async update(d: HookDelivery): Promise<boolean> {
    const { changes } = this.db
      .prepare(
        `UPDATE hook_deliveries SET status = ?, attempts = ?, last_status = ?, last_error = ?, decision = ?,
           updated_at = ?, next_attempt_at = ?, payload = CASE WHEN ? = 'pending' THEN payload ELSE NULL END
         WHERE id = ?`,
      )
      .run(
        d.status,
        d.attempts,
        d.lastStatus ?? null,
        d.lastError ?? null,
        d.decision ?? null,
        d.updatedAt,
        d.nextAttemptAt ?? null,
        d.status,
        d.id,
      );
    return Number(changes) > 0;
  }

  async pending(): Promise<PendingDelivery[]> {
    const rows = this.db
      .prepare(
        // Oldest first; those of one millisecond in the order they were written (ids are random).
        `SELECT * FROM hook_deliveries WHERE status = 'pending' AND payload IS NOT NULL ORDER BY created_at, rowid`,
      )
      .all() as unknown as HookDeliveryRow[];
    return rows.map((r) => ({ delivery: deliveryFromRow(r), payload: r.payload! }));
  }

  async adoptFrom(): Promise<PendingDelivery[]> {
    return [];
  }

  async forAction(sessionId: string, actionId: string): Promise<HookDelivery[]> {
    const rows = this.db
      .prepare('SELECT * FROM hook_deliveries WHERE session_id = ? AND action_id = ? ORDER BY created_at, id')
      .all(sessionId, actionId) as unknown as HookDeliveryRow[];
    return rows.map(deliveryFromRow);
  }

  async recent(limit: number, tenant?: string): Promise<HookDelivery[]> {
    const rows = (tenant === undefined
      ? this.db.prepare('SELECT * FROM hook_deliveries ORDER BY created_at DESC, id DESC LIMIT ?').all(limit)
      : this.db
          .prepare('SELECT * FROM hook_deliveries WHERE tenant = ? ORDER BY created_at DESC, id DESC LIMIT ?')
          .all(tenant, limit)) as unknown as HookDeliveryRow[];
    return rows.map(deliveryFromRow);
  }

  async counts(): Promise<Map<string, Partial<Record<DeliveryStatus, number>>>> {
    return countsFromRows(
      this.db
        .prepare('SELECT hook, status, COUNT(*) AS n FROM hook_deliveries GROUP BY hook, status')
        .all() as { hook: string; status: string; n: number }[],
    );
  }
}
