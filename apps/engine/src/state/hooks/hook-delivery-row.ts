import type { DeliveryStatus, HookDelivery } from './hook-deliveries.store';
import type { HookPhase } from './hook-phase';

/** A `hook_deliveries` row, as both adapters read it (same columns in engine.db and in Postgres). */
export interface HookDeliveryRow {
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

export const deliveryFromRow = (r: HookDeliveryRow): HookDelivery => ({
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

/** Deliveries by hook and status, from `(hook, status, n)` rows. */
export function countsFromRows(
  rows: { hook: string; status: string; n: number | string }[],
): Map<string, Partial<Record<DeliveryStatus, number>>> {
  const counts = new Map<string, Partial<Record<DeliveryStatus, number>>>();
  for (const r of rows) counts.set(r.hook, { ...counts.get(r.hook), [r.status]: Number(r.n) });
  return counts;
}
