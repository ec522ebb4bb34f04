import { Logger } from '@nestjs/common';
import { Pool, type PoolClient } from 'pg';
import type { OutboxEntry } from './outbox-ops';

/** The `pg_notify` channel a write announces itself on, so every replica's forwarder wakes at once. */
export const OUTBOX_CHANNEL = 'graph_outbox';

// Advisory locks, in the two-int4 key space (the engine's own migrations lock in the bigint one: the two never
// meet): one key serialises creating the table, the other is held by whichever replica is applying entries.
const LOCK_NAMESPACE = 0x5359_4f42;
const SCHEMA_LOCK = 1;
const APPLY_LOCK = 2;

/** @internal The advisory lock keys (`pg_advisory_xact_lock(namespace, key)`), for tests that hold one. */
export const OUTBOX_LOCKS = { namespace: LOCK_NAMESPACE, schema: SCHEMA_LOCK, apply: APPLY_LOCK } as const;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS graph_outbox (
  id bigserial PRIMARY KEY,
  session_id text,
  op text NOT NULL,
  args jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS graph_outbox_session ON graph_outbox (session_id)`;

export interface PostgresOutboxOptions {
  /** `postgres://user:password@host:port/database`. */
  databaseUrl: string;
  /** Most connections: writes, the forwarder's transaction and reads' checks share them. Default 4. */
  poolSize?: number;
}

/** What `withApplyLock` hands its work: the oldest entries, and their removal, in the lock's transaction. */
export interface OutboxTransaction {
  /** The oldest `limit` entries, by id. */
  oldest(limit: number): Promise<OutboxEntry[]>;
  /** Deletes exactly these entries (not "up to": a lower id committed late must still be applied). */
  remove(ids: readonly string[]): Promise<void>;
}

/**
 * The graph's outbox table in Postgres (`graph_outbox`), shared by every replica, and the pool this store opens
 * for it. Each write is one autocommitted INSERT (durable once it resolves); forwarding runs in a transaction
 * holding an advisory lock, so one replica at a time applies entries and they are applied in id order.
 */
export class PostgresOutbox {
  private readonly logger = new Logger('PostgresOutbox');
  readonly pool: Pool;

  constructor(private readonly options: PostgresOutboxOptions) {
    this.pool = new Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 4,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 30_000,
      application_name: 'switchyard-graph-outbox',
    });
    // An idle connection dropped by the server must not crash the engine: the pool opens another.
    this.pool.on('error', (error) => this.logger.warn({ msg: 'idle connection lost', error: error.message }));
  }

  /** The URL without its password, for messages. */
  get where(): string {
    return redactUrl(this.options.databaseUrl);
  }

  /** Creates the table and its index unless they exist; replicas starting together take turns. */
  async createSchema(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', [LOCK_NAMESPACE, SCHEMA_LOCK]);
      await client.query(SCHEMA);
    });
  }

  /** Appends one entry and announces it (the notification leaves at commit); resolves with its id. */
  async append(sessionId: string | null, op: string, argsJson: string): Promise<string> {
    const result = await this.pool.query<{ id: string }>(
      `WITH entry AS (INSERT INTO graph_outbox (session_id, op, args) VALUES ($1, $2, $3::jsonb) RETURNING id)
       SELECT id, pg_notify($4, '') FROM entry`,
      [sessionId, op, argsJson, OUTBOX_CHANNEL],
    );
    return result.rows[0].id;
  }

  /** The highest entry id, `undefined` when the outbox is empty. */
  async lastId(): Promise<string | undefined> {
    const result = await this.pool.query<{ id: string | null }>('SELECT max(id) AS id FROM graph_outbox');
    return result.rows[0].id ?? undefined;
  }

  /** Whether an entry with an id up to `id` is still waiting. */
  async holdsUpTo(id: string): Promise<boolean> {
    const result = await this.pool.query<{ held: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM graph_outbox WHERE id <= $1) AS held',
      [id],
    );
    return result.rows[0].held;
  }

  /** Entries waiting. */
  async size(): Promise<number> {
    const result = await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM graph_outbox');
    return Number(result.rows[0].n);
  }

  /**
   * Runs `work` in a transaction holding the apply lock; resolves `{locked: false}` at once when another replica
   * holds it. The lock goes with the transaction, so a replica that dies mid-way frees it.
   */
  async withApplyLock<T>(
    work: (tx: OutboxTransaction) => Promise<T>,
  ): Promise<{ locked: false } | { locked: true; value: T }> {
    return this.transaction(async (client) => {
      const lock = await client.query<{ locked: boolean }>(
        'SELECT pg_try_advisory_xact_lock($1, $2) AS locked',
        [LOCK_NAMESPACE, APPLY_LOCK],
      );
      if (!lock.rows[0].locked) return { locked: false };
      const value = await work({
        oldest: async (limit) => {
          const rows = await client.query<{
            id: string;
            session_id: string | null;
            op: string;
            args: unknown;
          }>('SELECT id, session_id, op, args FROM graph_outbox ORDER BY id LIMIT $1', [limit]);
          return rows.rows.map((r) => ({ id: r.id, sessionId: r.session_id, op: r.op, args: r.args }));
        },
        remove: async (ids) => {
          if (ids.length > 0)
            await client.query('DELETE FROM graph_outbox WHERE id = ANY($1::bigint[])', [ids]);
        },
      });
      return { locked: true, value };
    });
  }

  /** Closes the pool once the connections in use are back. */
  async close(): Promise<void> {
    await this.pool.end();
  }

  private async transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const value = await work(client);
      await client.query('COMMIT');
      return value;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollback: unknown) => {
        broken = rollback instanceof Error ? rollback : new Error(String(rollback)); // the connection is gone
      });
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

/** `url` with its password replaced, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable Postgres URL)';
  }
}
