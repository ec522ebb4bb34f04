import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Client, Pool, type PoolClient, type QueryResultRow } from 'pg';
import { ConfigError } from '../../platform/config/config-error';
import { STATE_MIGRATIONS, type StateMigration } from './state-migrations';

/** Serialises migrations between replicas starting at once (any constant both agree on). */
const MIGRATION_LOCK = 0x5359_0001;

export interface PostgresDbOptions {
  url: string;
  poolSize: number;
  /** Default: the engine's own list. */
  migrations?: readonly StateMigration[];
}

/**
 * The replicas' shared Postgres (SWITCHYARD_STATE=postgres): one pool per replica, opened and migrated at start-up,
 * closed once at shutdown after every store that uses it (its module is global, so Nest shuts it down last).
 */
export class PostgresDb implements OnApplicationShutdown {
  private readonly logger = new Logger('PostgresDb');
  private readonly listeners = new Set<Client>();
  private closed = false;

  private constructor(
    readonly pool: Pool,
    private readonly url: string,
  ) {}

  /** Connects and brings the schema up to date; a database that cannot be reached is a `ConfigError` on DATABASE_URL. */
  static async open(options: PostgresDbOptions): Promise<PostgresDb> {
    const pool = new Pool({
      connectionString: options.url,
      max: options.poolSize,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle client's error (the server restarting) must not crash the engine; the pool replaces it.
    pool.on('error', (err) => new Logger('PostgresDb').warn(`idle connection lost: ${err.message}`));
    const db = new PostgresDb(pool, options.url);
    try {
      await db.migrate(options.migrations ?? STATE_MIGRATIONS);
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw new ConfigError([
        { variable: 'DATABASE_URL', message: `Postgres refused start-up: ${(error as Error).message}` },
      ]);
    }
    return db;
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  async query<R extends QueryResultRow = QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
    return (await this.pool.query<R>(sql, params)).rows;
  }

  /** Runs `work` in one transaction on one connection: committed when it resolves, rolled back when it throws. */
  async tx<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // A connection lost mid-transaction emits `error` on the client (not the pool): the query in flight fails and
    // is thrown to the caller; unheard, the event would stop the process. The broken connection is not reused.
    let lost: Error | undefined;
    const onError = (err: Error): void => {
      lost = err;
      this.logger.warn(`connection lost during a transaction: ${err.message}`);
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      if (!lost) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.off('error', onError);
      client.release(lost);
    }
  }

  /** `NOTIFY channel, payload` (delivered to every replica listening, this one included, after commit). */
  async notify(channel: string, payload: string): Promise<void> {
    await this.pool.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  /**
   * Calls `onPayload` for every notification on `channel`, on a connection of its own (outside the pool), until
   * the returned function is called or the database closes. A lost connection is reopened after a second.
   */
  async listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    let client: Client | undefined;
    let stopped = false;
    const connect = async (): Promise<void> => {
      if (stopped || this.closed) return;
      const c = new Client({ connectionString: this.url });
      c.on('notification', (n) => {
        if (n.channel === channel) onPayload(n.payload ?? '');
      });
      c.on('error', (err) => {
        this.logger.warn(`LISTEN ${channel} connection lost: ${err.message}; reconnecting`);
        this.listeners.delete(c);
        c.end().catch(() => undefined);
        if (!stopped && !this.closed) setTimeout(() => void connect().catch(() => undefined), 1000).unref();
      });
      await c.connect();
      await c.query(`LISTEN ${quoteIdent(channel)}`);
      client = c;
      this.listeners.add(c);
    };
    await connect();
    return async () => {
      stopped = true;
      if (client) {
        this.listeners.delete(client);
        await client.end().catch(() => undefined);
      }
    };
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.listeners].map((c) => c.end()));
    await this.pool.end();
  }

  /** Applies every migration above the recorded version, each in its own transaction, under one advisory lock. */
  private async migrate(migrations: readonly StateMigration[]): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const done = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map(
          (r) => r.version,
        ),
      );
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
            m.version,
            m.name,
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw new Error(`migration ${m.version} (${m.name}) failed: ${(error as Error).message}`);
        }
        this.logger.log({ msg: 'state migration applied', version: m.version, name: m.name });
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      client.release();
    }
  }
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
