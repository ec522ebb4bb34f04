import { Injectable } from '@nestjs/common';
import type { ActionError, ActionResult, RestoredCheckpoint } from '@switchyard/common';
import { CheckpointError } from '@switchyard/workspace';
import { ActionsRunningError } from '../../session/checkpoints/checkpoint.errors';
import { SessionCheckpoints } from '../../session/checkpoints/session-checkpoints';
import type { Session } from '../../state/sessions/session.model';

/** What an action asks of its workspace before it runs. */
export interface WorkspaceSteps {
  /** Put the workspace back to this checkpoint first (a retry with `restore: true`). */
  restore?: string;
  /** Then checkpoint it (`checkpoint: "before"`). */
  checkpoint?: 'before';
}

/** What was done, or why the action must not run. */
export interface WorkspacePrepared {
  checkpoint?: ActionResult['checkpoint'];
  restored?: RestoredCheckpoint;
  /** The action is refused (`denied`), or fails (`error`, class `internal`), with this error. */
  refusal?: { status: 'denied' | 'error'; error: ActionError };
}

/**
 * The workspace steps an action takes at its turn, just before it runs: a restore, then a checkpoint. A step that
 * cannot be taken stops the action there, recorded with the reason (the checkpoint limit, no room in the cap,
 * another action of the session running during a restore), rather than letting it run on a workspace it did not ask
 * for.
 */
@Injectable()
export class ActionCheckpoints {
  constructor(private readonly checkpoints: SessionCheckpoints) {}

  async beforeRun(session: Session, actionId: string, steps: WorkspaceSteps): Promise<WorkspacePrepared> {
    const done: WorkspacePrepared = {};
    try {
      if (steps.restore !== undefined) {
        done.restored = (await this.checkpoints.restore(session, steps.restore, { actionId })).restored;
      }
      if (steps.checkpoint === 'before') {
        const c = await this.checkpoints.create(session, { auto: true, actionId });
        done.checkpoint = { id: c.id, createdAt: c.createdAt };
      }
      return done;
    } catch (err) {
      return { ...done, refusal: refusalOf(err) };
    }
  }
}

function refusalOf(err: unknown): NonNullable<WorkspacePrepared['refusal']> {
  if (err instanceof ActionsRunningError) {
    return { status: 'denied', error: { class: 'validation', code: err.code, message: err.message } };
  }
  if (err instanceof CheckpointError && err.code !== 'CHECKPOINT_FAILED') {
    const errorClass = err.code === 'CHECKPOINT_NOT_FOUND' ? 'validation' : 'limit';
    return { status: 'denied', error: { class: errorClass, code: err.code, message: err.message } };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { status: 'error', error: { class: 'internal', code: 'CHECKPOINT_FAILED', message } };
}
