import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_INSTANCE_ID } from '../../platform/config/config.tokens';
import { PostgresDb } from '../storage/postgres-db';
import {
  type DeliveryStatus,
  type HookDelivery,
  HookDeliveryStore,
  type PendingDelivery,
} from './hook-deliveries.store';
import { countsFromRows, deliveryFromRow, type HookDeliveryRow } from './hook-delivery-row';

/** Oldest first, as engine.db lists them (`RETURNING` promises no order). */
const byAge = (a: HookDeliveryRow, b: HookDeliveryRow): number =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

const pendingOf = (rows: HookDeliveryRow[]): PendingDelivery[] =>
  rows.sort(byAge).map((r) => ({ delivery: deliveryFromRow(r), payload: r.payload! }));

/**
 * Hook deliveries in the replicas' shared Postgres (SWITCHYARD_STATE=postgres). Each row names the replica that
 * delivers it (`claimed_by`: the one that enqueued it); a replica writes only the rows it claims, so one whose
 * deliveries were adopted (it was judged dead) cannot overwrite what the adopter records. Adoption is one `UPDATE …
 * RETURNING` guarded by the old claimer: of two replicas adopting at once, the second finds the rows no longer the
 * dead one's (Postgres re-checks the condition once the first commits) and gets none of them.
 */
@Injectable()
export class PostgresHookDeliveryStore extends HookDeliveryStore {
  constructor(
    private readonly db: PostgresDb,
    @Inject(ENGINE_INSTANCE_ID) private readonly replica: string,
  ) {
    super();
  }

  async insert(d: HookDelivery, payload?: string): Promise<void> {
    await this.db.query(
      `INSERT INTO hook_deliveries (id, hook, phase, action_id, session_id, tenant, status, attempts, created_at,
         updated_at, next_attempt_at, payload, claimed_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
      [
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
        this.replica,
      ],
    );
  }

  async update(d: HookDelivery): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE hook_deliveries SET status = $2, attempts = $3, last_status = $4, last_error = $5, decision = $6,
         updated_at = $7, next_attempt_at = $8, payload = CASE WHEN $2 = 'pending' THEN payload ELSE NULL END
       WHERE id = $1 AND claimed_by = $9 RETURNING 1`,
      [
        d.id,
        d.status,
        d.attempts,
        d.lastStatus ?? null,
        d.lastError ?? null,
        d.decision ?? null,
        d.updatedAt,
        d.nextAttemptAt ?? null,
        this.replica,
      ],
    );
    return rows.length > 0;
  }

  async pending(): Promise<PendingDelivery[]> {
    return pendingOf(
      await this.db.query<HookDeliveryRow>(
        // Oldest first; those of one millisecond in the order they were written (ids are random).
        `SELECT * FROM hook_deliveries WHERE claimed_by = $1 AND status = 'pending' AND payload IS NOT NULL
         ORDER BY created_at, seq`,
        [this.replica],
      ),
    );
  }

  async adoptFrom(replica: string): Promise<PendingDelivery[]> {
    if (replica === this.replica) return [];
    return pendingOf(
      await this.db.query<HookDeliveryRow>(
        `WITH adopted AS (
           UPDATE hook_deliveries SET claimed_by = $1
           WHERE claimed_by = $2 AND status = 'pending' AND payload IS NOT NULL RETURNING *)
         SELECT * FROM adopted ORDER BY created_at, seq`,
        [this.replica, replica],
      ),
    );
  }

  async forAction(sessionId: string, actionId: string): Promise<HookDelivery[]> {
    const rows = await this.db.query<HookDeliveryRow>(
      'SELECT * FROM hook_deliveries WHERE session_id = $1 AND action_id = $2 ORDER BY created_at, id',
      [sessionId, actionId],
    );
    return rows.map(deliveryFromRow);
  }

  async recent(limit: number, tenant?: string): Promise<HookDelivery[]> {
    const rows = await this.db.query<HookDeliveryRow>(
      `SELECT * FROM hook_deliveries WHERE ($2::text IS NULL OR tenant = $2)
       ORDER BY created_at DESC, id DESC LIMIT $1`,
      [limit, tenant ?? null],
    );
    return rows.map(deliveryFromRow);
  }

  async counts(): Promise<Map<string, Partial<Record<DeliveryStatus, number>>>> {
    return countsFromRows(
      await this.db.query<{ hook: string; status: string; n: string }>(
        'SELECT hook, status, COUNT(*) AS n FROM hook_deliveries GROUP BY hook, status',
      ),
    );
  }
}
