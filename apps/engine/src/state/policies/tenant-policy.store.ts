import type { PolicyRule } from './policy.types';

/** A tenant's policy layer as an admin set it. */
export interface TenantPolicy {
  tenant: string;
  rules: PolicyRule[];
  updatedAt: string;
  /** The admin who set it (a principal id). */
  updatedBy: string;
}

/**
 * Tenants' policy layers. Every action reads its tenant's, so `get` is synchronous (answered from memory); only admins
 * change them. Adapters: `SqliteTenantPolicyStore` (engine.db, read through a cache) and `PostgresTenantPolicyStore`
 * (every tenant's in memory, written through to Postgres and announced to the other replicas).
 */
export abstract class TenantPolicyStore {
  abstract get(tenant: string): TenantPolicy | undefined;

  /** Sets the tenant's layer; once it resolves, this engine's `get` returns it (other replicas' within moments). */
  abstract put(policy: TenantPolicy): Promise<void>;

  /** Removes the tenant's layer; true when there was one. */
  abstract delete(tenant: string): Promise<boolean>;
}
