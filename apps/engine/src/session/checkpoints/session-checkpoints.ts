import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { CLOCK, type Clock, type RestoredCheckpoint } from '@switchyard/common';
import { ContextGraph } from '@switchyard/context-graph';
import { SessionKernels, SessionProcesses } from '@switchyard/sandbox';
import {
  type Checkpoint,
  type CheckpointDiff,
  type CheckpointRequest,
  WorkspaceCheckpoints,
} from '@switchyard/workspace';
import { SessionEvents } from '../events/session-events';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../sessions/sessions.service';
import { ActionsRunningError } from './checkpoint.errors';

/** What restored a checkpoint: an action (a retry with `restore: true`), a plan's replan, or a caller directly. */
export interface RestoreCause {
  actionId?: string;
  planId?: string;
}

/** A restore's answer: the checkpoint, what was done, and what a checkpoint does not hold that is still running. */
export interface RestoreOutcome {
  checkpoint: Checkpoint;
  restored: RestoredCheckpoint;
  /** Kernels and background processes keep running through a restore: their memory is not in any checkpoint. */
  running: { kernels: string[]; processes: string[] };
  note?: string;
}

/**
 * The engine's side of workspace checkpoints: the workspace lib takes, restores, compares and forks them; this
 * records each in the context graph (`Checkpoint` nodes, `BEFORE`, `RESTORED`, `FORKED_FROM`), announces it on the
 * session's event stream, and guards the session: no restore while an action of the session runs (the caller
 * cancels first), and a note when kernels or processes keep state a restore cannot touch.
 */
