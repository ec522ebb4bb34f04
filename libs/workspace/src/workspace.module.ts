import { type DynamicModule, Logger, Module } from '@nestjs/common';
import { InvalidInputError } from '@switchyard/common';
import { WorkspaceCheckpoints } from './checkpoints/workspace-checkpoints.service';
import { FileOperations } from './file-operations.service';
import type { ImageFs } from './loop-host';
import { WorkspaceTransfers } from './transfer/workspace-transfers.service';
import { WorkspaceManager } from './workspace-manager.service';
import { HelperLoopHost } from './loop-host-helper';
import { LoopImageQuota, NoWorkspaceQuota, WorkspaceQuota } from './workspace-quota';
import { WorkspaceUsage } from './workspace-usage';
import {
  resolveWorkspaceOptions,
  WORKSPACE_OPTIONS,
  type WorkspaceModuleOptions,
  type WorkspaceOptions,
} from './workspace.options';

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
        { provide: WorkspaceQuota, inject: [WORKSPACE_OPTIONS], useFactory: createWorkspaceQuota },
        WorkspaceManager,
        FileOperations,
        WorkspaceTransfers,
        WorkspaceCheckpoints,
      ],
      exports: [
        WORKSPACE_OPTIONS,
        WorkspaceUsage,
        WorkspaceQuota,
        WorkspaceManager,
        FileOperations,
        WorkspaceTransfers,
        WorkspaceCheckpoints,
      ],
    };
  }
}

/** The filesystem of new images: btrfs unless asked for ext4 or unusable (`btrfs` where it is unusable fails the boot). */
function imageFs(options: WorkspaceOptions): ImageFs {
  if (options.filesystem === 'ext4') return 'ext4';
  const usable = LoopImageQuota.btrfsUsable();
  if (usable.ok) return 'btrfs';
  const message = `workspace images cannot be btrfs: ${usable.reason}`;
  if (options.filesystem === 'btrfs') throw new InvalidInputError('workspace.filesystem', message);
  new Logger('WorkspaceQuota').warn(`${message}; they are ext4, and checkpoints are full copies`);
  return 'ext4';
}

/** The quota adapter for `options.quota`; `loop` where it cannot work fails the boot, `auto` falls back loudly. */
export function createWorkspaceQuota(options: WorkspaceOptions): WorkspaceQuota {
  if (options.quota === 'off') return new NoWorkspaceQuota();
  const usable = LoopImageQuota.usable();
  if (!usable.ok) {
    const message = `workspaces cannot be capped for code: ${usable.reason}`;
    if (options.quota === 'loop') throw new InvalidInputError('workspace.quota', message);
    new Logger('WorkspaceQuota').warn(
      `${message}; only the file API enforces maxWorkspaceBytes (code in a sandbox can fill the disk)`,
    );
    return new NoWorkspaceQuota();
  }
  const owner =
    options.sandboxUid === null
      ? null
      : { uid: options.sandboxUid, gid: options.sandboxGid ?? options.sandboxUid };
  const quotaOptions = {
    root: options.root,
    imageDir: options.imageDir,
    bytes: options.limits.maxWorkspaceBytes,
    owner,
    poolSize: options.imagePool,
    fs: imageFs(options),
  };
  // Two helper processes: workspaces are made and removed through one, spares prepared through the other.
  return new LoopImageQuota(quotaOptions, new HelperLoopHost(), new HelperLoopHost());
}
