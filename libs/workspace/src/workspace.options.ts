import * as path from 'node:path';
import { InvalidInputError } from '@switchyard/common';
import type { WorkspaceLimits } from './file-op.types';

/** Injection token of the resolved {@link WorkspaceOptions}. */
export const WORKSPACE_OPTIONS = Symbol('switchyard:workspace:options');

export const DEFAULT_WORKSPACE_LIMITS: Readonly<WorkspaceLimits> = Object.freeze({
  maxFileBytes: 1024 * 1024,
  maxWorkspaceBytes: 512 * 1024 * 1024,
  maxPathLength: 4096,
});

/**
 * Ranges of the options that are more than positive integers; declared here only. At most 16 formatted images are
 * kept ready: each costs a few MiB of disk and a format in the background.
 */
export const WORKSPACE_BOUNDS = {
  imagePool: { min: 0, max: 16 },
} as const;

/** What `WorkspaceModule.forRoot` accepts; everything but `root` has a default. */
export interface WorkspaceModuleOptions {
  /** Absolute data directory; each session gets `<root>/<sessionId>`. */
  root: string;
  limits?: Partial<WorkspaceLimits>;
  /**
   * Owner given to session directories when the engine runs as root, so sandboxed code (which runs as
   * this uid) can write its workspace. Default 65534 (nobody). `null` disables the chown.
   */
  sandboxUid?: number | null;
  /** Default 65534 (nogroup). */
  sandboxGid?: number | null;
  /**
   * Mode of each session directory. Default 0o700: with the chown above only the sandbox uid (and root)
   * can enter. An engine that cannot chown but whose sandboxes run as another uid needs 0o777 here; that
   * is tolerable only because `root` is kept at 0o711 (see `WorkspaceManager.create`).
   */
  dirMode?: number;
  /** Entries a walk (usage, list, find, grep) visits before it stops. Default 100 000. */
  maxScanEntries?: number;
  /** Entries a snapshot records before it is marked `partial`. Default 10 000. */
  snapshotMaxEntries?: number;
  /** Longest grep pattern accepted (chars). Default 1000. */
  maxRegexLength?: number;
  /** CPU time one grep may spend matching a single file before it is refused as too slow. Default 1000 ms. */
  grepFileTimeoutMs?: number;
  /**
   * How `limits.maxWorkspaceBytes` is enforced on code, which writes the workspace directly: `loop` gives each
   * workspace its own loop-mounted filesystem of that size (root, mkfs.ext4 and loop devices needed), `off` leaves
   * only the file API's accounting, `auto` (default) picks `loop` when it can and warns when it cannot.
   */
  quota?: 'auto' | 'loop' | 'off';
  /** Where the workspace images live. Default `<root>.images` (beside `root`, never inside a workspace). */
  imageDir?: string;
  /**
   * With `loop`: images formatted ahead of time and kept ready, so that creating a workspace is a rename and a
   * mount instead of mkfs (refilled in the background, one at a time). 0 formats each image on demand. Default 2.
   */
  imagePool?: number;
  /**
   * With `loop`: the filesystem of new images. `btrfs` makes checkpoints snapshots (copy-on-write: an unchanged
   * checkpoint costs a few KiB) and needs btrfs-progs and btrfs in the kernel; `ext4` makes them copies; `auto`
   * (default) picks btrfs when it can.
   */
  filesystem?: 'auto' | 'btrfs' | 'ext4';
  checkpoints?: Partial<CheckpointLimits>;
}

/** How many checkpoints a session keeps, and how much a diff shows. */
export interface CheckpointLimits {
  /** Checkpoints per session. Default 32. */
  max: number;
  /** Automatic checkpoints (before actions, plan steps) kept per session; older ones are pruned. Default 10. */
  keepAuto: number;
  diff: {
    /** Changed paths listed in one diff. Default 10 000. */
    maxEntries: number;
    /** Text files up to this size get a unified diff. Default 64 KiB. */
    maxTextBytes: number;
    /** Unified diff text in one answer. Default 1 MiB. */
    maxDiffBytes: number;
  };
}

export const DEFAULT_CHECKPOINT_LIMITS: Readonly<CheckpointLimits> = Object.freeze({
  max: 32,
  keepAuto: 10,
  diff: Object.freeze({ maxEntries: 10_000, maxTextBytes: 64 * 1024, maxDiffBytes: 1024 * 1024 }),
});

