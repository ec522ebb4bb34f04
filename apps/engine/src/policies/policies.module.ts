import { Module } from '@nestjs/common';
import { PolicyService } from './policy.service';
import { TenantPolicyStore } from './tenant-policy.store';

/** The policy layers every action is decided by (engine, tenant, session, plan), and tenants' stored layers. */
@Module({
  providers: [TenantPolicyStore, PolicyService],
  exports: [PolicyService],
})
export class PoliciesModule {}
