import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import type { Session } from './session.model';
import { fromSessionOptions, type SessionOptionsDoc, sessionOptions } from './session-options';
import { SessionStore } from './session.store';

interface SessionRow {
  id: string;
  tenant: string;
  created_at: string;
  last_active_at: string;
  ttl_seconds: number;
  metadata: string;
  max_concurrent_actions: number;
  /** JSON: the session's options (`{"network":{"allow":[…]},"template":"…","forkedFrom":{…},"policy":{…}}`). */
  options: string;
}

/** `SessionStore` in the engine's own SQLite file (`<data>/engine.db`). */
@Injectable()
export class SqliteSessionStore extends SessionStore {
  private readonly db: DatabaseSync;

  constructor(file: EngineDb) {
    super();
    this.db = file.db;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_active_at TEXT NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        metadata TEXT NOT NULL,
        max_concurrent_actions INTEGER NOT NULL DEFAULT 1,
        options TEXT NOT NULL DEFAULT '{}'
      ) STRICT;
    `);
    // Files from before a column existed get it with its default.
    const columns = this.db.prepare('PRAGMA table_info(sessions)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'max_concurrent_actions')) {
      this.db.exec('ALTER TABLE sessions ADD COLUMN max_concurrent_actions INTEGER NOT NULL DEFAULT 1');
    }
    if (!columns.some((c) => c.name === 'options')) {
      this.db.exec(`ALTER TABLE sessions ADD COLUMN options TEXT NOT NULL DEFAULT '{}'`);
    }
  }

  loadAll(): Promise<Session[]> {
    const rows = this.db
      .prepare('SELECT * FROM sessions ORDER BY created_at, id')
      .all() as unknown as SessionRow[];
    return Promise.resolve(
      rows.map((r) => ({
        ...fromSessionOptions(JSON.parse(r.options) as SessionOptionsDoc),
        id: r.id,
        tenant: r.tenant,
        createdAt: new Date(r.created_at),
        lastActiveAt: new Date(r.last_active_at),
        ttlSeconds: r.ttl_seconds,
        metadata: JSON.parse(r.metadata) as Record<string, unknown>,
        maxConcurrentActions: r.max_concurrent_actions,
      })),
    );
  }

  insert(s: Session): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO sessions (id, tenant, created_at, last_active_at, ttl_seconds, metadata, max_concurrent_actions, options)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        s.id,
        s.tenant,
        s.createdAt.toISOString(),
        s.lastActiveAt.toISOString(),
        s.ttlSeconds,
        JSON.stringify(s.metadata),
        s.maxConcurrentActions,
        JSON.stringify(sessionOptions(s)),
      );
    return Promise.resolve();
  }

  updateLastActive(entries: { id: string; lastActiveAt: Date }[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    const stmt = this.db.prepare('UPDATE sessions SET last_active_at = ? WHERE id = ?');
    this.db.exec('BEGIN');
    try {
      for (const e of entries) stmt.run(e.lastActiveAt.toISOString(), e.id);
      this.db.exec('COMMIT');
    } catch (err) {
      this.db.exec('ROLLBACK');
      throw err;
    }
    return Promise.resolve();
  }

  remove(id: string): Promise<void> {
    this.db.prepare('DELETE FROM sessions WHERE id = ?').run(id);
    return Promise.resolve();
  }

  /** One engine holds every session of this file: the engine's own list is the whole list. */
  listShared(): Promise<undefined> {
    return Promise.resolve(undefined);
  }
}
