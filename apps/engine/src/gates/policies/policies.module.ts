import { Module } from '@nestjs/common';
import { stateStore } from '../../state/storage/storage.module';
import { ActivePlanLayers } from './active-plan-layers';
import { enginePolicyProvider } from './engine-policy';
import { PolicyService } from './policy.service';
import { PostgresTenantPolicyStore } from '../../state/policies/postgres-tenant-policy.store';
import { SqliteTenantPolicyStore } from '../../state/policies/sqlite-tenant-policy.store';
import { TenantPolicyStore } from '../../state/policies/tenant-policy.store';

/** The policy layers every action is decided by (engine, tenant, session, plan), and tenants' stored layers. */
@Module({
  providers: [
    stateStore(TenantPolicyStore, { sqlite: SqliteTenantPolicyStore, postgres: PostgresTenantPolicyStore }),
    enginePolicyProvider,
    PolicyService,
    ActivePlanLayers,
  ],
  exports: [PolicyService, ActivePlanLayers],
})
export class PoliciesModule {}
