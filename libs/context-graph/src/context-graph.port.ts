import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  GraphView,
  ListActionsQuery,
  Page,
  SessionRecord,
} from './context-graph.types';

/**
 * The context graph: a durable record of every session, action and file an agent touched.
 *
 * Contract (every adapter passes `context-graph.contract.ts` unchanged):
 * - Each method resolves only once its writes are durable.
 * - `recordActionStarted` creates the `Action` node with status `running`, a `HAS_ACTION` edge from the
 *   session and a `NEXT` edge from the session's previous action; actions get a per-session `seq`
 *   (1, 2, …) in the order their starts were recorded.
 * - `recordActionCompleted` sets the final fields and adds `READ`/`WROTE` edges to `File` nodes
 *   (one `File` node per session and path, id `file:<sessionId>:<path>`).
 * - `RETRY_OF` goes from the retry to the original when `retryOf` is set.
 * - `sandbox` on completion adds a `RAN_IN` edge to a `Sandbox` node (id `sandbox:<containerId>`, one per
 *   container, so a pooled container collects every action of its session).
 * - Node ids: the session id, the action id, the file id and the sandbox id above.
 */
export abstract class ContextGraph {
  /** Creates the schema. Called once at start-up, before anything else. */
  abstract init(): Promise<void>;

  abstract recordSession(session: SessionRecord): Promise<void>;

  /**
   * Throws `SessionNotRecordedError` for an unknown session, `ActionNotRecordedError` when `retryOf` is
   * not an action of the same session.
   */
  abstract recordActionStarted(action: ActionStart): Promise<void>;

  /**
   * Throws `ActionNotRecordedError` when the action was never started, `ActionAlreadyCompletedError` when it
   * has already ended (including `interrupted`).
   */
  abstract recordActionCompleted(actionId: string, completion: ActionCompletion): Promise<void>;

  abstract getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined>;

  /**
   * Timeline of a session, oldest first (by `seq`). Empty page for an unknown session. Throws
   * `InvalidInputError` (field `cursor` or `limit`) for a cursor not returned by this method or a limit < 1.
   */
  abstract listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>>;

  /** Session node, actions by `seq`, files by path; empty for an unknown session. */
  abstract sessionGraph(sessionId: string): Promise<GraphView>;

  /** Marks actions left `running` by a crash as `interrupted`; returns how many. */
  abstract markRunningInterrupted(endedAt: string): Promise<number>;

  /**
   * Marks the session ended (deleted or expired). Its records stay: the graph is the audit trail. The first
   * end is kept; throws `SessionNotRecordedError` for an unknown session.
   */
  abstract endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void>;

  /** Flushes queued writes, then releases the store. Idempotent; later calls: `ContextGraphClosedError`. */
  abstract close(): Promise<void>;
}
