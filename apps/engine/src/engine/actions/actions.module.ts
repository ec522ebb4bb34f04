import { Module } from '@nestjs/common';
import { CheckpointsModule } from '../../session/checkpoints/checkpoints.module';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { NetworkModule } from '../../gates/egress/network.module';
import { EventsModule } from '../../session/events/events.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { MetricsModule } from '../../platform/metrics/metrics.module';
import { MetricsService } from '../../platform/metrics/metrics.service';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ApprovalsModule } from '../../gates/approvals/approvals.module';
import { HooksModule } from '../../gates/hooks/hooks.module';
import { PoliciesModule } from '../../gates/policies/policies.module';
import { ActionCheckpoints } from './action-checkpoints';
import { ActionGates } from './action-gates';
import { ActionEnvelopes } from './action-envelope';
import { ACTION_HANDLERS, type ActionHandler } from './action-handler.port';
import { ActionScheduler } from './action-scheduler';
import { ExecutionEngine } from './execution-engine.service';
import { BrowserActionHandler } from '../handlers/browser-action.handler';
import { CodeActionHandler } from '../handlers/code-action.handler';
import { FileActionHandler } from '../handlers/file-action.handler';
import { FileTransferChannel } from '../handlers/file-transfer-channel';
import { KernelActionHandler } from '../handlers/kernel-action.handler';
import { ProcessActionHandler } from '../handlers/process-action.handler';
import { SkillActionHandler } from '../handlers/skill-action.handler';
import { TerminalActionHandler } from '../handlers/terminal-action.handler';
import { TerminalEndings } from '../handlers/terminal-endings';
import { TerminalRequests } from '../handlers/terminal-requests';
import { SkillsModule } from '../skills/skills.module';
import { InFlightActions } from './in-flight-actions';
import { RetryPolicy } from './retry-policy';

/** Every kind of action has one handler here; the engine runs them all through the same steps. */
const HANDLERS = [
  CodeActionHandler,
  FileActionHandler,
  BrowserActionHandler,
  ProcessActionHandler,
  KernelActionHandler,
  SkillActionHandler,
  TerminalActionHandler,
];

/** Actions: the execution engine, a handler per action type, admission, retries and the REST endpoints. */
@Module({
  imports: [
    SessionsModule,
    EventsModule,
    MetricsModule,
    IdempotencyModule,
    NetworkModule,
    CheckpointsModule,
    PoliciesModule,
    ApprovalsModule,
    HooksModule,
    SkillsModule,
  ],
  providers: [
    ...HANDLERS,
    { provide: ACTION_HANDLERS, useFactory: (...h: ActionHandler[]) => h, inject: HANDLERS },
    {
      provide: ActionScheduler,
      useFactory: (config: EngineConfig, metrics: MetricsService) => {
        const scheduler = new ActionScheduler(config.actions);
        metrics.trackInFlight(() => scheduler.stats());
        return scheduler;
      },
      inject: [ENGINE_CONFIG, MetricsService],
    },
    InFlightActions,
    RetryPolicy,
    ActionCheckpoints,
    ActionGates,
    ActionEnvelopes,
    ExecutionEngine,
    FileTransferChannel,
    TerminalRequests,
    TerminalEndings,
  ],
  exports: [ExecutionEngine, FileTransferChannel, TerminalRequests],
})
export class ActionsModule {}
