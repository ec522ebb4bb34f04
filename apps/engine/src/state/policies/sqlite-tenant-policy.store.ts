import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import type { PolicyRule } from './policy.types';
import { type TenantPolicy, TenantPolicyStore } from './tenant-policy.store';

interface Row {
  tenant: string;
  rules: string;
  updated_at: string;
  updated_by: string;
}

/** Tenants' policies in the engine's SQLite file (SWITCHYARD_STATE=sqlite), read through a cache. */
@Injectable()
export class SqliteTenantPolicyStore extends TenantPolicyStore {
  private readonly db: DatabaseSync;
  private readonly cache = new Map<string, TenantPolicy | null>();

  constructor(file: EngineDb) {
    super();
    this.db = file.db;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS tenant_policies (
        tenant TEXT PRIMARY KEY,
        rules TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updated_by TEXT NOT NULL
      ) STRICT;
    `);
  }

  get(tenant: string): TenantPolicy | undefined {
    const cached = this.cache.get(tenant);
    if (cached !== undefined) return cached ?? undefined;
    const row = this.db.prepare('SELECT * FROM tenant_policies WHERE tenant = ?').get(tenant) as
      Row | undefined;
    const policy = row
      ? {
          tenant: row.tenant,
          rules: JSON.parse(row.rules) as PolicyRule[],
          updatedAt: row.updated_at,
          updatedBy: row.updated_by,
        }
      : undefined;
    this.cache.set(tenant, policy ?? null);
    return policy;
  }

  async put(policy: TenantPolicy): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO tenant_policies (tenant, rules, updated_at, updated_by) VALUES (?, ?, ?, ?)
         ON CONFLICT (tenant) DO UPDATE SET rules = excluded.rules, updated_at = excluded.updated_at,
           updated_by = excluded.updated_by`,
      )
      .run(policy.tenant, JSON.stringify(policy.rules), policy.updatedAt, policy.updatedBy);
    this.cache.set(policy.tenant, policy);
  }

  async delete(tenant: string): Promise<boolean> {
    const { changes } = this.db.prepare('DELETE FROM tenant_policies WHERE tenant = ?').run(tenant);
    this.cache.set(tenant, null);
    return Number(changes) > 0;
  }
}
