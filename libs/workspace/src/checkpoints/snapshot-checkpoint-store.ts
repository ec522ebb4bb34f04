import { rm } from 'node:fs/promises';
import * as path from 'node:path';
import type { LoopHost } from '../loop-host';
import type { LoopImageQuota } from '../workspace-quota';
import { type CheckpointSpec, CheckpointStore } from './checkpoint-store';
import type { Checkpoint, RestoreStats, TreeDiff } from './checkpoint.types';
import { removeRecord, scanRecords, writeRecord } from './checkpoint-records';
import type { DiffLimits, TreeTool } from './tree-tool';

/** Inside an image's top level: the workspace subvolume and the directory of checkpoints. */
const WS = 'ws';
const CHECKPOINTS = 'checkpoints';

/**
 * Checkpoints as btrfs snapshots inside the workspace's own image (see `LoopHost.format`): taking one is a
 * read-only snapshot of the workspace subvolume (milliseconds, whatever the size: the data is shared until either
 * side changes it), so an unchanged checkpoint costs a few KiB of metadata, and what changed after it counts against
 * the workspace's cap like any write. Restore makes the workspace match the snapshot in place (the tree tool:
 * untouched files are recognised by inode and ctime and kept, changed ones come back as reflinks), so kernels,
 * processes and container mounts keep seeing the same directory. Fork copies the image while its filesystem is
 * frozen, then turns the copy's workspace into the checkpoint's (a writable snapshot of it) and drops the copy's
 * checkpoints. A snapshot holds the tree as it was, fifos and sockets too, but what the checkpoint keeps is what the
 * tree tool counts, restores, compares and leaves in a fork: files, directories and links (see its source).
 */
export class SnapshotCheckpointStore extends CheckpointStore {
  readonly kind = 'snapshot' as const;

  constructor(
    private readonly quota: LoopImageQuota,
    private readonly host: LoopHost,
    private readonly tree: TreeTool,
  ) {
    super();
  }

  /** Whether the session's workspace is a btrfs image (else its checkpoints are copies). */
  async serves(sessionId: string): Promise<boolean> {
    return (await this.quota.rootOf(sessionId)) !== null;
  }

  async create(spec: CheckpointSpec): Promise<Checkpoint> {
    const root = await this.root(spec.sessionId);
    const dir = path.join(root, CHECKPOINTS);
    // Counted in the live workspace, whose inodes are cached, just before the snapshot: a new snapshot's are not,
    // and walking it costs 3-4x as much (10 000 files: ~30 ms against ~110 ms). A write racing the checkpoint may
    // be in the snapshot and not in the counts, or the other way round; the tree itself is exact.
    const counts = await this.tree.count(path.join(root, WS));
    await this.host.snapshot(path.join(root, WS), dir, spec.id);
    try {
      const checkpoint: Checkpoint = { ...spec, ...counts };
      await writeRecord(dir, checkpoint);
      return checkpoint;
    } catch (err) {
      await this.host.deleteSubvolume(dir, spec.id).catch(() => undefined);
      throw err;
    }
  }

  async list(sessionId: string): Promise<Checkpoint[]> {
    const dir = path.join(await this.root(sessionId), CHECKPOINTS);
    const { checkpoints, strays } = await scanRecords(dir, sessionId);
    for (const name of strays) await this.removeEntry(dir, name);
    return checkpoints;
  }

  async remove(sessionId: string, id: string): Promise<void> {
    const dir = path.join(await this.root(sessionId), CHECKPOINTS);
    await removeRecord(dir, id);
    await this.host.deleteSubvolume(dir, id);
  }

  async restore(sessionId: string, id: string): Promise<RestoreStats> {
    const root = await this.root(sessionId);
    const { skipped: _skipped, ...stats } = await this.tree.sync(
      path.join(root, CHECKPOINTS, id),
      path.join(root, WS),
      'inode',
    );
    return stats;
  }

  async diff(sessionId: string, from: string, to: string, limits: DiffLimits): Promise<TreeDiff> {
    const root = await this.root(sessionId);
    const after = to === 'current' ? path.join(root, WS) : path.join(root, CHECKPOINTS, to);
    return this.tree.diff(path.join(root, CHECKPOINTS, from), after, 'inode', limits);
  }

  async fork(
    sessionId: string,
    from: string | undefined,
    newSessionId: string,
    create: () => Promise<void>,
  ): Promise<void> {
    await this.quota.copyImage(sessionId, newSessionId, async (copy) => {
      const dir = path.join(copy, CHECKPOINTS);
      if (from !== undefined) {
        await this.host.deleteSubvolume(copy, WS);
        await this.host.snapshot(path.join(dir, from), copy, WS, { writable: true });
      }
      // A fork starts with no checkpoints: they belong to the session that took them.
      const { checkpoints, strays } = await scanRecords(dir, sessionId);
      for (const c of checkpoints) {
        await removeRecord(dir, c.id);
        await this.host.deleteSubvolume(dir, c.id);
      }
      for (const name of strays) await this.removeEntry(dir, name);
    });
    await create();
    // The image copy took the tree as it is, fifos and sockets too: a fork holds what a checkpoint keeps, no more.
    await this.tree.prune(path.join(await this.root(newSessionId), WS));
  }

  async forget(): Promise<void> {
    // Everything is in the image, which goes with the workspace.
  }

  private async root(sessionId: string): Promise<string> {
    const root = await this.quota.rootOf(sessionId);
    if (!root) throw new Error(`workspace ${sessionId} is not a btrfs image`);
    return root;
  }

  /** A half-made checkpoint (a snapshot without a record) or a stray file. */
  private async removeEntry(dir: string, name: string): Promise<void> {
    if (name.endsWith('.json') || name.includes('~')) await rm(path.join(dir, name), { force: true });
    else await this.host.deleteSubvolume(dir, name).catch(() => rm(path.join(dir, name), { force: true }));
  }
}
