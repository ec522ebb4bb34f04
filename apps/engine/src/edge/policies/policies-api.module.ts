import { Module } from '@nestjs/common';
import { ApprovalsModule } from '../../gates/approvals/approvals.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ToolsModule } from '../../engine/tools/tools.module';
import { PoliciesController } from './policies.controller';
import { PoliciesModule } from '../../gates/policies/policies.module';

/** Policies over REST: a session's effective policy (with the tools it hides), tenants' layers, and who calls. */
@Module({
  imports: [PoliciesModule, SessionsModule, ToolsModule, ApprovalsModule],
  controllers: [PoliciesController],
})
export class PolicyApiModule {}
