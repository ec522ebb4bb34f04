import { SwitchyardError } from '@switchyard/common';

/** New work is refused while the engine drains for shutdown. */
export class EngineShuttingDownError extends SwitchyardError {
  readonly code = 'SHUTTING_DOWN';
  readonly kind = 'unavailable' as const;
  override readonly retriable = true;
}
