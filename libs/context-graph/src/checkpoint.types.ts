/* What the context graph records of checkpoints: taken, restored, forked from. */

/** A checkpoint of a session's workspace, as `recordCheckpoint` takes it. */
export interface CheckpointRecord {
  /** The engine's id (`chk_…`), globally unique. */
  id: string;
  sessionId: string;
  label?: string;
  /** ISO 8601. */
  createdAt: string;
  /** Non-directory entries. */
  files: number;
  directories: number;
  /** Bytes of regular files. */
  bytes: number;
  /** Taken by the engine (`checkpoint: "before"`, a plan's each-step), not asked for by id. */
  auto: boolean;
  /**
   * The highest action `seq` of the session recorded when it was taken (0 for none): file lineage across a fork
   * cuts here.
   */
  seq: number;
  /** The action it was taken just before: a `BEFORE` edge to it (same session). */
  beforeActionId?: string;
}

/** A checkpoint as `getCheckpoint` hands it back: as recorded, and whether it was deleted since. */
export interface CheckpointState extends CheckpointRecord {
  /** When it was deleted or pruned (the first deletion); absent while it can be restored. */
  deletedAt?: string;
  deleteReason?: 'deleted' | 'pruned';
}

/** A checkpoint as records and failure contexts hand it back. */
export interface CheckpointRef {
  id: string;
  /** Absent (not null) when not set. */
  label?: string;
  createdAt: string;
  auto: boolean;
  /** Set once deleted or pruned: it can no longer be restored. */
  deletedAt?: string;
}

/** A checkpoint put back into its session's workspace: a `RESTORED` edge to it. */
export interface RestoreRecord {
  sessionId: string;
  checkpointId: string;
  restoredAt: string;
  /**
   * The action (a retry with `restore: true`) that restored it: the `RESTORED` edge starts there; otherwise at
   * the session.
   */
  actionId?: string;
  /** The plan whose replan restored it (edge property). */
  planId?: string;
}

/** A session whose workspace began as a copy of another's: a `FORKED_FROM` edge to the source session. */
export interface ForkRecord {
  /** The new session (recorded already). */
  sessionId: string;
  fromSessionId: string;
  /** The source's checkpoint it was forked at; absent when forked at now. */
  checkpointId?: string;
  forkedAt: string;
  /**
   * The source's action `seq` the copy reflects (the checkpoint's `seq`, or the source's latest seq when forked
   * at now).
   */
  seq: number;
}
