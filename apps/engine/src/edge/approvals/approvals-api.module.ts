import { Module } from '@nestjs/common';
import { ApprovalsModule } from '../../gates/approvals/approvals.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ApprovalsController } from './approvals.controller';

/** The REST endpoints of Approvals, over the module that does the work. */
@Module({
  imports: [ApprovalsModule, SessionsModule],
  controllers: [ApprovalsController],
})
export class ApprovalsApiModule {}
