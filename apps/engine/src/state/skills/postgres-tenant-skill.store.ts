import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { PostgresDb } from '../storage/postgres-db';
import { PostgresTenantCache } from '../storage/postgres-tenant-cache';
import type { SkillDefinition } from './skill.types';
import type { SkillRecord } from './skill.types';
import { type TenantSkillAdded, TenantSkillStore } from './tenant-skill.store';

/** Where a replica announces that a tenant's skills changed (payload: the tenant). */
export const TENANT_SKILLS_CHANNEL = 'switchyard_tenant_skills';

/** Advisory-lock class of a tenant's skill additions (the second key is the tenant's hash). */
const ADD_LOCK = 0x5359_0002;

interface Row {
  tenant: string;
  definition: SkillDefinition;
  created_at: Date;
}

// Byte order, as SQLite's ORDER BY name.
const SELECT = 'SELECT tenant, definition, created_at FROM tenant_skills';
const ORDER = 'ORDER BY tenant, name COLLATE "C"';

/**
 * Tenants' skills in the replicas' shared Postgres (SWITCHYARD_STATE=postgres): every tenant's in memory, so a skill
 * action finds its skill without waiting; an addition or removal is written to Postgres first and announced, and
 * every replica reads that tenant's skills again (see `PostgresTenantCache`).
 */
@Injectable()
export class PostgresTenantSkillStore extends TenantSkillStore implements OnApplicationShutdown {
  private readonly cache: PostgresTenantCache<SkillRecord[]>;

  constructor(db: PostgresDb) {
    super();
    this.cache = new PostgresTenantCache(
      db,
      {
        channel: TENANT_SKILLS_CHANNEL,
        loadAll: async () => {
          const byTenant = new Map<string, SkillRecord[]>();
          for (const row of await db.query<Row>(`${SELECT} ${ORDER}`)) {
            const own = byTenant.get(row.tenant) ?? [];
            own.push(toRecord(row));
            byTenant.set(row.tenant, own);
          }
          return byTenant;
        },
        loadOne: async (tenant) => {
          const rows = await db.query<Row>(`${SELECT} WHERE tenant = $1 ${ORDER}`, [tenant]);
          return rows.length > 0 ? rows.map(toRecord) : undefined;
        },
      },
      new Logger('TenantSkills'),
    );
  }

  /** Loads every tenant's skills and starts following the other replicas' changes. */
  init(): Promise<void> {
    return this.cache.start();
  }

  list(tenant: string): SkillRecord[] {
    return [...(this.cache.get(tenant) ?? [])];
  }

  find(tenant: string, name: string): SkillRecord | undefined {
    return this.cache.get(tenant)?.find((s) => s.name === name);
  }

  add(tenant: string, skill: SkillDefinition, createdAt: string, limit: number): Promise<TenantSkillAdded> {
    return this.cache.write(tenant, async (client) => {
      // Two replicas adding for one tenant at once would each count below the cap.
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ADD_LOCK, tenant]);
      const { rows } = await client.query<{ n: string; taken: boolean }>(
        `SELECT count(*) AS n, coalesce(bool_or(name = $2), false) AS taken FROM tenant_skills WHERE tenant = $1`,
        [tenant, skill.name],
      );
      if (rows[0]?.taken) return 'exists';
      if (Number(rows[0]?.n ?? 0) >= limit) return 'limit';
      await client.query(
        'INSERT INTO tenant_skills (tenant, name, definition, created_at) VALUES ($1, $2, $3::json, $4)',
        [tenant, skill.name, JSON.stringify(skill), createdAt],
      );
      return 'added';
    });
  }

  async remove(tenant: string, name: string): Promise<boolean> {
    const { rowCount } = await this.cache.write(tenant, (client) =>
      client.query('DELETE FROM tenant_skills WHERE tenant = $1 AND name = $2', [tenant, name]),
    );
    return (rowCount ?? 0) > 0;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.cache.stop();
  }
}

function toRecord(r: Row): SkillRecord {
  return { ...r.definition, source: 'tenant', createdAt: r.created_at.toISOString() };
}
