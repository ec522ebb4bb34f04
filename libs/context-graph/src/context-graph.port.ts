import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  ApprovalDecision,
  FailureContext,
  FailureContextQuery,
  FileLineage,
  GraphFilter,
  GraphHealth,
  GraphView,
  ListActionsQuery,
  Page,
  PlanGraphRecord,
  SessionActivity,
  SessionRecord,
} from './context-graph.types';
import type { CheckpointRecord, CheckpointState, ForkRecord, RestoreRecord } from './checkpoint.types';

/**
 * The context graph: a durable record of every session, action and file an agent touched.
 *
 * Contract (every adapter passes `context-graph.contract.ts` unchanged):
 * - Each method resolves only once its writes are durable.
 * - The refusals documented on the writes are thrown by every adapter except one that acknowledges a write once it
 *   is durable in an outbox, before applying it (`PostgresOutboxGraph`, the graph of engine replicas): it drops a
 *   write the graph refuses when applying it, and logs it. The contract runs it with `deferredChecks`.
 * - `recordActionStarted` creates the `Action` node with status `running`, a `HAS_ACTION` edge from the
 *   session and a `NEXT` edge from the session's previous action; actions get a per-session `seq`
 *   (1, 2, …) in the order their starts were recorded.
 * - `approval` on a start records the action `awaiting_approval` instead, with a `HAS_APPROVAL` edge (no
 *   properties) to an `Approval` node (id `approval:<actionId>`, properties `actionId`, `rule`, `layer`,
 *   `reasons` (JSON text), `requestedAt`, `expiresAt`, and once decided `decision`, `decidedAt`, `decidedBy`,
 *   `reason` as far as set). `recordApprovalDecision` records the decision on it: `approved` makes the action
 *   `running`; `rejected` and `expired` leave it `awaiting_approval` until the engine completes it (`denied`).
 *   The record then carries it as `approval` (request and decision).
 * - `recordActionCompleted` sets the final fields and adds `READ`/`WROTE` edges to `File` nodes
 *   (one `File` node per session and path, id `file:<sessionId>:<path>`).
 * - `RETRY_OF` goes from the retry to the original when `retryOf` is set, with `{reason}` when `retryReason` is.
 * - `CALLED_BY` goes from an action to the action of its session that called it when `calledBy` is set (a
 *   skill calling tools), with `{depth}`; the record carries it as `calledBy`, a summary as the caller's id.
 * - `sandbox` on completion adds a `RAN_IN` edge to a `Sandbox` node (id `sandbox:<containerId>`, one per
 *   container, so a pooled container collects every action of its session).
 * - `kernel` on completion adds a `RAN_IN` edge with properties `{executionCount, started}` to a `Kernel` node
 *   (id `kernel:<kernelId>`, properties `id` (the kernel's own id), `sessionId`, `language`, `tier`; one per
 *   kernel, so every cell of a kernel points to it). `startedProcess` adds a `STARTED` edge (no properties) to a
 *   `Process` node (id `process:<processId>`, properties `id` (the process's own id), `sessionId`, `name` when
 *   set, `command`, `tier`, `startedAt`; one per process). Both come back on the action's record as recorded;
 *   the node's fields are those of the first action that named it (a kernel's language and tier never change).
 * - `reached` on completion (a connection the engine proxied to a session's port) adds a `REACHED` edge `{port}` to
 *   the `Process` or `Kernel` node of the server it reached, in the views that hold that node (the action that
 *   started the process, or a cell of the kernel); the record carries `reached` either way.
 * - `recordPlan` upserts a plan snapshot: a `Plan` node (`HAS_PLAN` from the session), one `Step` node per step
 *   version (id `step:<planId>:<stepId>:<version>`, `HAS_STEP` from the plan), `DEPENDS_ON` to the latest
 *   version of each dependency, `ATTEMPT` to each attempt's action (same session, existing actions only) and
 *   `REPLACES` from a newer version to the one it replaced. Each record replaces the steps' outgoing edges.
 * - `recordCheckpoint` adds a `Checkpoint` node (id `checkpoint:<checkpointId>`, properties `id` (the engine's
 *   id), `sessionId`, `label` when set, `createdAt`, `files`, `directories`, `bytes`, `auto`, `seq`), a
 *   `HAS_CHECKPOINT` edge from the session and a `BEFORE` edge to `beforeActionId` when set; the action's record
 *   then carries it as `checkpoint`. `recordCheckpointDeleted` keeps the node and sets `deletedAt` and
 *   `deleteReason` on it. `recordRestore` adds a `RESTORED` edge `{restoredAt, planId?}` from the restoring action
 *   (else the session) to the checkpoint. `recordFork` adds a `FORKED_FROM` edge `{forkedAt, seq, checkpointId?}`
 *   from the new session to its source; the new session's file lineage then begins with the source's.
 * - Node ids: the session id, the action id, the file id, the sandbox, kernel, process, approval and checkpoint
 *   ids, the plan id and the step id above.
 * - Every query answers the same on every adapter (same values, same order); on a remote store each query is
 *   one round trip.
 */
