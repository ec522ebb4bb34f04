import { mkdir, rename, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { CheckpointError, formatBytes } from '../workspace.errors';
import { type CheckpointSpec, CheckpointStore } from './checkpoint-store';
import type { Checkpoint, RestoreStats, TreeDiff } from './checkpoint.types';
import { removeRecord, scanRecords, writeRecord } from './checkpoint-records';
import type { DiffLimits, TreeTool } from './tree-tool';

export interface CopyCheckpointStoreOptions {
  /** Where the copies live: `<dir>/<sessionId>/<checkpointId>` (engine-private, never inside a workspace). */
  dir: string;
  /** The workspace directory of a session. */
  workspaceOf: (sessionId: string) => string;
  /** What one session's copies may hold in all: the workspace cap. */
  maxBytes: number;
}

/**
 * Checkpoints as copies, for workspaces that are not btrfs images (ext4 images, or uncapped directories when the
 * engine is not root): every file is copied (reflinked where the filesystem can, which ext4 cannot), so a
 * checkpoint costs what the workspace holds, and a session's copies together may hold at most the workspace cap.
 * A copy is made under a temporary name and renamed into place before its record is written: whole or absent.
 */
export class CopyCheckpointStore extends CheckpointStore {
  readonly kind = 'copy' as const;

  constructor(
    private readonly options: CopyCheckpointStoreOptions,
    private readonly tree: TreeTool,
  ) {
    super();
  }

  async create(spec: CheckpointSpec): Promise<Checkpoint> {
    const dir = await this.dirOf(spec.sessionId);
    const workspace = this.options.workspaceOf(spec.sessionId);
    const counts = await this.tree.count(workspace);
    const held = (await this.list(spec.sessionId)).reduce((n, c) => n + c.bytes, 0);
    if (held + counts.bytes > this.options.maxBytes) {
      throw new CheckpointError(
        'CHECKPOINT_SPACE',
        `a copy of this workspace (${formatBytes(counts.bytes)}) would take the session's checkpoints past ` +
          `${formatBytes(this.options.maxBytes)}, the workspace cap (they hold ${formatBytes(held)}); delete some`,
        { bytes: counts.bytes, held, limit: this.options.maxBytes },
      );
    }
    const partial = path.join(dir, `${spec.id}~partial`);
    await mkdir(partial, { mode: 0o700 });
    try {
      await this.tree.sync(workspace, partial, 'content');
      // Counted again: the workspace may have changed while it was copied.
      const checkpoint: Checkpoint = { ...spec, ...(await this.tree.count(partial)) };
      await rename(partial, path.join(dir, spec.id));
      await writeRecord(dir, checkpoint);
      return checkpoint;
    } catch (err) {
      await rm(partial, { recursive: true, force: true });
      await rm(path.join(dir, spec.id), { recursive: true, force: true });
      throw err;
    }
  }

  async list(sessionId: string): Promise<Checkpoint[]> {
    const dir = path.join(this.options.dir, sessionId);
    const { checkpoints, strays } = await scanRecords(dir, sessionId);
    for (const name of strays) await rm(path.join(dir, name), { recursive: true, force: true });
    return checkpoints;
  }

  async remove(sessionId: string, id: string): Promise<void> {
    const dir = path.join(this.options.dir, sessionId);
    await removeRecord(dir, id);
    await rm(path.join(dir, id), { recursive: true, force: true });
  }

  async restore(sessionId: string, id: string): Promise<RestoreStats> {
    const src = path.join(this.options.dir, sessionId, id);
    const { skipped: _skipped, ...stats } = await this.tree.sync(
      src,
      this.options.workspaceOf(sessionId),
      'content',
    );
    return stats;
  }

  async diff(sessionId: string, from: string, to: string, limits: DiffLimits): Promise<TreeDiff> {
    const dir = path.join(this.options.dir, sessionId);
    const after = to === 'current' ? this.options.workspaceOf(sessionId) : path.join(dir, to);
    return this.tree.diff(path.join(dir, from), after, 'content', limits);
  }

  async fork(
    sessionId: string,
    from: string | undefined,
    newSessionId: string,
    create: () => Promise<void>,
  ): Promise<void> {
    await create();
    const src =
      from === undefined ? this.options.workspaceOf(sessionId) : path.join(this.options.dir, sessionId, from);
    await this.tree.sync(src, this.options.workspaceOf(newSessionId), 'content');
  }

  async forget(sessionId: string): Promise<void> {
    await rm(path.join(this.options.dir, sessionId), { recursive: true, force: true });
  }

  private async dirOf(sessionId: string): Promise<string> {
    const dir = path.join(this.options.dir, sessionId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  }
}
