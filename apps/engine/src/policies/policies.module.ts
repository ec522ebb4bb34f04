import { Module } from '@nestjs/common';
import { stateStore } from '../storage/storage.module';
import { ActivePlanLayers } from './active-plan-layers';
import { PolicyService } from './policy.service';
import { PostgresTenantPolicyStore } from './postgres-tenant-policy.store';
import { SqliteTenantPolicyStore } from './sqlite-tenant-policy.store';
import { TenantPolicyStore } from './tenant-policy.store';

/** The policy layers every action is decided by (engine, tenant, session, plan), and tenants' stored layers. */
@Module({
  providers: [
    stateStore(TenantPolicyStore, { sqlite: SqliteTenantPolicyStore, postgres: PostgresTenantPolicyStore }),
    PolicyService,
    ActivePlanLayers,
  ],
  exports: [PolicyService, ActivePlanLayers],
})
export class PoliciesModule {}
