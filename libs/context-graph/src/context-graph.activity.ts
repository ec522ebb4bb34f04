import { ACTION_STATUSES, type ActionStatus, type ActionTier } from '@switchyard/common';
import type { ActivityTier, SessionActivity } from './context-graph.types';

// A session's activity, assembled here from the same grouped rows whatever the store, so both answer with the
// same values in the same order: the adapters only fetch.

/**
 * One group of a session's actions as a store fetches it: a recorded session, its actions of one status and tier,
 * how many, and the latest `startedAt` among them. A session without actions comes as one row with `status` and
 * `tier` null and `actions` 0.
 */
export type ActivityRow = {
  sessionId: string;
  status: ActionStatus | null;
  tier: ActionTier | null;
  actions: number;
  lastStartedAt: string | null;
};

/** The ids to ask a store about: each once, in the order given (a repeated id would be counted twice). */
export const distinctSessionIds = (sessionIds: readonly string[]): string[] => [...new Set(sessionIds)];

/**
 * Each recorded session's activity, in the order of `sessionIds`; a session no row names (never recorded) is
 * absent.
 */
export function buildSessionActivity(
  sessionIds: readonly string[],
  rows: readonly ActivityRow[],
): Map<string, SessionActivity> {
  const groups = new Map<string, ActivityRow[]>();
  for (const row of rows) {
    const group = groups.get(row.sessionId);
    if (group) group.push(row);
    else groups.set(row.sessionId, [row]);
  }
  const answer = new Map<string, SessionActivity>();
  for (const id of distinctSessionIds(sessionIds)) {
    const own = groups.get(id);
    if (own) answer.set(id, activityOf(own));
  }
  return answer;
}

function activityOf(rows: readonly ActivityRow[]): SessionActivity {
  const counts = new Map<ActionStatus, number>();
  const tiers = new Set<ActivityTier>();
  let actions = 0;
  let lastActionAt: string | null = null;
  for (const row of rows) {
    if (row.actions === 0 || row.status === null || row.tier === null) continue;
    actions += row.actions;
    counts.set(row.status, (counts.get(row.status) ?? 0) + row.actions);
    if (row.tier !== 'none') tiers.add(row.tier);
    if (row.lastStartedAt !== null && (lastActionAt === null || row.lastStartedAt > lastActionAt)) {
      lastActionAt = row.lastStartedAt;
    }
  }
  // Fixed orders (statuses as ACTION_STATUSES lists them, tiers by plain string order), the same whichever store
  // grouped first, so the answers serialise alike too.
  const byStatus: Partial<Record<ActionStatus, number>> = {};
  for (const status of ACTION_STATUSES) {
    const n = counts.get(status);
    if (n !== undefined) byStatus[status] = n;
  }
  return { actions, byStatus, tiers: [...tiers].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), lastActionAt };
}
