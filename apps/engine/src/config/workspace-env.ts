import { IsIn, IsOptional } from 'class-validator';
import { IntVar, MiB } from './env-parsing';

/** Session workspaces: file and workspace size limits, and how the workspace size is enforced. */
export class WorkspaceEnv {
  @IntVar(1024)
  SWITCHYARD_MAX_FILE_BYTES = 5 * MiB;

  @IntVar(1024)
  SWITCHYARD_MAX_WORKSPACE_BYTES = 1024 * MiB;

  /** `auto`: each workspace is its own loop-mounted filesystem of SWITCHYARD_MAX_WORKSPACE_BYTES when possible. */
  @IsOptional()
  @IsIn(['auto', 'loop', 'off'])
  SWITCHYARD_WORKSPACE_QUOTA: 'auto' | 'loop' | 'off' = 'auto';

  /** With the loop quota: workspace images formatted ahead and kept ready (0: format each one on demand). */
  @IntVar(0, 16)
  SWITCHYARD_WORKSPACE_POOL = 2;

  /** With the loop quota: the filesystem of new workspace images; btrfs makes checkpoints copy-on-write snapshots. */
  @IsOptional()
  @IsIn(['auto', 'btrfs', 'ext4'])
  SWITCHYARD_WORKSPACE_FS: 'auto' | 'btrfs' | 'ext4' = 'auto';

  /** Checkpoints a session may hold. */
  @IntVar(1, 1000)
  SWITCHYARD_MAX_CHECKPOINTS = 32;

  /** Automatic checkpoints (`checkpoint: "before"`, plans' `each-step`) a session keeps; older ones are pruned. */
  @IntVar(1, 1000)
  SWITCHYARD_CHECKPOINT_KEEP_AUTO = 10;
}

export interface WorkspaceConfig {
  maxFileBytes: number;
  maxWorkspaceBytes: number;
  quota: 'auto' | 'loop' | 'off';
  imagePool: number;
  filesystem: 'auto' | 'btrfs' | 'ext4';
  checkpoints: { max: number; keepAuto: number };
}

export function workspaceConfig(env: WorkspaceEnv): WorkspaceConfig {
  return {
    maxFileBytes: env.SWITCHYARD_MAX_FILE_BYTES,
    maxWorkspaceBytes: env.SWITCHYARD_MAX_WORKSPACE_BYTES,
    quota: env.SWITCHYARD_WORKSPACE_QUOTA,
    imagePool: env.SWITCHYARD_WORKSPACE_POOL,
    filesystem: env.SWITCHYARD_WORKSPACE_FS,
    checkpoints: { max: env.SWITCHYARD_MAX_CHECKPOINTS, keepAuto: env.SWITCHYARD_CHECKPOINT_KEEP_AUTO },
  };
}
