import type { Checkpoint, RestoreStats, TreeDiff } from './checkpoint.types';
import type { DiffLimits } from './tree-tool';

/** What the store is told about a checkpoint to take; it measures the rest. */
export type CheckpointSpec = Omit<Checkpoint, 'files' | 'directories' | 'bytes'>;

/**
 * Where and how a session's checkpoints are kept. Each checkpoint is whole or absent: one that a crash interrupted
 * is never listed, and goes at the store's next look at the session (`list` sweeps it).
 */
export abstract class CheckpointStore {
  /** `snapshot`: copy-on-write snapshots (btrfs); `copy`: a copy of every file (reflinks where they work). */
  abstract readonly kind: 'snapshot' | 'copy';
  /** Takes a checkpoint of the workspace as it is now. */
  abstract create(spec: CheckpointSpec): Promise<Checkpoint>;
  /** The session's whole checkpoints, oldest first (by creation time, then id). */
  abstract list(sessionId: string): Promise<Checkpoint[]>;
  /** Deletes one; listed no more from the moment this starts. */
  abstract remove(sessionId: string, id: string): Promise<void>;
  /** Puts the workspace back as it was at the checkpoint, in place: entries, modes, owners, times, links. */
  abstract restore(sessionId: string, id: string): Promise<RestoreStats>;
  /** What changed from the checkpoint `from` to `to` (another checkpoint's id, or `current`: the workspace now). */
  abstract diff(sessionId: string, from: string, to: string, limits: DiffLimits): Promise<TreeDiff>;
  /**
   * Gives `newSessionId` a workspace that is a copy of the session's, as it is now or at the checkpoint `from`;
   * `create` makes the new session's workspace (the store calls it when its copy needs it: before or after).
   */
  abstract fork(
    sessionId: string,
    from: string | undefined,
    newSessionId: string,
    create: () => Promise<void>,
  ): Promise<void>;
  /** Deletes whatever the session's checkpoints hold outside its workspace image (the session ended). */
  abstract forget(sessionId: string): Promise<void>;
}
