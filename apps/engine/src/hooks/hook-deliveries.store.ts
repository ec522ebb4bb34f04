import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import type { HookPhase } from './hook-file';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'dropped'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One delivery of one action to one hook, as recorded. */
export interface HookDelivery {
  id: string;
  hook: string;
  phase: HookPhase;
  actionId: string;
  sessionId: string;
  tenant: string;
  status: DeliveryStatus;
  attempts: number;
  /** HTTP status of the last attempt that got an answer. */
  lastStatus?: number;
  /** Why the last attempt failed. */
  lastError?: string;
  /** A before-hook's answer: allow or deny. */
  decision?: 'allow' | 'deny';
  createdAt: string;
  updatedAt: string;
  /** When a pending after-hook delivery is tried next. */
  nextAttemptAt?: string;
}

interface Row {
  id: string;
  hook: string;
  phase: string;
  action_id: string;
  session_id: string;
  tenant: string;
  status: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  decision: string | null;
  created_at: string;
  updated_at: string;
  next_attempt_at: string | null;
  payload: string | null;
}

const toDelivery = (r: Row): HookDelivery => ({
  id: r.id,
  hook: r.hook,
  phase: r.phase as HookPhase,
  actionId: r.action_id,
  sessionId: r.session_id,
  tenant: r.tenant,
  status: r.status as DeliveryStatus,
  attempts: r.attempts,
  ...(r.last_status !== null && { lastStatus: r.last_status }),
  ...(r.last_error !== null && { lastError: r.last_error }),
  ...(r.decision !== null && { decision: r.decision as 'allow' | 'deny' }),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  ...(r.next_attempt_at !== null && { nextAttemptAt: r.next_attempt_at }),
});

/**
 * Hook deliveries in the engine's SQLite file: every attempt's outcome, and the body of each after-hook delivery
 * still pending, so an engine that stops (or crashes) delivers it at its next start.
 */
@Injectable()
export class HookDeliveryStore {
  private readonly db: DatabaseSync;

  constructor(file: EngineDb) {
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

  insert(d: HookDelivery, payload?: string): void {
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

  /** Records an attempt's outcome; a delivery that ended (not pending) drops its body. */
  update(d: HookDelivery): void {
    this.db
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
  }

  /** After-hook deliveries left pending (with their bodies), oldest first. */
  pending(): { delivery: HookDelivery; payload: string }[] {
    const rows = this.db
      .prepare(
        `SELECT * FROM hook_deliveries WHERE status = 'pending' AND payload IS NOT NULL ORDER BY created_at, id`,
      )
      .all() as unknown as Row[];
    return rows.map((r) => ({ delivery: toDelivery(r), payload: r.payload! }));
  }

  forAction(sessionId: string, actionId: string): HookDelivery[] {
    const rows = this.db
      .prepare('SELECT * FROM hook_deliveries WHERE session_id = ? AND action_id = ? ORDER BY created_at, id')
      .all(sessionId, actionId) as unknown as Row[];
    return rows.map(toDelivery);
  }

  /** The latest deliveries, newest first: of one tenant, or of all. */
  recent(limit: number, tenant?: string): HookDelivery[] {
    const rows = (tenant === undefined
      ? this.db.prepare('SELECT * FROM hook_deliveries ORDER BY created_at DESC, id DESC LIMIT ?').all(limit)
      : this.db
          .prepare('SELECT * FROM hook_deliveries WHERE tenant = ? ORDER BY created_at DESC, id DESC LIMIT ?')
          .all(tenant, limit)) as unknown as Row[];
    return rows.map(toDelivery);
  }

  /** Deliveries of each hook by status. */
  counts(): Map<string, Partial<Record<DeliveryStatus, number>>> {
    const rows = this.db
      .prepare('SELECT hook, status, COUNT(*) AS n FROM hook_deliveries GROUP BY hook, status')
      .all() as { hook: string; status: DeliveryStatus; n: number }[];
    const counts = new Map<string, Partial<Record<DeliveryStatus, number>>>();
    for (const r of rows) counts.set(r.hook, { ...counts.get(r.hook), [r.status]: Number(r.n) });
    return counts;
  }
}
