import { systemClock } from '@switchyard/common';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { PolicyRule } from '../../state/policies/policy.types';
import { PolicyService } from './policy.service';
import type { TenantPolicy, TenantPolicyStore } from '../../state/policies/tenant-policy.store';

/**
 * @internal Tests only: a `PolicyService` with the given engine rules and tenants' rules kept in memory (no
 * engine.db).
 */
export function policyServiceForTests(
  engineRules: PolicyRule[] = [],
  tenants: Record<string, PolicyRule[]> = {},
): PolicyService {
  const stored = new Map<string, TenantPolicy>(
    Object.entries(tenants).map(([tenant, rules]) => [
      tenant,
      { tenant, rules, updatedAt: '2026-01-01T00:00:00.000Z', updatedBy: 'admin:test' },
    ]),
  );
  const store = {
    get: (t: string) => stored.get(t),
    put: async (p: TenantPolicy) => void stored.set(p.tenant, p),
    delete: async (t: string) => stored.delete(t),
  } as unknown as TenantPolicyStore;
  const config = {
    policy: { adminKeys: [], approvers: 'tenant', approvalTimeoutMs: 60_000 },
  } as unknown as EngineConfig;
  return new PolicyService(config, systemClock, store, { rules: engineRules });
}
