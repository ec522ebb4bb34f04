import { SwitchyardError } from '@switchyard/common';

/** A restore while actions of the session run: the caller cancels them (or waits) first. */
export class ActionsRunningError extends SwitchyardError {
  readonly code = 'ACTIONS_RUNNING';
  readonly kind = 'conflict' as const;
  override readonly retriable = true;
}

/** An undo asked of an action that was not checkpointed (nor any action before it in its retry chain). */
export class NoCheckpointError extends SwitchyardError {
  readonly code = 'NO_CHECKPOINT';
  readonly kind = 'conflict' as const;
}
