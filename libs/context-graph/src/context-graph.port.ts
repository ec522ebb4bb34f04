import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  FailureContext,
  FailureContextQuery,
  FileLineage,
  GraphFilter,
  GraphHealth,
  GraphView,
  ListActionsQuery,
  Page,
  PlanGraphRecord,
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
 * - `RETRY_OF` goes from the retry to the original when `retryOf` is set, with `{reason}` when `retryReason` is.
 * - `sandbox` on completion adds a `RAN_IN` edge to a `Sandbox` node (id `sandbox:<containerId>`, one per
 *   container, so a pooled container collects every action of its session).
 * - `kernel` on completion adds a `RAN_IN` edge with properties `{executionCount, started}` to a `Kernel` node
 *   (id `kernel:<kernelId>`, properties `id` (the kernel's own id), `sessionId`, `language`, `tier`; one per
 *   kernel, so every cell of a kernel points to it). `startedProcess` adds a `STARTED` edge (no properties) to a
 *   `Process` node (id `process:<processId>`, properties `id` (the process's own id), `sessionId`, `name` when
 *   set, `command`, `tier`, `startedAt`; one per process). Both come back on the action's record as recorded;
 *   the node's fields are those of the first action that named it (a kernel's language and tier never change).
 * - `recordPlan` upserts a plan snapshot: a `Plan` node (`HAS_PLAN` from the session), one `Step` node per step
 *   version (id `step:<planId>:<stepId>:<version>`, `HAS_STEP` from the plan), `DEPENDS_ON` to the latest
 *   version of each dependency, `ATTEMPT` to each attempt's action (same session, existing actions only) and
 *   `REPLACES` from a newer version to the one it replaced. Each record replaces the steps' outgoing edges.
 * - Node ids: the session id, the action id, the file id, the sandbox, kernel and process ids, the plan id and
 *   the step id above.
 * - Every query answers the same on every adapter (same values, same order); on a remote store each query is
 *   one round trip.
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

  /**
   * Idempotent upsert of a plan snapshot (see above). Throws `SessionNotRecordedError` for an unknown session.
   */
  abstract recordPlan(plan: PlanGraphRecord): Promise<void>;

  abstract getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined>;

  /**
   * Timeline of a session, oldest first (by `seq`). Empty page for an unknown session. Throws
   * `InvalidInputError` (field `cursor` or `limit`) for a cursor not returned by this method or a limit < 1.
   */
  abstract listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>>;

  /**
   * Session node, then actions by `seq`, files by path, sandboxes by id, kernels by id, processes by id, plans
   * by `createdAt` then id, steps by plan, step id and version; edges grouped by type (`HAS_ACTION`, `NEXT`,
   * `READ`/`WROTE`, `RETRY_OF`, `RAN_IN`, `STARTED`, each group by the action's `seq` — `RAN_IN` to sandboxes
   * and kernels together, by `seq` then target node id; then `HAS_PLAN`, `HAS_STEP`, `DEPENDS_ON`, `ATTEMPT`,
   * `REPLACES`, each by plan and step). Empty for an unknown session. `filter` narrows it (see
   * {@link GraphFilter}); throws `InvalidInputError` (field `since`, `types`, `status` or `limit`) for a filter
   * that cannot be applied.
   */
  abstract sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView>;

  /**
   * The failure context of one action (see {@link FailureContext}), including the kernel it ran in (`null`
   * outside kernels; `started: true` when its state was fresh); `undefined` when the session has no such
   * action. Throws `InvalidInputError` (field `before`) unless `before` is an integer 0–100.
   */
  abstract failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined>;

  /** Which actions of the session read and wrote `path` (a workspace-relative path, as recorded), by `seq`. */
  abstract fileLineage(sessionId: string, path: string): Promise<FileLineage>;

  /** The store's state; cheap enough to call on every read (remote checks are cached briefly). */
  abstract health(): Promise<GraphHealth>;

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
