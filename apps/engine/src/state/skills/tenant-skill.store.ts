import type { SkillDefinition } from './skill.types';
import type { SkillRecord } from './skill.types';

/** What adding a tenant's skill came to. */
export type TenantSkillAdded = 'added' | 'exists' | 'limit';

/**
 * Tenants' own skills (POST /v1/skills). Reads are synchronous: a skill action and the tool list ask on their path.
 * Adapters: `SqliteTenantSkillStore` (engine.db) and `PostgresTenantSkillStore` (every tenant's in memory, written
 * through to Postgres and announced to the other replicas).
 */
export abstract class TenantSkillStore {
  /** The tenant's skills, by name. */
  abstract list(tenant: string): SkillRecord[];

  abstract find(tenant: string, name: string): SkillRecord | undefined;

  /**
   * Adds the skill, unless the tenant has one of that name already (`exists`) or has `limit` skills (`limit`); both
   * checked with the insert, atomically. Once it resolves, this engine's reads have it (other replicas' within moments).
   */
  abstract add(
    tenant: string,
    skill: SkillDefinition,
    createdAt: string,
    limit: number,
  ): Promise<TenantSkillAdded>;

  /** Removes the tenant's skill; false when it had none of that name. */
  abstract remove(tenant: string, name: string): Promise<boolean>;
}
