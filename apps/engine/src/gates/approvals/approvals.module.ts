import { Module } from '@nestjs/common';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ApprovalGate } from './approval-gate';

/** Actions waiting for a person's decision, and the REST edge that decides them. */
@Module({
  imports: [SessionsModule],
  providers: [ApprovalGate],
  exports: [ApprovalGate],
})
export class ApprovalsModule {}
