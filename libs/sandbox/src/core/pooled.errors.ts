import type { ErrorKind } from '@switchyard/common';
import { SandboxCapacityError, SandboxError } from './sandbox.errors';

/**
 * No container could be given to a session in time: every warm container was taken or unhealthy and no new one
 * started within `pooled.acquireTimeoutMs`, or `pooled.maxSessions` sessions already hold one. Retriable; the action
 * is recorded `denied` (class `limit`).
 */
export class PoolExhaustedError extends SandboxCapacityError {
  constructor(
    readonly code: 'POOL_ACQUIRE_TIMEOUT' | 'POOL_SESSIONS_EXHAUSTED',
    message: string,
    details: Record<string, unknown> = {},
  ) {
    super(message, details);
  }
}

/**
 * The runner in a session's container died or stopped answering during a run. The container has been destroyed;
 * the session's next action gets a fresh one (its /workspace is kept, its /tmp and processes are not). Retriable.
 */
export class RunnerLostError extends SandboxError {
  readonly kind: ErrorKind = 'internal';
  override readonly retriable = true;

  constructor(
    readonly code: 'RUNNER_LOST' | 'RUNNER_UNRESPONSIVE',
    message: string,
    details: Record<string, unknown> = {},
    options: { cause?: unknown } = {},
  ) {
    super(message, details, options);
  }
}
