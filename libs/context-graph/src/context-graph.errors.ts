import { SwitchyardError } from '@switchyard/common';

/** `recordActionCompleted` (or a `retryOf`) named an action that was never started in this graph. */
export class ActionNotRecordedError extends SwitchyardError {
  readonly code = 'ACTION_NOT_RECORDED';
  readonly kind = 'not_found' as const;

  constructor(actionId: string, sessionId?: string) {
    super(
      sessionId === undefined
        ? `action ${actionId} was never recorded`
        : `action ${actionId} was never recorded in session ${sessionId}`,
      sessionId === undefined ? { actionId } : { actionId, sessionId },
    );
  }
}

/** An action can end only once: its final fields are the audit trail and are never overwritten. */
export class ActionAlreadyCompletedError extends SwitchyardError {
  readonly code = 'ACTION_ALREADY_COMPLETED';
  readonly kind = 'conflict' as const;

  constructor(actionId: string, status: string) {
    super(`action ${actionId} already ended with status ${status}`, { actionId, status });
  }
}

/**
 * An approval decision named an action with nothing to decide: it waits for no approval (none was asked for, or
 * it has ended), or its approval was decided already (the first decision is the audit trail and is never
 * overwritten).
 */
export class ApprovalNotPendingError extends SwitchyardError {
  readonly code = 'APPROVAL_NOT_PENDING';
  readonly kind = 'conflict' as const;

  constructor(actionId: string, status: string, decision?: string) {
    super(
      decision === undefined
        ? `action ${actionId} has no approval pending (status ${status})`
        : `the approval of action ${actionId} was already decided: ${decision}`,
      decision === undefined ? { actionId, status } : { actionId, status, decision },
    );
  }
}

/** An action was started in (or `endSession` named) a session that was never recorded. */
export class SessionNotRecordedError extends SwitchyardError {
  readonly code = 'SESSION_NOT_RECORDED';
  readonly kind = 'not_found' as const;

  constructor(sessionId: string) {
    super(`session ${sessionId} was never recorded in the context graph`, { sessionId });
  }
}

/**
 * A checkpoint deletion, restore or fork named a checkpoint never recorded in that session (another session's
 * checkpoint is not found either: a workspace is only ever restored from its own checkpoints).
 */
export class CheckpointNotRecordedError extends SwitchyardError {
  readonly code = 'CHECKPOINT_NOT_RECORDED';
  readonly kind = 'not_found' as const;

  constructor(checkpointId: string, sessionId: string) {
    super(`checkpoint ${checkpointId} was never recorded in session ${sessionId}`, {
      checkpointId,
      sessionId,
    });
  }
}

/**
 * A session's workspace began once: it has one fork origin. Recording another (a different source,
 * checkpoint, time or seq), or one that would make a session its own ancestor, is refused; the same record
 * again is a no-op.
 */
export class ForkConflictError extends SwitchyardError {
  readonly code = 'FORK_CONFLICT';
  readonly kind = 'conflict' as const;

  constructor(sessionId: string, fromSessionId: string, reason: 'already_forked' | 'cycle') {
    super(
      reason === 'cycle'
        ? `session ${sessionId} cannot be forked from ${fromSessionId}: it would be its own ancestor`
        : `session ${sessionId} was already forked from another origin than ${fromSessionId}`,
      { sessionId, fromSessionId, reason },
    );
  }
}

/** The graph was used after `close()`, i.e. while the engine shuts down. */
export class ContextGraphClosedError extends SwitchyardError {
  readonly code = 'CONTEXT_GRAPH_CLOSED';
  readonly kind = 'unavailable' as const;

  constructor() {
    super('the context graph is closed (the engine is shutting down)');
  }
}

/** Which connection setting a `GraphStoreConnectionError` blames. */
export type GraphStoreSetting = 'uri' | 'credentials' | 'database';

/**
 * The graph store could not be used at start-up: unreachable or malformed address (`uri`), refused login
 * (`credentials`) or no such database (`database`). The engine names the matching variable and stops. Also thrown
 * later by `PostgresOutboxGraph` (setting `uri`) when a read cannot be answered because Neo4j did not catch up
 * with the outbox in time.
 */
export class GraphStoreConnectionError extends SwitchyardError {
  readonly code = 'GRAPH_STORE_CONNECTION';
  readonly kind = 'unavailable' as const;

  constructor(
    readonly setting: GraphStoreSetting,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, { setting }, options);
  }
}
