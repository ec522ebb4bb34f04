import type { Session } from './session.model';

/**
 * Durable registry of live sessions, so they survive an engine restart: `<data>/engine.db` for one engine, Postgres
 * for replicas (where each session also names the replica that serves it, see `replicas/`).
 */
export abstract class SessionStore {
  /** The sessions this engine serves at start-up: all of them on SQLite; on Postgres, those it owns (none, when new). */
  abstract loadAll(): Promise<Session[]>;
  abstract insert(session: Session): Promise<void>;
  abstract updateLastActive(entries: { id: string; lastActiveAt: Date }[]): Promise<void>;
  abstract remove(id: string): Promise<void>;
  /** The tenant's sessions, whichever engine serves them; `undefined`: only this engine's exist (SQLite). */
  abstract listShared(tenant: string): Promise<Session[] | undefined>;
}