@Injectable()
export class SessionCheckpoints implements OnModuleInit {
  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly checkpoints: WorkspaceCheckpoints,
    private readonly graph: ContextGraph,
    private readonly sessions: SessionsService,
    private readonly events: SessionEvents,
    private readonly kernels: SessionKernels,
    private readonly processes: SessionProcesses,
  ) {}

  async onModuleInit(): Promise<void> {
    // Copies are not running code: they go in the background, with what else the session held.
    this.sessions.onSessionTeardown((sessionId) => this.checkpoints.forget(sessionId));
    // After the sessions were loaded (their module starts first): copies of sessions that are gone go too.
    await this.checkpoints.forgetAllBut(this.sessions.knownIds());
  }

  /** Takes a checkpoint now; automatic ones pruned on the way are recorded as such. */
  async create(session: Session, request: CheckpointRequest = {}): Promise<Checkpoint> {
    const seq = await this.lineageCut(session, request.actionId);
    const { checkpoint, pruned } = await this.checkpoints.create(session.id, { ...request, seq });
    const at = this.clock.now().toISOString();
    for (const id of pruned) {
      await this.recorded(session, id, () =>
        this.graph.recordCheckpointDeleted(session.id, id, at, 'pruned'),
      );
      this.events.publish(session.id, 'checkpoint.deleted', { checkpointId: id, reason: 'pruned' });
    }
    try {
      await this.record(checkpoint);
    } catch (err) {
      // Not in the audit trail, so not kept either.
      await this.checkpoints.remove(session.id, checkpoint.id).catch(() => undefined);
      throw err;
    }
    this.events.publish(session.id, 'checkpoint.created', {
      checkpointId: checkpoint.id,
      auto: checkpoint.auto,
      ...(checkpoint.actionId !== undefined && { actionId: checkpoint.actionId }),
    });
    return checkpoint;
  }

  /**
   * The last action whose writes the checkpoint holds, for file lineage across a fork: the session's latest, or for
   * a checkpoint taken before an action (already recorded as started), the one before it.
   */
  private async lineageCut(session: Session, before?: string): Promise<number> {
    if (before !== undefined) {
      const action = await this.graph.getAction(session.id, before);
      if (action) return action.seq - 1;
    }
    return this.graph.lastActionSeq(session.id);
  }

  /** The graph record of a checkpoint, from the checkpoint's own record. */
  private record(checkpoint: Checkpoint): Promise<void> {
    return this.graph.recordCheckpoint({
      id: checkpoint.id,
      sessionId: checkpoint.sessionId,
      ...(checkpoint.label !== undefined && { label: checkpoint.label }),
      createdAt: checkpoint.createdAt,
      files: checkpoint.files,
      directories: checkpoint.directories,
      bytes: checkpoint.bytes,
      auto: checkpoint.auto,
      seq: checkpoint.seq ?? 0,
      ...(checkpoint.actionId !== undefined && { beforeActionId: checkpoint.actionId }),
    });
  }

  /**
   * Runs a graph write about checkpoint `id`, first recording the checkpoint itself should the graph not know it: a
   * crash between a checkpoint's taking (on disk first) and its graph record leaves it unrecorded.
   */
  private async recorded(session: Session, id: string, write: () => Promise<void>): Promise<void> {
    if (!(await this.graph.getCheckpoint(session.id, id))) {
      const checkpoint = (await this.checkpoints.list(session.id)).find((c) => c.id === id);
      if (checkpoint) await this.recordSafely(checkpoint);
    }
    await write();
  }

  /** A checkpoint before an action that the graph never got (the crash ended it too) is recorded without BEFORE. */
  private async recordSafely(checkpoint: Checkpoint): Promise<void> {
    try {
      await this.record(checkpoint);
    } catch (err) {
      if (checkpoint.actionId === undefined) throw err;
      const { actionId: _gone, ...rest } = checkpoint;
      await this.record(rest);
    }
  }

  async list(session: Session): Promise<Checkpoint[]> {
    const list = await this.checkpoints.list(session.id);
    for (const c of list) {
      if (!(await this.graph.getCheckpoint(session.id, c.id))) await this.recordSafely(c);
    }
    return list;
  }

  get(session: Session, id: string): Promise<Checkpoint> {
    return this.checkpoints.get(session.id, id);
  }

  async remove(session: Session, id: string): Promise<void> {
    const checkpoint = await this.checkpoints.get(session.id, id);
    if (!(await this.graph.getCheckpoint(session.id, id))) await this.recordSafely(checkpoint);
    await this.checkpoints.remove(session.id, id);
    await this.graph.recordCheckpointDeleted(session.id, id, this.clock.now().toISOString(), 'deleted');
    this.events.publish(session.id, 'checkpoint.deleted', { checkpointId: id, reason: 'deleted' });
  }

  /**
   * Puts the workspace back as it was at the checkpoint. Refused (409) while an action of the session runs, beyond
   * the one doing the restore (`cause.actionId`).
   */
  async restore(session: Session, id: string, cause: RestoreCause = {}): Promise<RestoreOutcome> {
    const others = this.sessions.activeActions(session.id) - (cause.actionId !== undefined ? 1 : 0);
    if (others > 0) {
      throw new ActionsRunningError(
        `${others} action(s) of session ${session.id} are running; cancel them (or wait for them) before a restore`,
        { sessionId: session.id, running: others },
      );
    }
    const { checkpoint, stats } = await this.checkpoints.restore(session.id, id);
    await this.recorded(session, id, () =>
      this.graph.recordRestore({
        sessionId: session.id,
        checkpointId: id,
        restoredAt: this.clock.now().toISOString(),
        ...(cause.actionId !== undefined && { actionId: cause.actionId }),
        ...(cause.planId !== undefined && { planId: cause.planId }),
      }),
    );
    const running = {
      kernels: this.kernels.list(session.id).map((k) => k.id),
      processes: this.processes
        .list(session.id)
        .filter((p) => p.running)
        .map((p) => p.id),
    };
    const restored = { checkpointId: id, ...stats };
    this.events.publish(session.id, 'checkpoint.restored', {
      ...restored,
      ...(cause.actionId !== undefined && { actionId: cause.actionId }),
      ...(cause.planId !== undefined && { planId: cause.planId }),
    });
    const still = [
      ...(running.kernels.length > 0 ? [`${running.kernels.length} kernel(s)`] : []),
      ...(running.processes.length > 0 ? [`${running.processes.length} background process(es)`] : []),
    ];
    return {
      checkpoint,
      restored,
      running,
      ...(still.length > 0 && {
        note:
          `the workspace's files were restored; ${still.join(' and ')} kept running with the state they had ` +
          `(kernels and processes are not part of a checkpoint: restart them for a clean start)`,
      }),
    };
  }

  diff(session: Session, from: string, to: string): Promise<CheckpointDiff> {
    return this.checkpoints.diff(session.id, from, to);
  }

  /**
   * A new session of the same tenant, with the source's settings (metadata, time to live, concurrency, network,
   * template), whose workspace is a copy of the source's: as it is now, or at `checkpointId`. Isolated both ways
   * from then on; it starts with no checkpoints, kernels or processes.
   */
  async fork(source: Session, checkpointId?: string): Promise<Session> {
    const seq =
      checkpointId === undefined
        ? await this.graph.lastActionSeq(source.id)
        : ((await this.checkpoints.get(source.id, checkpointId)).seq ?? 0);
    const forkedFrom = { sessionId: source.id, ...(checkpointId !== undefined && { checkpointId }) };
    const session = await this.sessions.create(
      source.tenant,
      {
        metadata: source.metadata,
        ttlSeconds: source.ttlSeconds,
        maxConcurrentActions: source.maxConcurrentActions,
        network: { allow: [...source.network.allow] },
        ...(source.template !== undefined && { template: source.template }),
      },
      { forkedFrom, workspace: (id) => this.checkpoints.fork(source.id, checkpointId, id) },
    );
    const fork = {
      sessionId: session.id,
      fromSessionId: source.id,
      ...(checkpointId !== undefined && { checkpointId }),
      forkedAt: session.createdAt.toISOString(),
      seq,
    };
    if (checkpointId === undefined) await this.graph.recordFork(fork);
    else await this.recorded(source, checkpointId, () => this.graph.recordFork(fork));
    return session;
  }
}
