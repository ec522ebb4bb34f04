import { type DynamicModule, Module } from '@nestjs/common';
import { FileOperations } from './file-operations.service';
import { WorkspaceManager } from './workspace-manager.service';
import { WorkspaceUsage } from './workspace-usage';
import { resolveWorkspaceOptions, WORKSPACE_OPTIONS, type WorkspaceModuleOptions } from './workspace.options';

/** Session workspaces and the file API over them. Global: the engine imports it once at the root. */
@Module({})
export class WorkspaceModule {
  static forRoot(options: WorkspaceModuleOptions): DynamicModule {
    return {
      module: WorkspaceModule,
      global: true,
      // Resolved here, at boot, so a bad setting fails the start-up naming the setting.
      providers: [
        { provide: WORKSPACE_OPTIONS, useValue: resolveWorkspaceOptions(options) },
        // One usage count per workspace, shared: the manager marks it stale, the file API maintains it.
        WorkspaceUsage,
        WorkspaceManager,
        FileOperations,
      ],
      exports: [WORKSPACE_OPTIONS, WorkspaceUsage, WorkspaceManager, FileOperations],
    };
  }
}
