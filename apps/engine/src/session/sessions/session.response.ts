import type { ActionStatus } from '@switchyard/common';
import type { ActivityTier, SessionActivity } from '@switchyard/context-graph';
import type { PolicyRule } from '../../state/policies/policy.types';
import { expiresAt, type Session } from '../../state/sessions/session.model';

/** What a session has run: its actions counted by status, the tiers they ran in, and the latest one's start. */
export interface SessionActivityResponse {
  actions: number;
  byStatus: Partial<Record<ActionStatus, number>>;
  tiers: ActivityTier[];
  lastActionAt: string | null;
}

export interface SessionResponse {
  id: string;
  tenant: string;
  createdAt: string;
  expiresAt: string;
  lastActiveAt: string;
  ttlSeconds: number;
  metadata: Record<string, unknown>;
  maxConcurrentActions: number;
  network: { allow: string[] };
  template?: string;
  forkedFrom?: { sessionId: string; checkpointId?: string };
  policy?: { rules: PolicyRule[] };
  activity: SessionActivityResponse;
}

/** The activity of a session that has run nothing: one just created or forked, or one the graph has no record of. */
export const NO_ACTIVITY: SessionActivity = { actions: 0, byStatus: {}, tiers: [], lastActionAt: null };

/** Without `activity` (a session just created or forked, or one the graph has no record of): none. */
export const toSessionResponse = (s: Session, activity: SessionActivity = NO_ACTIVITY): SessionResponse => ({
  id: s.id,
  tenant: s.tenant,
  createdAt: s.createdAt.toISOString(),
  expiresAt: expiresAt(s).toISOString(),
  lastActiveAt: s.lastActiveAt.toISOString(),
  ttlSeconds: s.ttlSeconds,
  metadata: s.metadata,
  maxConcurrentActions: s.maxConcurrentActions,
  network: { allow: [...s.network.allow] },
  ...(s.template !== undefined && { template: s.template }),
  ...(s.forkedFrom !== undefined && { forkedFrom: { ...s.forkedFrom } }),
  ...(s.policy !== undefined && { policy: { rules: s.policy.rules } }),
  activity: {
    actions: activity.actions,
    byStatus: { ...activity.byStatus },
    tiers: [...activity.tiers],
    lastActionAt: activity.lastActionAt,
  },
});