export type WorkspaceOptions = Required<Omit<WorkspaceModuleOptions, 'limits' | 'checkpoints'>> & {
  limits: WorkspaceLimits;
  checkpoints: CheckpointLimits;
};

/** Fills defaults and fails loudly, naming the setting at fault; called once at boot. */
export function resolveWorkspaceOptions(input: WorkspaceModuleOptions): WorkspaceOptions {
  if (typeof input.root !== 'string' || !path.isAbsolute(input.root)) {
    throw new InvalidInputError('workspace.root', 'root must be an absolute path');
  }
  const opts: WorkspaceOptions = {
    root: path.resolve(input.root),
    limits: { ...DEFAULT_WORKSPACE_LIMITS, ...input.limits },
    sandboxUid: input.sandboxUid === undefined ? 65534 : input.sandboxUid,
    sandboxGid: input.sandboxGid === undefined ? 65534 : input.sandboxGid,
    dirMode: input.dirMode ?? 0o700,
    maxScanEntries: input.maxScanEntries ?? 100_000,
    snapshotMaxEntries: input.snapshotMaxEntries ?? 10_000,
    maxRegexLength: input.maxRegexLength ?? 1000,
    grepFileTimeoutMs: input.grepFileTimeoutMs ?? 1000,
    quota: input.quota ?? 'auto',
    imageDir: path.resolve(input.imageDir ?? `${path.resolve(input.root)}.images`),
    imagePool: input.imagePool ?? 2,
    filesystem: input.filesystem ?? 'auto',
    checkpoints: {
      ...DEFAULT_CHECKPOINT_LIMITS,
      ...input.checkpoints,
      diff: { ...DEFAULT_CHECKPOINT_LIMITS.diff, ...input.checkpoints?.diff },
    },
  };
  const positive: [string, number][] = [
    ['limits.maxFileBytes', opts.limits.maxFileBytes],
    ['limits.maxWorkspaceBytes', opts.limits.maxWorkspaceBytes],
    ['limits.maxPathLength', opts.limits.maxPathLength],
    ['maxScanEntries', opts.maxScanEntries],
    ['snapshotMaxEntries', opts.snapshotMaxEntries],
    ['maxRegexLength', opts.maxRegexLength],
    ['grepFileTimeoutMs', opts.grepFileTimeoutMs],
    ['checkpoints.max', opts.checkpoints.max],
    ['checkpoints.keepAuto', opts.checkpoints.keepAuto],
    ['checkpoints.diff.maxEntries', opts.checkpoints.diff.maxEntries],
    ['checkpoints.diff.maxTextBytes', opts.checkpoints.diff.maxTextBytes],
    ['checkpoints.diff.maxDiffBytes', opts.checkpoints.diff.maxDiffBytes],
  ];
  for (const [name, value] of positive) {
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new InvalidInputError(`workspace.${name}`, `${name} must be a positive integer, got ${value}`);
    }
  }
  for (const name of ['sandboxUid', 'sandboxGid'] as const) {
    const v = opts[name];
    if (v !== null && (!Number.isSafeInteger(v) || v < 0)) {
      throw new InvalidInputError(`workspace.${name}`, `${name} must be a non-negative integer or null`);
    }
  }
  const { imagePool } = WORKSPACE_BOUNDS;
  if (
    !Number.isSafeInteger(opts.imagePool) ||
    opts.imagePool < imagePool.min ||
    opts.imagePool > imagePool.max
  ) {
    throw new InvalidInputError(
      'workspace.imagePool',
      `imagePool must be an integer from ${imagePool.min} to ${imagePool.max}, got ${opts.imagePool}`,
    );
  }
  if (!['auto', 'btrfs', 'ext4'].includes(opts.filesystem)) {
    throw new InvalidInputError('workspace.filesystem', 'filesystem must be auto, btrfs or ext4');
  }
  if (opts.checkpoints.keepAuto > opts.checkpoints.max) {
    throw new InvalidInputError(
      'workspace.checkpoints.keepAuto',
      `keepAuto (${opts.checkpoints.keepAuto}) must be at most max (${opts.checkpoints.max})`,
    );
  }
  if (!Number.isInteger(opts.dirMode) || opts.dirMode < 0 || opts.dirMode > 0o777) {
    throw new InvalidInputError('workspace.dirMode', 'dirMode must be a permission mode between 0 and 0o777');
  }
  return opts;
}
