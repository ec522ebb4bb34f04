import { expiresAt, type Session } from './session.model';

export interface SessionResponse {
  id: string;
  createdAt: string;
  expiresAt: string;
  lastActiveAt: string;
  ttlSeconds: number;
  metadata: Record<string, unknown>;
  maxConcurrentActions: number;
}

export const toSessionResponse = (s: Session): SessionResponse => ({
  id: s.id,
  createdAt: s.createdAt.toISOString(),
  expiresAt: expiresAt(s).toISOString(),
  lastActiveAt: s.lastActiveAt.toISOString(),
  ttlSeconds: s.ttlSeconds,
  metadata: s.metadata,
  maxConcurrentActions: s.maxConcurrentActions,
});
