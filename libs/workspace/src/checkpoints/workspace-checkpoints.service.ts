import { mkdir, readdir } from 'node:fs/promises';
import * as path from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import { HelperLoopHost } from '../loop-host-helper';
import { WorkspaceManager } from '../workspace-manager.service';
import { LoopImageQuota, WorkspaceQuota } from '../workspace-quota';
import { CheckpointError } from '../workspace.errors';
import { WORKSPACE_OPTIONS, type WorkspaceOptions } from '../workspace.options';
import { type CheckpointSpec, CheckpointStore } from './checkpoint-store';
import type { Checkpoint, RestoreStats, TreeDiff } from './checkpoint.types';
import { isCheckpointId, newCheckpointId } from './checkpoint-records';
import { CHECKPOINT_VAULT, type CheckpointVault } from './checkpoint-vault';
import { CopyCheckpointStore } from './copy-checkpoint-store';
import { DiskCheckpointVault } from './disk-checkpoint-vault';
import { PodCheckpointStore } from './pod-checkpoint-store';
import { POD_WORKSPACE_IO, type PodWorkspaceIo } from './pod-workspace-io';
import { SessionQueue } from './session-queue';
import { SnapshotCheckpointStore } from './snapshot-checkpoint-store';
import { TreeTool, TreeToolError } from './tree-tool';

/** What a new checkpoint is. */
export interface CheckpointRequest {
  label?: string;
  /** Taken by the engine rather than asked for: pruned past `checkpoints.keepAuto`. */
  auto?: boolean;
  /** The action it is taken before. */
  actionId?: string;
  /** Kept with the checkpoint as its `seq` (see `Checkpoint.seq`). */
  seq?: number;
}

/** A new checkpoint, and the automatic ones deleted to make room for it or pruned after it. */
export interface CreatedCheckpoint {
  checkpoint: Checkpoint;
  pruned: string[];
}

export interface CheckpointDiff extends TreeDiff {
  from: string;
  /** A checkpoint id, or `current` (the workspace now). */
  to: string;
}

/**
 * A session's checkpoints: take, list, delete, restore, compare, fork. The store is chosen per workspace: btrfs
 * snapshots when the workspace is a btrfs image (`SnapshotCheckpointStore`), copies otherwise
 * (`CopyCheckpointStore`); tars of the pods' workspaces when they live in pods (`PodCheckpointStore`, given a
 * `POD_WORKSPACE_IO`), kept in the `CHECKPOINT_VAULT` given (with replicas, their shared database) or beside the
 * copies. Everything that changes a session's checkpoints or workspace here runs one at a time per
 * session (a restore never meets a checkpoint being taken). Limits: at most `checkpoints.max` per session (automatic
 * ones are pruned to `keepAuto`, and the oldest automatic one makes room for a new automatic one at the limit);
 * a snapshot's changed data counts against the workspace's cap like any write.
 */
