import { SwitchyardError } from '@switchyard/common';

/** New work is refused while the engine drains for shutdown. */
export class EngineShuttingDownError extends SwitchyardError {
  readonly code = 'SHUTTING_DOWN';
  readonly kind = 'unavailable' as const;
  override readonly retriable = true;
}

/** Cancel of an action that is no longer running. */
export class ActionAlreadyEndedError extends SwitchyardError {
  readonly code = 'ACTION_ENDED';
  readonly kind = 'conflict' as const;
}

/** A retry that cannot be made: the original still runs, the chain is too deep, or no stronger tier exists. */
export class RetryRefusedError extends SwitchyardError {
  readonly code = 'RETRY_REFUSED';
  readonly kind = 'conflict' as const;
}
