import { type DynamicModule, Module } from '@nestjs/common';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ReplicasModule } from '../../engine/replicas/replicas.module';
import { ApprovalsFanOut } from './approvals-fan-out';
import { SessionForwarding } from './session-forwarding';
import { UpgradeForwarding } from './upgrade-forwarding';

/**
 * Replicas at the edge (SWITCHYARD_STATE=postgres): a session's requests and WebSockets go to the replica that serves
 * it, and approval decisions reach every replica. Wraps the replicas module, so the app imports only this one. Empty
 * with SQLite.
 */
@Module({})
export class ReplicaForwardingModule {
  static forRoot(config: EngineConfig): DynamicModule {
    const replicas = ReplicasModule.forRoot(config);
    if (config.state.store !== 'postgres') return { module: ReplicaForwardingModule, imports: [replicas] };
    return {
      module: ReplicaForwardingModule,
      imports: [replicas],
      providers: [SessionForwarding, ApprovalsFanOut, UpgradeForwarding],
      exports: [SessionForwarding, ApprovalsFanOut],
    };
  }
}
