import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_INSTANCE_ID } from '../../platform/config/config.tokens';
import { PostgresDb } from '../storage/postgres-db';
import type { Session } from './session.model';
import { fromSessionOptions, type SessionOptionsDoc, sessionOptions } from './session-options';
import { SessionStore } from './session.store';

/** A `sessions` row of the replicas' Postgres (migration 1). */
export interface SessionRowPg {
  id: string;
  tenant: string;
  created_at: Date;
  last_active_at: Date;
  ttl_seconds: number;
  metadata: Record<string, unknown>;
  max_concurrent_actions: number;
  options: SessionOptionsDoc;
  owner: string;
}

export function sessionFromRow(r: SessionRowPg): Session {
  return {
    ...fromSessionOptions(r.options),
    id: r.id,
    tenant: r.tenant,
    createdAt: r.created_at,
    lastActiveAt: r.last_active_at,
    ttlSeconds: r.ttl_seconds,
    metadata: r.metadata,
    maxConcurrentActions: r.max_concurrent_actions,
  };
}

/**
 * `SessionStore` in the replicas' Postgres. A session is inserted owned by the replica that creates it; ownership
 * moves only when that replica's lease runs out (`replicas/replica-takeover.ts`).
 */
@Injectable()
export class PostgresSessionStore extends SessionStore {
  constructor(
    private readonly db: PostgresDb,
    @Inject(ENGINE_INSTANCE_ID) private readonly replicaId: string,
  ) {
    super();
  }

  async loadAll(): Promise<Session[]> {
    const rows = await this.db.query<SessionRowPg>(
      'SELECT * FROM sessions WHERE owner = $1 ORDER BY created_at, id',
      [this.replicaId],
    );
    return rows.map(sessionFromRow);
  }

  async insert(s: Session): Promise<void> {
    await this.db.query(
      `INSERT INTO sessions (id, tenant, created_at, last_active_at, ttl_seconds, metadata, max_concurrent_actions,
         options, owner)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        s.id,
        s.tenant,
        s.createdAt,
        s.lastActiveAt,
        s.ttlSeconds,
        JSON.stringify(s.metadata),
        s.maxConcurrentActions,
        JSON.stringify(sessionOptions(s)),
        this.replicaId,
      ],
    );
  }

  async updateLastActive(entries: { id: string; lastActiveAt: Date }[]): Promise<void> {
    if (entries.length === 0) return;
    await this.db.query(
      `UPDATE sessions SET last_active_at = e.at
       FROM unnest($1::text[], $2::timestamptz[]) AS e(id, at) WHERE sessions.id = e.id`,
      [entries.map((e) => e.id), entries.map((e) => e.lastActiveAt)],
    );
  }

  async remove(id: string): Promise<void> {
    await this.db.query('DELETE FROM sessions WHERE id = $1', [id]);
  }

  async listShared(tenant: string): Promise<Session[]> {
    const rows = await this.db.query<SessionRowPg>(
      'SELECT * FROM sessions WHERE tenant = $1 ORDER BY created_at, id',
      [tenant],
    );
    return rows.map(sessionFromRow);
  }
}
