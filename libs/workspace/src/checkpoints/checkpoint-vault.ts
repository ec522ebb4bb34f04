import type { Checkpoint } from './checkpoint.types';

/**
 * Where `PodCheckpointStore` keeps each checkpoint: its record and its workspace's tar, together. The store checks
 * a tar before it is put and again each time it is read back; the vault only keeps bytes. Adapters: the engine's own
 * disk (`DiskCheckpointVault`, one engine) and, with replicas, the database they share (in the app), so that a
 * replica taking a dead one's sessions over finds their checkpoints.
 *
 * Every checkpoint is whole or absent: a `put` that fails or is cut by a crash is never listed and never read back.
 */
export abstract class CheckpointVault {
  /** Keeps the checkpoint (under `checkpoint.sessionId` and `checkpoint.id`) with its tar; atomic. */
  abstract put(checkpoint: Checkpoint, tar: Buffer): Promise<void>;
  /** The tar of a whole checkpoint, byte for byte; `CHECKPOINT_NOT_FOUND` when the vault holds none by that id. */
  abstract get(sessionId: string, id: string): Promise<Buffer>;
  /** The session's whole checkpoints, oldest first (by creation time, then id). */
  abstract list(sessionId: string): Promise<Checkpoint[]>;
  /** Deletes one (nothing when absent); listed no more from the moment this starts. */
  abstract remove(sessionId: string, id: string): Promise<void>;
  /** Deletes all of the session's checkpoints (the session ended). */
  abstract forget(sessionId: string): Promise<void>;
  /**
   * Start-up: deletes the checkpoints of sessions that ended without their `forget` finishing (a crash), and
   * answers which. `known`: the sessions this engine serves, never swept. A vault shared by replicas also keeps
   * every session another replica serves.
   */
  abstract sweep(known: ReadonlySet<string>): Promise<string[]>;
}

/**
 * The Nest token of the `CheckpointVault` that pod checkpoints go to (absent: `DiskCheckpointVault` in the
 * workspace images' `.checkpoints` directory).
 */
export const CHECKPOINT_VAULT = Symbol('switchyard:workspace:checkpoint-vault');