@Injectable()
export class WorkspaceCheckpoints implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('WorkspaceCheckpoints');
  private readonly queue = new SessionQueue();
  private readonly tree: TreeTool;
  private readonly snapshots?: SnapshotCheckpointStore;
  private readonly host?: HelperLoopHost;
  /** The copy store, or the pod store for every session when workspaces live in pods. */
  private readonly copies: CheckpointStore;
  private readonly copiesDir: string;
  /** Where the pod store keeps its tars (pods only). */
  private readonly vault?: CheckpointVault;

  private readonly clock: Clock;

  constructor(
    @Inject(WORKSPACE_OPTIONS) private readonly options: WorkspaceOptions,
    private readonly workspaces: WorkspaceManager,
    quota: WorkspaceQuota,
    @Optional() @Inject(CLOCK) clock?: Clock,
    @Optional() @Inject(POD_WORKSPACE_IO) private readonly io?: PodWorkspaceIo,
    @Optional() @Inject(CHECKPOINT_VAULT) vault?: CheckpointVault | null,
  ) {
    this.clock = clock ?? systemClock;
    this.copiesDir = path.join(options.imageDir, '.checkpoints');
    const loop = quota instanceof LoopImageQuota ? quota : undefined;
    const binds = [options.root, this.copiesDir, ...(loop?.fs === 'btrfs' ? [loop.rootsDir] : [])];
    this.tree = new TreeTool({ binds });
    if (loop && !io) {
      // A helper process of its own: a snapshot never waits behind a workspace being made.
      this.host = new HelperLoopHost();
      this.snapshots = new SnapshotCheckpointStore(loop, this.host, this.tree);
    }
    const maxBytes = options.limits.maxWorkspaceBytes;
    if (io) {
      this.vault = vault ?? new DiskCheckpointVault(this.copiesDir);
      this.copies = new PodCheckpointStore({ vault: this.vault, io, maxBytes });
    } else {
      this.copies = new CopyCheckpointStore(
        { dir: this.copiesDir, workspaceOf: (id) => workspaces.dirOf(id), maxBytes },
        this.tree,
      );
    }
  }

  /** After the workspace module's start-up (the quota's `.roots` mount must exist before the jail binds it). */
  async onModuleInit(): Promise<void> {
    await this.workspaces.onModuleInit();
    await mkdir(this.copiesDir, { recursive: true, mode: 0o700 });
    if (!this.io) await this.tree.start(); // the pod store needs no tree tool
  }

  async onApplicationShutdown(): Promise<void> {
    await this.queue.idle();
    this.tree.close();
    await this.host?.close();
  }

  /** `snapshot` when the session's workspace is a btrfs image, `copy` otherwise. */
  async kindOf(sessionId: string): Promise<'snapshot' | 'copy'> {
    return (await this.storeOf(sessionId)).kind;
  }

  /** Takes a checkpoint of the workspace as it is now (pruning automatic ones as the limits say). */
  create(sessionId: string, request: CheckpointRequest = {}): Promise<CreatedCheckpoint> {
    return this.queue.run(sessionId, async () => {
      const store = await this.storeOf(sessionId);
      const existing = await store.list(sessionId);
      const auto = request.auto === true;
      const pruned: string[] = [];
      const { max, keepAuto } = this.options.checkpoints;
      const autos = existing.filter((c) => c.auto);
      // An automatic checkpoint at the limit replaces the oldest automatic one; an asked-for one is refused.
      const overflow = existing.length + 1 - max;
      if (overflow > 0) {
        if (!auto || autos.length < overflow) {
          throw new CheckpointError(
            'CHECKPOINT_LIMIT',
            `session ${sessionId} holds ${existing.length} checkpoints, the most a session may ` +
              `(SWITCHYARD_MAX_CHECKPOINTS=${max}); delete some first`,
            { sessionId, limit: max, setting: 'SWITCHYARD_MAX_CHECKPOINTS' },
          );
        }
        pruned.push(...(await this.removeOldest(store, sessionId, autos, overflow)));
      }
      const spec: CheckpointSpec = {
        id: newCheckpointId(),
        sessionId,
        ...(request.label !== undefined && { label: request.label }),
        createdAt: this.clock.now().toISOString(),
        auto,
        ...(request.actionId !== undefined && { actionId: request.actionId }),
        ...(request.seq !== undefined && { seq: request.seq }),
      };
      const checkpoint = await this.attempt('take a checkpoint of', sessionId, () => store.create(spec));
      if (auto) {
        const kept = autos.filter((c) => !pruned.includes(c.id));
        const excess = kept.length + 1 - keepAuto;
        if (excess > 0) pruned.push(...(await this.removeOldest(store, sessionId, kept, excess)));
      }
      this.logger.debug(`checkpoint ${checkpoint.id} of ${sessionId} (${store.kind})`);
      return { checkpoint, pruned };
    });
  }

  /** The session's checkpoints, oldest first. */
  list(sessionId: string): Promise<Checkpoint[]> {
    return this.queue.run(sessionId, async () => (await this.storeOf(sessionId)).list(sessionId));
  }

  async get(sessionId: string, id: string): Promise<Checkpoint> {
    const found = (await this.list(sessionId)).find((c) => c.id === id);
    if (!found || !isCheckpointId(id)) throw this.notFound(sessionId, id);
    return found;
  }

  remove(sessionId: string, id: string): Promise<Checkpoint> {
    return this.queue.run(sessionId, async () => {
      const store = await this.storeOf(sessionId);
      const checkpoint = await this.find(store, sessionId, id);
      await this.attempt('delete a checkpoint of', sessionId, () => store.remove(sessionId, id));
      return checkpoint;
    });
  }

  /** Puts the workspace back as it was at the checkpoint. */
  restore(sessionId: string, id: string): Promise<{ checkpoint: Checkpoint; stats: RestoreStats }> {
    return this.queue.run(sessionId, async () => {
      const store = await this.storeOf(sessionId);
      const checkpoint = await this.find(store, sessionId, id);
      const stats = await this.attempt('restore', sessionId, () => store.restore(sessionId, id));
      this.workspaces.markUsageStale(sessionId);
      return { checkpoint, stats };
    });
  }

  /** What changed from checkpoint `from` to `to` (another checkpoint, or `current`: the workspace now). */
  diff(sessionId: string, from: string, to: string): Promise<CheckpointDiff> {
    return this.queue.run(sessionId, async () => {
      const store = await this.storeOf(sessionId);
      const list = await store.list(sessionId);
      for (const id of to === 'current' ? [from] : [from, to]) {
        if (!isCheckpointId(id) || !list.some((c) => c.id === id)) throw this.notFound(sessionId, id);
      }
      const diff = await this.attempt('compare checkpoints of', sessionId, () =>
        store.diff(sessionId, from, to, this.options.checkpoints.diff),
      );
      return { from, to, ...diff };
    });
  }

  /**
   * Makes the workspace of `newSessionId` a copy of the session's, now or at checkpoint `from`; the new workspace
   * is made here (do not `WorkspaceManager.create` it). Should it fail, nothing of the new workspace is left.
   */
  fork(sessionId: string, from: string | undefined, newSessionId: string): Promise<void> {
    return this.queue.run(sessionId, async () => {
      const store = await this.storeOf(sessionId);
      if (from !== undefined) await this.find(store, sessionId, from);
      try {
        await this.attempt('fork', sessionId, () =>
          store.fork(
            sessionId,
            from,
            newSessionId,
            async () => void (await this.workspaces.create(newSessionId)),
          ),
        );
      } catch (err) {
        await this.workspaces.remove(newSessionId).catch(() => undefined);
        throw err;
      }
    });
  }

  /** Start-up: copies kept for sessions that no longer exist go (a crash before their session's end finished). */
  async forgetAllBut(known: ReadonlySet<string>): Promise<string[]> {
    if (this.vault) return this.vault.sweep(known);
    const names = await readdir(this.copiesDir).catch(() => [] as string[]);
    const gone = names.filter((n) => !known.has(n));
    for (const id of gone) await this.forget(id);
    return gone;
  }

  /** The session ended: what its checkpoints hold outside its workspace goes. */
  forget(sessionId: string): Promise<void> {
    return this.queue.run(sessionId, () => this.copies.forget(sessionId));
  }

  private async storeOf(sessionId: string): Promise<CheckpointStore> {
    this.workspaces.dirOf(sessionId); // validates the id
    if (this.snapshots && (await this.snapshots.serves(sessionId))) return this.snapshots;
    return this.copies;
  }

  private async find(store: CheckpointStore, sessionId: string, id: string): Promise<Checkpoint> {
    const found = isCheckpointId(id) ? (await store.list(sessionId)).find((c) => c.id === id) : undefined;
    if (!found) throw this.notFound(sessionId, id);
    return found;
  }

  private async removeOldest(
    store: CheckpointStore,
    sessionId: string,
    candidates: Checkpoint[],
    n: number,
  ): Promise<string[]> {
    const gone = candidates.slice(0, n).map((c) => c.id);
    for (const id of gone) await store.remove(sessionId, id);
    return gone;
  }

  private notFound(sessionId: string, id: string): CheckpointError {
    return new CheckpointError('CHECKPOINT_NOT_FOUND', `checkpoint ${id} not found in session ${sessionId}`, {
      sessionId,
      checkpointId: id,
    });
  }

  /** The store's failures as checkpoint errors: ENOSPC is the quota's answer, anything else a failure. */
  private async attempt<T>(what: string, sessionId: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof CheckpointError) throw err;
      const message = (err as Error).message;
      const code = err instanceof TreeToolError ? err.code : /\bENOSPC\b/.test(message) ? 'ENOSPC' : '';
      if (code === 'ENOSPC') {
        throw new CheckpointError(
          'CHECKPOINT_SPACE',
          `cannot ${what} session ${sessionId}: its workspace is full (the cap counts what changed since its ` +
            `checkpoints); delete checkpoints or files`,
          { sessionId },
          { cause: err },
        );
      }
      throw new CheckpointError(
        'CHECKPOINT_FAILED',
        `cannot ${what} session ${sessionId}: ${message}`,
        { sessionId },
        { cause: err },
      );
    }
  }
}
