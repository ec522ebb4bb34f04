import { randomBytes } from 'node:crypto';
import { constants as C } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { CheckpointError, formatBytes } from '../workspace.errors';
import { type CheckpointSpec, CheckpointStore } from './checkpoint-store';
import type { Checkpoint, RestoreStats, TreeDiff } from './checkpoint.types';
import { isCheckpointId, removeRecord, scanRecords, writeRecord } from './checkpoint-records';
import { readTar, type TarTree } from './pod-tar';
import { diffTarTrees } from './pod-tree-diff';
import type { PodWorkspaceIo } from './pod-workspace-io';
import type { DiffLimits } from './tree-tool';

export interface PodCheckpointStoreOptions {
  /** Where the tars live: `<dir>/<sessionId>/<checkpointId>` (engine-private; the copy store's directory). */
  dir: string;
  /** The sessions' workspaces, in their pods. */
  io: PodWorkspaceIo;
  /** The workspace cap: what one tar's files may hold, and one session's checkpoints together. */
  maxBytes: number;
}

/** A stored tar was accepted when it was taken: read again, it is not held to a cap changed since. */
const STORED = Number.MAX_SAFE_INTEGER;

/**
 * Checkpoints of workspaces that live in the sessions' pods (the Kubernetes backend), which the engine reaches only
 * through `PodWorkspaceIo`: each checkpoint is the workspace's tar, kept on the engine's disk as
 * `<dir>/<sessionId>/<checkpointId>` beside its record `<checkpointId>.json`, written last (the tar is synced and
 * renamed into place first): whole or absent, a tar without a record goes at the next `list`.
 *
 * A tar comes from the sandbox: it is read only in memory (`readTar`: bounded by the workspace cap plus headers,
 * absolute and `..` paths and entries under links refused, devices and fifos ignored), never unpacked on the engine's
 * host, and stored only once it passed. Like the copy store's, a session's checkpoints may hold at most the
 * workspace cap together. Restore and fork hand a stored tar back to a pod, which unpacks it (emptying the
 * workspace first); `diff` compares two tars entry by entry in memory, answering what the tree tool answers.
 */
export class PodCheckpointStore extends CheckpointStore {
  readonly kind = 'copy' as const;

  constructor(private readonly options: PodCheckpointStoreOptions) {
    super();
  }

  async create(spec: CheckpointSpec): Promise<Checkpoint> {
    const dir = path.join(this.options.dir, safeName(spec.sessionId));
    await mkdir(dir, { recursive: true, mode: 0o700 });
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
    const partial = path.join(dir, `${spec.id}~partial~${randomBytes(4).toString('hex')}`);
    try {
      const h = await open(partial, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
      try {
        await h.writeFile(tar);
        await h.sync(); // before its record names it
      } finally {
        await h.close();
      }
      await rename(partial, this.tarOf(spec.sessionId, spec.id));
      await writeRecord(dir, checkpoint);
      return checkpoint;
    } catch (err) {
      await rm(partial, { force: true });
      await rm(this.tarOf(spec.sessionId, spec.id), { force: true });
      throw err;
    }
  }

  async list(sessionId: string): Promise<Checkpoint[]> {
    const dir = path.join(this.options.dir, safeName(sessionId));
    const { checkpoints, strays } = await scanRecords(dir, sessionId);
    for (const name of strays) await rm(path.join(dir, name), { recursive: true, force: true });
    return checkpoints;
  }

  async remove(sessionId: string, id: string): Promise<void> {
    const file = this.tarOf(sessionId, id);
    await removeRecord(path.dirname(file), id);
    await rm(file, { force: true });
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
    await this.options.io.tarIn(sessionId, tar, { replace: true });
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
    await this.options.io.tarIn(newSessionId, tar, { replace: true });
  }

  async forget(sessionId: string): Promise<void> {
    await rm(path.join(this.options.dir, safeName(sessionId)), { recursive: true, force: true });
  }

  private read(
    tar: Buffer,
    sessionId: string,
    keepData: boolean,
    maxBytes = this.options.maxBytes,
  ): Promise<TarTree> {
    return readTar(tar, { maxBytes, keepData, source: `the workspace of session ${sessionId}` });
  }

  private tarOf(sessionId: string, id: string): string {
    if (!isCheckpointId(id)) throw new Error(`not a checkpoint id: ${JSON.stringify(id)}`);
    return path.join(this.options.dir, safeName(sessionId), id);
  }

  /** A stored tar (engine-private, never a link). */
  private async stored(sessionId: string, id: string): Promise<Buffer> {
    const h = await open(this.tarOf(sessionId, id), C.O_RDONLY | C.O_NOFOLLOW);
    try {
      return await h.readFile();
    } finally {
      await h.close();
    }
  }
}

/** A session id as one path component (the service has validated it; this store never builds a path otherwise). */
function safeName(sessionId: string): string {
  if (!sessionId || sessionId === '.' || sessionId === '..' || /[/\0]/.test(sessionId)) {
    throw new Error(`not a session id: ${JSON.stringify(sessionId)}`);
  }
  return sessionId;
}
