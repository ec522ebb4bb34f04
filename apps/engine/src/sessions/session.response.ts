import { expiresAt, type Session } from './session.model';

export interface SessionResponse {
  id: string;
  createdAt: string;
  expiresAt: string;
  lastActiveAt: string;
  ttlSeconds: number;
  metadata: Record<string, unknown>;
  maxConcurrentActions: number;
  network: { allow: string[] };
  template?: string;
  forkedFrom?: { sessionId: string; checkpointId?: string };
}

export const toSessionResponse = (s: Session): SessionResponse => ({
  id: s.id,
  createdAt: s.createdAt.toISOString(),
  expiresAt: expiresAt(s).toISOString(),
  lastActiveAt: s.lastActiveAt.toISOString(),
  ttlSeconds: s.ttlSeconds,
  metadata: s.metadata,
  maxConcurrentActions: s.maxConcurrentActions,
  network: { allow: [...s.network.allow] },
  ...(s.template !== undefined && { template: s.template }),
  ...(s.forkedFrom !== undefined && { forkedFrom: { ...s.forkedFrom } }),
});
