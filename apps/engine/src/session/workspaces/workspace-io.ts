import { Inject, Injectable, type Provider } from '@nestjs/common';
import { KUBERNETES_SESSION_PODS, type SessionPods } from '@switchyard/sandbox';
import { CHECKPOINT_VAULT, type CheckpointVault, PodWorkspaceIo } from '@switchyard/workspace';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { PostgresDb } from '../../state/storage/postgres-db';
import { PostgresCheckpointVault } from '../../state/workspaces/postgres-checkpoint-vault';

/** Checkpoints of pod workspaces (`PodCheckpointStore`) reach them as tars, through the session pods. */
@Injectable()
export class SessionPodsIo extends PodWorkspaceIo {
  constructor(@Inject(KUBERNETES_SESSION_PODS) private readonly pods: SessionPods) {
    super();
  }

  tarOut(sessionId: string): Promise<Buffer> {
    return this.pods.tarOut(sessionId);
  }

  tarIn(sessionId: string, tar: Buffer, options: { replace: boolean; dataOnly?: boolean }): Promise<void> {
    return this.pods.tarIn(sessionId, tar, options);
  }
}

/**
 * Where those tars are kept: with replicas (SWITCHYARD_STATE=postgres) in their shared Postgres, so that the replica
 * taking a dead one's sessions over restores their checkpoints; else `null`, and the workspace lib keeps them on
 * the engine's disk. (`PostgresDb` exists only in that mode: optional here.)
 */
export const checkpointVaultProvider: Provider = {
  provide: CHECKPOINT_VAULT,
  inject: [ENGINE_CONFIG, { token: PostgresDb, optional: true }],
  useFactory: (config: EngineConfig, db: PostgresDb | undefined): CheckpointVault | null => {
    if (config.state.store !== 'postgres') return null;
    if (!db) throw new Error('SWITCHYARD_STATE=postgres without the shared PostgresDb (StorageModule)');
    return new PostgresCheckpointVault(db);
  },
};
