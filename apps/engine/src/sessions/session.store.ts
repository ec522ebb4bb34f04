import type { Session } from './session.model';

/** Durable registry of live sessions, so they survive an engine restart. */
export abstract class SessionStore {
  abstract loadAll(): Session[];
  abstract insert(session: Session): void;
  abstract updateLastActive(entries: { id: string; lastActiveAt: Date }[]): void;
  abstract remove(id: string): void;
}
