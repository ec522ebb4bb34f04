import type { PolicyRule } from '../policies/policy.types';

/** A live session. `expiresAt` slides forward with activity. */
export interface Session {
  id: string;
  tenant: string;
  createdAt: Date;
  lastActiveAt: Date;
  ttlSeconds: number;
  metadata: Record<string, unknown>;
  /** Actions of this session that may run at once; 1 keeps a session's shell state from interleaving. */
  maxConcurrentActions: number;
  /** Hosts the session's container sandboxes may reach through the egress proxy; empty: no network. */
  network: { allow: string[] };
  /** The sandbox template its code runs with (its image, in every tier); none: the default image. */
  template?: string;
  /** The session it was forked from, and the checkpoint its workspace was copied at (none: as it was then). */
  forkedFrom?: { sessionId: string; checkpointId?: string };
  /** The session's own policy layer (allow/deny/ask rules under the engine's and its tenant's). */
  policy?: { rules: PolicyRule[] };
}

export const expiresAt = (s: Session): Date => new Date(s.lastActiveAt.getTime() + s.ttlSeconds * 1000);
