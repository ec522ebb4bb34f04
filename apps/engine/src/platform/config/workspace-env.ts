import { WORKSPACE_BOUNDS } from '@switchyard/workspace';
import { IsIn, IsOptional } from 'class-validator';
import { IntVar, MiB } from './env-parsing';

/** Session workspaces: file and workspace size limits, and how the workspace size is enforced. */
export class WorkspaceEnv {
  /** Largest file the file API reads whole or writes. */
  @IntVar(1024)
  SWITCHYARD_MAX_FILE_BYTES = 5 * MiB;

  /**
   * Total size of one session's workspace: enforced by the file API and, with the loop quota, on code in every tier
   * too.
   */
  @IntVar(1024)
  SWITCHYARD_MAX_WORKSPACE_BYTES = 1024 * MiB;

  /**
   * `loop`: each workspace is its own loop-mounted filesystem image of SWITCHYARD_MAX_WORKSPACE_BYTES; `off`: no quota
   * on code; `auto`: `loop` when the engine runs as root with `mkfs.ext4` and loop devices, else `off` with a warning.
   */
  @IsOptional()
  @IsIn(['auto', 'loop', 'off'])
  SWITCHYARD_WORKSPACE_QUOTA: 'auto' | 'loop' | 'off' = 'auto';

  /**
   * With the loop quota: workspace images formatted ahead and kept ready, so creating a session mounts one instead of
   * running `mkfs`; refilled in the background. This is the floor: after a burst of sessions the pool holds this many
   * plus that burst (at most 16) for a minute, then unmounts the extra ones (their images are kept, to be mounted
   * again). 0: each image is formatted when its session is created.
   */
  @IntVar(WORKSPACE_BOUNDS.imagePool.min, WORKSPACE_BOUNDS.imagePool.max)
  SWITCHYARD_WORKSPACE_POOL = 2;

  /**
   * With the loop quota, the filesystem of new workspace images: `btrfs` (checkpoints are copy-on-write snapshots;
   * needs btrfs-progs and btrfs in the kernel), `ext4` (checkpoints are copies), or `auto`: `btrfs` when it can, else
   * `ext4` with a warning.
   */
  @IsOptional()
  @IsIn(['auto', 'btrfs', 'ext4'])
  SWITCHYARD_WORKSPACE_FS: 'auto' | 'btrfs' | 'ext4' = 'auto';

  /**
   * Checkpoints a session may hold. At the limit an asked-for checkpoint is refused with 409 (`CHECKPOINT_LIMIT`); an
   * automatic one replaces the oldest automatic one.
   */
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
