import { CheckpointError, formatBytes } from '../workspace.errors';
import { type CheckpointSpec, CheckpointStore } from './checkpoint-store';
import type { Checkpoint, RestoreStats, TreeDiff } from './checkpoint.types';
import type { CheckpointVault } from './checkpoint-vault';
import { readTar, type TarTree } from './pod-tar';
import { diffTarTrees } from './pod-tree-diff';
import type { PodWorkspaceIo } from './pod-workspace-io';
import type { DiffLimits } from './tree-tool';

export interface PodCheckpointStoreOptions {
  /** Where the tars and their records are kept: the engine's disk, or the database replicas share. */
  vault: CheckpointVault;
  /** The sessions' workspaces, in their pods. */
  io: PodWorkspaceIo;
  /** The workspace cap: what one tar's files may hold, and one session's checkpoints together. */
  maxBytes: number;
}

/** A stored tar was accepted when it was taken: read again, it is not held to a cap changed since. */
const STORED = Number.MAX_SAFE_INTEGER;

/**
 * Checkpoints of workspaces that live in the sessions' pods (the Kubernetes backend), which the engine reaches only
 * through `PodWorkspaceIo`: each checkpoint is the workspace's tar, kept with its record in a `CheckpointVault` (the
 * engine's disk, or with replicas their shared database, where another replica taking the session over finds it):
 * whole or absent.
 *
 * A tar comes from the sandbox: it is read only in memory (`readTar`: bounded by the workspace cap plus headers,
 * absolute and `..` paths and entries under links refused, devices and fifos ignored), never unpacked on the engine's
 * host, and stored only once it passed. What a checkpoint keeps is what the tree tool keeps of a host workspace:
 * files, directories and links; the fifos a tar may hold are not counted or compared, and a restore or a fork takes
 * them out of the workspace it unpacks to (`dataOnly`). Like the copy store's, a session's checkpoints may hold at most the
 * workspace cap together. Restore and fork hand a stored tar back to a pod, which unpacks it (emptying the
 * workspace first); `diff` compares two tars entry by entry in memory, answering what the tree tool answers.
 */
export class PodCheckpointStore extends CheckpointStore {
  readonly kind = 'copy' as const;

  constructor(private readonly options: PodCheckpointStoreOptions) {
    super();
  }

  async create(spec: CheckpointSpec): Promise<Checkpoint> {
    const tar = await this.options.io.tarOut(spec.sessionId);
    const tree = await this.read(tar, spec.sessionId, false);
    const held = (await this.list(spec.sessionId)).reduce((n, c) => n + c.bytes, 0);
    if (held + tree.bytes > this.options.maxBytes) {
      throw new CheckpointError(
        'CHECKPOINT_SPACE',
        `a copy of this workspace (${formatBytes(tree.bytes)}) would take the session's checkpoints past ` +
          `${formatBytes(this.options.maxBytes)}, the workspace cap (they hold ${formatBytes(held)}); delete some`,
        { bytes: tree.bytes, held, limit: this.options.maxBytes },
      );
    }
    const checkpoint: Checkpoint = {
      ...spec,
      files: tree.files,
      directories: tree.directories,
      bytes: tree.bytes,
    };
    await this.options.vault.put(checkpoint, tar);
    return checkpoint;
  }

  list(sessionId: string): Promise<Checkpoint[]> {
    return this.options.vault.list(sessionId);
  }

  remove(sessionId: string, id: string): Promise<void> {
    return this.options.vault.remove(sessionId, id);
  }

  /**
   * Unpacks the checkpoint's tar into the emptied workspace. What it answers: `copied`, the entries the checkpoint
   * holds (files, links and directories: every one is written anew); `kept`, 0 (nothing is left in place: the
   * workspace is emptied first); `removed`, 0 (what the workspace held beyond the checkpoint is gone, but not
   * counted: that would take a tar of the whole workspace first); `bytesCopied`, the bytes of data unpacked
   * (the files' contents, a hard-linked file's once).
   */
  async restore(sessionId: string, id: string): Promise<RestoreStats> {
    const tar = await this.stored(sessionId, id);
    const tree = await this.read(tar, sessionId, false, STORED);
    await this.options.io.tarIn(sessionId, tar, { replace: true, dataOnly: true });
    return { copied: tree.files + tree.directories, removed: 0, kept: 0, bytesCopied: tree.dataBytes };
  }

  async diff(sessionId: string, from: string, to: string, limits: DiffLimits): Promise<TreeDiff> {
    const before = await this.read(await this.stored(sessionId, from), sessionId, true, STORED);
    const after =
      to === 'current'
        ? await this.read(await this.options.io.tarOut(sessionId), sessionId, true)
        : await this.read(await this.stored(sessionId, to), sessionId, true, STORED);
    return diffTarTrees(before, after, limits);
  }

  /** Makes the new session's workspace, then unpacks into it the checkpoint's tar or a fresh one of the session's. */
  async fork(
    sessionId: string,
    from: string | undefined,
    newSessionId: string,
    create: () => Promise<void>,
  ): Promise<void> {
    let tar: Buffer;
    if (from === undefined) {
      tar = await this.options.io.tarOut(sessionId);
      await this.read(tar, sessionId, false); // checked before it reaches another session's pod
    } else tar = await this.stored(sessionId, from);
    await create();
    await this.options.io.tarIn(newSessionId, tar, { replace: true, dataOnly: true });
  }

  forget(sessionId: string): Promise<void> {
    return this.options.vault.forget(sessionId);
  }

  private read(
    tar: Buffer,
    sessionId: string,
    keepData: boolean,
    maxBytes = this.options.maxBytes,
  ): Promise<TarTree> {
    return readTar(tar, { maxBytes, keepData, source: `the workspace of session ${sessionId}` });
  }

  /** A stored tar (checked again by the caller as it reads it). */
  private stored(sessionId: string, id: string): Promise<Buffer> {
    return this.options.vault.get(sessionId, id);
  }
}
