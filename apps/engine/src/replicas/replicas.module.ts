import { type DynamicModule, Module } from '@nestjs/common';
import type { EngineConfig } from '../config/engine-config';
import { EventsModule } from '../events/events.module';
import { HooksModule } from '../hooks/hooks.module';
import { PlansModule } from '../plans/plans.module';
import { SessionsModule } from '../sessions/sessions.module';
import { ApprovalsFanOut } from './approvals-fan-out';
import { ReplicaLeases } from './replica-leases';
import { ReplicaRegistry } from './replica-registry';
import { ReplicaTakeover } from './replica-takeover';
import { SessionForwarding } from './session-forwarding';

/**
 * Replicas (SWITCHYARD_STATE=postgres): leases, takeover of a dead replica's sessions, and forwarding of a session's
 * requests to the replica that serves it. Empty with SQLite: one engine serves everything.
 */
@Module({})
export class ReplicasModule {
  static forRoot(config: EngineConfig): DynamicModule {
    if (config.state.store !== 'postgres') return { module: ReplicasModule };
    return {
      module: ReplicasModule,
      imports: [SessionsModule, EventsModule, PlansModule, HooksModule],
      providers: [ReplicaLeases, ReplicaTakeover, ReplicaRegistry, SessionForwarding, ApprovalsFanOut],
      exports: [ReplicaLeases, SessionForwarding, ApprovalsFanOut],
    };
  }
}
