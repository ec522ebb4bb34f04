import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_CONFIG, ENGINE_INSTANCE_ID } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { PostgresDb } from '../../state/storage/postgres-db';

/** Who serves a session now, and whether that replica's lease still runs. */
export interface SessionRoute {
  owner: string;
  /** Where the owner takes forwarded requests; absent when the owner never registered (should not happen). */
  url?: string;
  /** The owner's lease has not run out. */
  alive: boolean;
}

/**
 * The replicas table: each replica's lease (renewed every third of SWITCHYARD_REPLICA_LEASE_MS) and the URL it takes
 * forwarded requests at; and which replica serves each session. All times are Postgres's `now()`, so replicas'
 * clocks need not agree.
 */
@Injectable()
export class ReplicaLeases {
  readonly leaseMs: number;
  readonly url: string;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(ENGINE_INSTANCE_ID) readonly replicaId: string,
    private readonly db: PostgresDb,
  ) {
    if (config.state.store !== 'postgres') throw new Error('ReplicaLeases needs SWITCHYARD_STATE=postgres');
    this.leaseMs = config.state.leaseMs;
    this.url = config.state.replicaUrl;
  }

  async register(): Promise<void> {
    await this.db.query(
      `INSERT INTO replicas (id, url, lease_until) VALUES ($1, $2, now() + $3 * interval '1 millisecond')`,
      [this.replicaId, this.url, this.leaseMs],
    );
  }

  /** Extends this replica's lease; false when another replica has taken it over (its lease had run out). */
  async renew(): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE replicas SET lease_until = now() + $2 * interval '1 millisecond'
       WHERE id = $1 AND taken_over_by IS NULL AND stopped_at IS NULL RETURNING id`,
      [this.replicaId, this.leaseMs],
    );
    return rows.length === 1;
  }

  /** Ends this replica's lease now (a clean stop): the others take its sessions over at their next look. */
  async release(): Promise<void> {
    await this.db.query(
      `UPDATE replicas SET lease_until = now(), stopped_at = now() WHERE id = $1 AND taken_over_by IS NULL`,
      [this.replicaId],
    );
  }

  /** Replicas whose lease ran out and nobody has taken over yet. */
  async expired(): Promise<string[]> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT id FROM replicas WHERE lease_until < now() AND taken_over_by IS NULL AND id <> $1
       ORDER BY lease_until`,
      [this.replicaId],
    );
    return rows.map((r) => r.id);
  }

  /** Replicas whose lease runs. */
  async live(): Promise<{ id: string; url: string }[]> {
    return this.db.query<{ id: string; url: string }>(
      `SELECT id, url FROM replicas WHERE lease_until >= now() AND taken_over_by IS NULL ORDER BY started_at`,
    );
  }

  /** Who serves the session; `undefined` when no replica holds such a session. */
  async route(sessionId: string): Promise<SessionRoute | undefined> {
    const [row] = await this.db.query<{ owner: string; url: string | null; alive: boolean | null }>(
      `SELECT s.owner, r.url, (r.lease_until >= now() AND r.taken_over_by IS NULL) AS alive
       FROM sessions s LEFT JOIN replicas r ON r.id = s.owner WHERE s.id = $1`,
      [sessionId],
    );
    if (!row) return undefined;
    return { owner: row.owner, ...(row.url !== null && { url: row.url }), alive: row.alive === true };
  }
}
