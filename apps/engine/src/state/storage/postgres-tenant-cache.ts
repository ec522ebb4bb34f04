import type { Logger } from '@nestjs/common';
import type { PoolClient } from 'pg';
import type { PostgresDb } from './postgres-db';

/** What a `PostgresTenantCache` holds and how it reads it. */
export interface PostgresTenantCacheOptions<V> {
  /** The NOTIFY channel its writes announce a tenant on (payload: the tenant). */
  channel: string;
  /** Every tenant's value (tenants with none left out). */
  loadAll(): Promise<Map<string, V>>;
  /** One tenant's value; `undefined` when it has none. */
  loadOne(tenant: string): Promise<V | undefined>;
  /** How often everything is read again. Default 30 s. */
  resyncMs?: number;
}

/**
 * A per-tenant copy of a Postgres table in memory, for reads that must stay synchronous (every action asks), kept
 * current on every replica: read whole at `start()`, written through to Postgres first, and read again for a tenant
 * whenever a replica announces a change of it by NOTIFY (sent by the writing transaction, so only once committed).
 * A full read every `resyncMs` catches what was announced while the LISTEN connection was being reopened.
 */
export class PostgresTenantCache<V> {
  private readonly values = new Map<string, V>();
  /** Per tenant, the last write or reload queued: they run one after another, so the last one read wins. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Per tenant, the `epoch` of its last reload: a full read begun before it must not overwrite it. */
  private readonly reloadedAt = new Map<string, number>();
  private epoch = 0;
  private resyncing = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly db: PostgresDb,
    private readonly options: PostgresTenantCacheOptions<V>,
    private readonly logger: Logger,
  ) {}

  /** Listens first, then reads everything, so no change falls between the two. */
  async start(): Promise<void> {
    this.unlisten = await this.db.listen(this.options.channel, (tenant) => {
      this.refresh(tenant).catch((error: unknown) => {
        if (!this.stopped) {
          this.logger.warn({ msg: 'cannot reload a tenant announced changed', tenant, error: String(error) });
        }
      });
    });
    await this.resync();
    this.timer = setInterval(() => {
      this.resync().catch((error: unknown) => {
        if (!this.stopped) {
          this.logger.warn({
            msg: 'cannot reload tenants',
            channel: this.options.channel,
            error: String(error),
          });
        }
      });
    }, this.options.resyncMs ?? 30_000);
    this.timer.unref();
  }

  get(tenant: string): V | undefined {
    return this.values.get(tenant);
  }

  /**
   * Runs `work` (a change of `tenant`'s rows) in a transaction that announces the tenant to every replica when it
   * commits, after the tenant's earlier writes and reloads here; resolves once this replica holds the result.
   */
  write<T>(tenant: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.queued(tenant, async () => {
      const result = await this.db.tx(async (client) => {
        const r = await work(client);
        await client.query('SELECT pg_notify($1, $2)', [this.options.channel, tenant]);
        return r;
      });
      await this.reload(tenant);
      return result;
    });
  }

  /** Reads `tenant` again (another replica changed it). */
  refresh(tenant: string): Promise<void> {
    return this.queued(tenant, () => this.reload(tenant));
  }

  /** Stops following changes; what is held stays readable. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.unlisten?.();
  }

  private queued<T>(tenant: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(tenant) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    this.queues.set(tenant, next);
    void next
      .catch(() => undefined)
      .finally(() => {
        if (this.queues.get(tenant) === next) this.queues.delete(tenant);
      });
    return next;
  }

  private async reload(tenant: string): Promise<void> {
    if (this.stopped) return;
    const value = await this.options.loadOne(tenant);
    this.reloadedAt.set(tenant, ++this.epoch);
    if (value === undefined) this.values.delete(tenant);
    else this.values.set(tenant, value);
  }

  private async resync(): Promise<void> {
    if (this.resyncing) return;
    this.resyncing = true;
    try {
      const from = this.epoch;
      const all = await this.options.loadAll();
      for (const tenant of new Set([...this.values.keys(), ...all.keys()])) {
        if ((this.reloadedAt.get(tenant) ?? 0) > from) continue; // read again since: newer than this
        const value = all.get(tenant);
        if (value === undefined) this.values.delete(tenant);
        else this.values.set(tenant, value);
      }
    } finally {
      this.resyncing = false;
    }
  }
}
