/** A live session. `expiresAt` slides forward with activity. */
export interface Session {
  id: string;
  tenant: string;
  createdAt: Date;
  lastActiveAt: Date;
  ttlSeconds: number;
  metadata: Record<string, unknown>;
}

export const expiresAt = (s: Session): Date => new Date(s.lastActiveAt.getTime() + s.ttlSeconds * 1000);
