import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { ApprovalGate } from './approval-gate';
import { ApprovalsController } from './approvals.controller';

/** Actions waiting for a person's decision, and the REST edge that decides them. */
@Module({
  imports: [SessionsModule],
  controllers: [ApprovalsController],
  providers: [ApprovalGate],
  exports: [ApprovalGate],
})
export class ApprovalsModule {}
