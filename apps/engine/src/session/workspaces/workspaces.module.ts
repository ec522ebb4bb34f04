import { type DynamicModule, Global, Module } from '@nestjs/common';
import { CHECKPOINT_VAULT, POD_WORKSPACE_IO } from '@switchyard/workspace';
import type { SandboxBackend } from '../../platform/config/kubernetes-env';
import { HostWorkspaces } from './host-workspaces';
import { PodWorkspaces } from './pod-workspaces';
import { SessionWorkspaces } from './session-workspaces';
import { checkpointVaultProvider, SessionPodsIo } from './workspace-io';

/**
 * Sessions' workspaces as the engine reaches them (global: sessions, handlers, checkpoints and MCP use them): host
 * directories with the Docker backend, the session pods' volumes with the Kubernetes one (whose checkpoints then
 * travel as tars: `POD_WORKSPACE_IO`, kept in the `CHECKPOINT_VAULT`: the replicas' Postgres with replicas).
 */
@Global()
@Module({})
export class WorkspacesModule {
  static forRoot(backend: SandboxBackend): DynamicModule {
    if (backend === 'docker') {
      return {
        module: WorkspacesModule,
        providers: [{ provide: SessionWorkspaces, useClass: HostWorkspaces }],
        exports: [SessionWorkspaces],
      };
    }
    return {
      module: WorkspacesModule,
      providers: [
        { provide: SessionWorkspaces, useClass: PodWorkspaces },
        { provide: POD_WORKSPACE_IO, useClass: SessionPodsIo },
        checkpointVaultProvider,
      ],
      exports: [SessionWorkspaces, POD_WORKSPACE_IO, CHECKPOINT_VAULT],
    };
  }
}