export abstract class ContextGraph {
  /** Creates the schema. Called once at start-up, before anything else. */
  abstract init(): Promise<void>;

  abstract recordSession(session: SessionRecord): Promise<void>;

  /**
   * Throws `SessionNotRecordedError` for an unknown session, `ActionNotRecordedError` when `retryOf` or
   * `calledBy.actionId` is not an action of the same session.
   */
  abstract recordActionStarted(action: ActionStart): Promise<void>;

  /**
   * Records the decision on an action's approval (see above); the action must be `awaiting_approval` with no
   * decision yet. Throws `ActionNotRecordedError` when the action was never started, `ApprovalNotPendingError`
   * when it has no approval, its approval was decided already, or it has ended.
   */
  abstract recordApprovalDecision(actionId: string, decision: ApprovalDecision): Promise<void>;

  /**
   * Ends an action that is `running` or `awaiting_approval` (a rejected or expired approval ends `denied`).
   * Throws `ActionNotRecordedError` when the action was never started, `ActionAlreadyCompletedError` when it
   * has already ended (including `interrupted`).
   */
  abstract recordActionCompleted(actionId: string, completion: ActionCompletion): Promise<void>;

  /**
   * Records an action seen only once it is over (a short request proxied to a session's port): the same records as
   * `recordActionStarted` then `recordActionCompleted`, with the same errors, as one write where the store can (one
   * transaction, one fsync), so what the engine only observes costs one commit, not two.
   */
  async recordActionWhole(action: ActionStart, completion: ActionCompletion): Promise<void> {
    await this.recordActionStarted(action);
    await this.recordActionCompleted(action.id, completion);
  }

  /**
   * Idempotent upsert of a plan snapshot (see above). Throws `SessionNotRecordedError` for an unknown session.
   */
  abstract recordPlan(plan: PlanGraphRecord): Promise<void>;

  /**
   * Records a checkpoint of a session's workspace (see above). Idempotent on the id: the first record of an id
   * is kept, a later one changes nothing. Throws `SessionNotRecordedError` for an unknown session,
   * `ActionNotRecordedError` when `beforeActionId` is not an action of that session.
   */
  abstract recordCheckpoint(checkpoint: CheckpointRecord): Promise<void>;

  /**
   * Marks a checkpoint deleted (asked for) or pruned (by the engine's limits). Its node stays: the graph is the
   * audit trail. The first deletion is kept; throws `CheckpointNotRecordedError` when the session has no such
   * checkpoint.
   */
  abstract recordCheckpointDeleted(
    sessionId: string,
    checkpointId: string,
    deletedAt: string,
    reason: 'deleted' | 'pruned',
  ): Promise<void>;

  /**
   * Records a checkpoint restored into its session's workspace. Each restore is its own `RESTORED` edge; one is
   * known by where it starts, its checkpoint and `restoredAt`, so recording the same restore again is a no-op
   * (the first `planId` is kept). Throws `SessionNotRecordedError` for an unknown session,
   * `ActionNotRecordedError` when `actionId` is not an action of that session, `CheckpointNotRecordedError` when
   * the checkpoint is not one of that session's.
   */
  abstract recordRestore(restore: RestoreRecord): Promise<void>;

  /**
   * Records where a new session's workspace came from. A session has at most one fork origin: the same record
   * again is a no-op, another one (or one making a session its own ancestor) throws `ForkConflictError`. Throws
   * `SessionNotRecordedError` when either session is unknown, `CheckpointNotRecordedError` when `checkpointId` is
   * not a checkpoint of the source session.
   */
  abstract recordFork(fork: ForkRecord): Promise<void>;

  abstract getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined>;

