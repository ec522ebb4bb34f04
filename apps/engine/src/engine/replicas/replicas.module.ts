import { type DynamicModule, Module } from '@nestjs/common';
import type { EngineConfig } from '../../platform/config/engine-config';
import { EventsModule } from '../../session/events/events.module';
import { HooksModule } from '../../gates/hooks/hooks.module';
import { PlansModule } from '../plans/plans.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ReplicaLeases } from './replica-leases';
import { ReplicaRegistry } from './replica-registry';
import { ReplicaTakeover } from './replica-takeover';

/**
 * Replicas (SWITCHYARD_STATE=postgres): leases, takeover of a dead replica's sessions, (the edge forwards a session's requests
 * to the replica that serves it: edge/replicas). Empty with SQLite: one engine serves everything.
 */
@Module({})
export class ReplicasModule {
  static forRoot(config: EngineConfig): DynamicModule {
    if (config.state.store !== 'postgres') return { module: ReplicasModule };
    return {
      module: ReplicasModule,
      imports: [SessionsModule, EventsModule, PlansModule, HooksModule],
      providers: [ReplicaLeases, ReplicaTakeover, ReplicaRegistry],
      exports: [ReplicaLeases, ReplicaTakeover],
    };
  }
}
