import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { PostgresDb } from '../storage/postgres-db';
import { PostgresTenantCache } from '../storage/postgres-tenant-cache';
import type { PolicyRule } from './policy.types';
import { type TenantPolicy, TenantPolicyStore } from './tenant-policy.store';

/** Where a replica announces that a tenant's policy changed (payload: the tenant). */
export const TENANT_POLICIES_CHANNEL = 'switchyard_tenant_policies';

interface Row {
  tenant: string;
  rules: PolicyRule[];
  updated_at: Date;
  updated_by: string;
}

const SELECT = 'SELECT tenant, rules, updated_at, updated_by FROM tenant_policies';

/**
 * Tenants' policies in the replicas' shared Postgres (SWITCHYARD_STATE=postgres): every tenant's in memory, so the
 * action path reads without waiting; a PUT or DELETE is written to Postgres first and announced, and every replica
 * reads that tenant again (see `PostgresTenantCache`).
 */
@Injectable()
export class PostgresTenantPolicyStore extends TenantPolicyStore implements OnApplicationShutdown {
  private readonly cache: PostgresTenantCache<TenantPolicy>;

  constructor(private readonly db: PostgresDb) {
    super();
    this.cache = new PostgresTenantCache(
      db,
      {
        channel: TENANT_POLICIES_CHANNEL,
        loadAll: async () =>
          new Map((await db.query<Row>(SELECT)).map((r) => [r.tenant, toPolicy(r)] as const)),
        loadOne: async (tenant) => {
          const [row] = await db.query<Row>(`${SELECT} WHERE tenant = $1`, [tenant]);
          return row && toPolicy(row);
        },
      },
      new Logger('TenantPolicies'),
    );
  }

  /** Loads every tenant's policy and starts following the other replicas' changes. */
  init(): Promise<void> {
    return this.cache.start();
  }

  get(tenant: string): TenantPolicy | undefined {
    return this.cache.get(tenant);
  }

  async put(policy: TenantPolicy): Promise<void> {
    await this.cache.write(policy.tenant, (client) =>
      client.query(
        `INSERT INTO tenant_policies (tenant, rules, updated_at, updated_by) VALUES ($1, $2::json, $3, $4)
         ON CONFLICT (tenant) DO UPDATE SET rules = excluded.rules, updated_at = excluded.updated_at,
           updated_by = excluded.updated_by`,
        [policy.tenant, JSON.stringify(policy.rules), policy.updatedAt, policy.updatedBy],
      ),
    );
  }

  async delete(tenant: string): Promise<boolean> {
    const { rowCount } = await this.cache.write(tenant, (client) =>
      client.query('DELETE FROM tenant_policies WHERE tenant = $1', [tenant]),
    );
    return (rowCount ?? 0) > 0;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.cache.stop();
  }
}

function toPolicy(r: Row): TenantPolicy {
  return { tenant: r.tenant, rules: r.rules, updatedAt: r.updated_at.toISOString(), updatedBy: r.updated_by };
}