  /**
   * The highest action `seq` recorded in the session, 0 for none (or an unknown session): the `seq` a checkpoint
   * or a fork taken now records.
   */
  abstract lastActionSeq(sessionId: string): Promise<number>;

  /** One checkpoint of the session, as recorded and with its deletion; `undefined` when it has none such. */
  abstract getCheckpoint(sessionId: string, checkpointId: string): Promise<CheckpointState | undefined>;

  /**
   * Timeline of a session, oldest first (by `seq`). Empty page for an unknown session. Throws
   * `InvalidInputError` (field `cursor` or `limit`) for a cursor not returned by this method or a limit < 1.
   */
  abstract listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>>;

  /**
   * Session node, then actions by `seq`, files by path, sandboxes by id, kernels by id, processes by id,
   * approvals by their action's `seq`, checkpoints by `createdAt` then id, plans by `createdAt` then id, steps by
   * plan, step id and version, and last the other sessions of `FORKED_FROM` edges (the source, then the sessions
   * forked from this one by `forkedAt` then id). Edges grouped by type: `HAS_ACTION`, `NEXT`, `READ`/`WROTE`,
   * `RETRY_OF`, `CALLED_BY`, `RAN_IN`, `STARTED`, `REACHED`, `HAS_APPROVAL`, each group by the action's `seq` (the callee's
   * for `CALLED_BY`) — `RAN_IN` to sandboxes and kernels together, by `seq` then target node id; then
   * `HAS_CHECKPOINT` and `BEFORE`, each by the checkpoint's `createdAt` then id; `RESTORED` by `restoredAt`, then
   * checkpoint id, then the node it starts at; then `HAS_PLAN`, `HAS_STEP`, `DEPENDS_ON`, `ATTEMPT`, `REPLACES`,
   * each by plan and step; last `FORKED_FROM`, this session's to its source first, then those of its forks in
   * their node order. Empty for an unknown session. `filter` narrows it (see {@link GraphFilter}): checkpoints,
   * plans and forks stay, an approval only with its action, `CALLED_BY` only when both actions are included,
   * `BEFORE` and an action's `RESTORED` only for included actions. Throws `InvalidInputError` (field `since`,
   * `types`, `status` or `limit`) for a filter that cannot be applied.
   */
  abstract sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView>;

  /**
   * The failure context of one action (see {@link FailureContext}), including the kernel it ran in (`null`
   * outside kernels; `started: true` when its state was fresh), the checkpoint a retry with `restore: true`
   * would restore (`null` when none), its callers up to the top-level action and the actions it called, and its
   * approval (`null` when none); `undefined` when the session has no such action. Throws `InvalidInputError`
   * (field `before`) unless `before` is an integer 0–100.
   */
  abstract failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined>;

  /**
   * Which actions read and wrote `path` (a workspace-relative path, as recorded): for a forked session first
   * its source's entries with `seq` up to the fork's (recursively, each origin cut at its own fork's `seq`,
   * oldest origin first), then the session's own; each session's by `seq`, every entry naming its session.
   */
  abstract fileLineage(sessionId: string, path: string): Promise<FileLineage>;

  /**
   * What each of `sessionIds` has run (see {@link SessionActivity}), for lists of sessions: one query whatever
   * their number. The map holds the recorded sessions among them, each once, in the order asked; a session never
   * recorded is absent (not zeroed), a recorded one without actions has `actions: 0`, and an ended session still
   * answers (its records stay). No ids: an empty map, without a query.
   */
  abstract sessionActivity(sessionIds: readonly string[]): Promise<Map<string, SessionActivity>>;

  /** The store's state; cheap enough to call on every read (remote checks are cached briefly). */
  abstract health(): Promise<GraphHealth>;

  /**
   * Marks actions left `running` or `awaiting_approval` by a crash as `interrupted` (an approval left undecided
   * keeps no decision); returns how many. With `sessionIds`, only those sessions' actions (a replica taking over
   * the sessions of one that died leaves the others' running actions alone); none given: every session's.
   */
  abstract markRunningInterrupted(endedAt: string, sessionIds?: readonly string[]): Promise<number>;

  /**
   * Marks the session ended (deleted or expired). Its records stay: the graph is the audit trail. The first
   * end is kept; throws `SessionNotRecordedError` for an unknown session.
   */
  abstract endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void>;

  /** Flushes queued writes, then releases the store. Idempotent; later calls: `ContextGraphClosedError`. */
  abstract close(): Promise<void>;
}
