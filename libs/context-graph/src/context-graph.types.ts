import type {
  ActionError,
  ActionResult,
  ActionStatus,
  ActionTier,
  ActionType,
  FileTouch,
  FinalActionStatus,
  RiskAssessment,
} from '@switchyard/common';
import type { CheckpointRef } from './checkpoint.types';

export interface SessionRecord {
  id: string;
  tenant: string;
  createdAt: string;
  metadata: Record<string, unknown>;
}

/** What is known about an action before it runs. */
export interface ActionStart {
  id: string;
  sessionId: string;
  type: ActionType;
  /** `op` for file/browser actions, language for code actions. */
  operation: string;
  /** The request as received (code, path, …) — kept so a reflection loop can revise it. */
  input: Record<string, unknown>;
  /** Short human summary of the input (≤ 200 chars). */
  inputSummary: string;
  /** sha256 hex of the canonical input. */
  inputHash: string;
  startedAt: string;
  tier: ActionTier;
  risk: RiskAssessment;
  /** The action this one retries: a `RETRY_OF` edge to it. */
  retryOf?: string;
  /** Why it is retried, kept as the `reason` property of the `RETRY_OF` edge. */
  retryReason?: string;
  /**
   * A policy rule holds it for a person's decision: it is recorded `awaiting_approval` (not `running`), with an
   * `Approval` node (`HAS_APPROVAL` from the action).
   */
  approval?: ApprovalRequest;
  /** The action of the same session that called it (a skill's `ctx.call`): a `CALLED_BY` edge to it. */
  calledBy?: CallerRef;
}

/** Why an action waits for a decision: the policy rule that asked, and until when. */
export interface ApprovalRequest {
  /** The rule as written (JSON text) and the policy layer it came from: engine, tenant, session or plan. */
  rule: string;
  layer: string;
  /** Why it asks, for the person deciding (the rule's words, the action's risk reasons). */
  reasons: string[];
  /** ISO 8601. */
  requestedAt: string;
  /** ISO 8601. */
  expiresAt: string;
}

/** What became of an approval request; the first decision is the one kept. */
export interface ApprovalDecision {
  decision: 'approved' | 'rejected' | 'expired';
  /** ISO 8601. */
  decidedAt: string;
  /** Who decided (an opaque principal string such as `admin:3f2a…`); absent for `expired`. */
  decidedBy?: string;
  reason?: string;
}

/** An approval as recorded: the request, and its decision once made (absent, not null, until then). */
export type ApprovalRecord = ApprovalRequest & Partial<ApprovalDecision>;

/** The action that called another one: a `CALLED_BY` edge from the callee, with property `depth`. */
export interface CallerRef {
  actionId: string;
  /** How deep the callee sits: 1 when called by a top-level action, one more for each call further down. */
  depth: number;
}

/** The container an action ran in (container tiers only). One `Sandbox` node per container. */
export interface SandboxRef {
  tier: Extract<ActionTier, 'pooled' | 'container'>;
  containerId: string;
  /** The container's Docker runtime when the tier chose one: `runsc` (gVisor) or `runc` (one-off tier). */
  runtime?: string;
}

/**
 * The session kernel a code action ran in (`state: "session"`): a `RAN_IN` edge to the `Kernel` node (id
 * `kernel:<id>`, one per kernel, so every cell of the kernel points to it).
 */
export interface KernelRunRef {
  /** The kernel's id (`krn_…`). */
  id: string;
  language: 'python' | 'node' | 'bash';
  tier: 'subprocess' | 'pooled';
  /** The kernel's execution count after this action's cell (edge property). */
  executionCount: number;
  /** This action found no kernel and began this one: any state from before is gone (edge property). */
  started: boolean;
}

/**
 * A background process an action started (a `process` action, op `start`): a `STARTED` edge to the `Process`
 * node (id `process:<id>`, one per process).
 */
export interface ProcessGraphRef {
  /** The process's id (`prc_…`). */
  id: string;
  name?: string;
  /** The command line as given (stores may keep it whole; it is ≤ 64 KiB). */
  command: string;
  tier: 'subprocess' | 'pooled';
  /** ISO 8601. */
  startedAt: string;
}

/**
 * The server a connection reached (a `process` action with op `connect`: a request or WebSocket the engine proxied
 * to a session's port): the background process or kernel whose process tree listens on the port. A `REACHED` edge
 * (property `port`) to its `Process` or `Kernel` node, in the views that hold that node.
 */
export interface ReachedRef {
  kind: 'process' | 'kernel';
  /** The process's (`prc_…`) or kernel's (`krn_…`) id. */
  id: string;
  port: number;
}

/** What is known when it ends. `result` is the full envelope returned to the caller. */
export interface ActionCompletion {
  status: FinalActionStatus;
  endedAt: string;
  durationMs: number;
  tier: ActionTier;
  risk: RiskAssessment;
  exitCode?: number;
  error?: ActionError;
  /** First few KiB of stdout/stderr/output, for graph readers. */
  outputExcerpt: string;
  files: FileTouch[];
  result: ActionResult;
  /** Where it ran, when that was a container: a `RAN_IN` edge to the `Sandbox` node. */
  sandbox?: SandboxRef;
  /** The session kernel its cell ran in: a `RAN_IN` edge to the `Kernel` node. */
  kernel?: KernelRunRef;
  /** The background process it started: a `STARTED` edge to the `Process` node. */
  startedProcess?: ProcessGraphRef;
  /** The server its connection reached: a `REACHED` edge to that `Process` or `Kernel` node. */
  reached?: ReachedRef;
}

export interface ActionRecord {
  id: string;
  sessionId: string;
  seq: number;
  type: ActionType;
  operation: string;
  status: ActionStatus;
  input: Record<string, unknown>;
  inputSummary: string;
  inputHash: string;
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
  tier: ActionTier;
  risk: RiskAssessment;
  exitCode?: number;
  error?: ActionError;
  outputExcerpt?: string;
  retryOf?: string;
  retryReason?: string;
  sandbox?: SandboxRef;
  /** The session kernel it ran in, as recorded on completion. */
  kernel?: KernelRunRef;
  /** The background process it started, as recorded on completion. */
  startedProcess?: ProcessGraphRef;
  /** The server its connection reached, as recorded on completion. */
  reached?: ReachedRef;
  /** Its approval as recorded: the request, and the decision once made. */
  approval?: ApprovalRecord;
  /** The action that called it, and how deep. */
  calledBy?: CallerRef;
  /**
   * The checkpoint taken just before it (a `BEFORE` edge to it); absent when none. Should several name it, the
   * latest (by `createdAt`, then id) is the one that holds the workspace as the action found it.
   */
  checkpoint?: CheckpointRef;
  /** Deduplicated, sorted by path then access. */
  files: FileTouch[];
  /** The envelope as returned to the caller; absent while running or after a crash. */
  result?: ActionResult;
}

/** A tier an action ran in, as a session's activity names it: every `ActionTier` but `none` (refused before routing). */
export type ActivityTier = Exclude<ActionTier, 'none'>;

/**
 * What a session has run, in short (for lists of sessions): counted over every action recorded in it, running ones
 * and those awaiting approval included. A forked session counts its own actions only.
 */
export interface SessionActivity {
  /** Actions recorded in the session. */
  actions: number;
  /** How many actions have each status; a status none has is absent (so the counts add up to `actions`). */
  byStatus: Partial<Record<ActionStatus, number>>;
  /** The tiers its actions ran in (the tier recorded last for each), each once, in plain string order. */
  tiers: ActivityTier[];
  /** The latest `startedAt` of its actions (ISO 8601); `null` when it has none. */
  lastActionAt: string | null;
}

export interface Page<T> {
  items: T[];
  /** Opaque cursor for the next page; absent on the last page. */
  nextCursor?: string;
}

export interface ListActionsQuery {
  cursor?: string;
  limit: number;
}

export type GraphNodeLabel =
  | 'Session'
  | 'Action'
  | 'File'
  | 'Sandbox'
  | 'Kernel'
  | 'Process'
  | 'Approval'
  | 'Checkpoint'
  | 'Plan'
  | 'Step';
export type GraphEdgeType =
  | 'HAS_ACTION'
  | 'NEXT'
  | 'READ'
  | 'WROTE'
  | 'RETRY_OF'
  | 'CALLED_BY'
  | 'RAN_IN'
  | 'STARTED'
  | 'REACHED'
  | 'HAS_APPROVAL'
  | 'HAS_CHECKPOINT'
  | 'BEFORE'
  | 'RESTORED'
  | 'FORKED_FROM'
  | 'HAS_PLAN'
  | 'HAS_STEP'
  | 'DEPENDS_ON'
  | 'ATTEMPT'
  | 'REPLACES';

/** One version of a plan step, as recorded by `recordPlan`. */
export interface PlanGraphStep {
  stepId: string;
  /** 1 for the submitted step, +1 for each replan that replaced it. */
  version: number;
  status: string;
  allowFailure: boolean;
  /** Ids of the steps it depends on: `DEPENDS_ON` edges to their latest version at record time. */
  dependsOn: string[];
  /** Action ids of its attempts, in order: `ATTEMPT` edges to those that exist in the same session. */
  attempts: string[];
  /** The version this one replaced: a `REPLACES` edge to it (when that version is in the record). */
  replaces?: number;
}

/** A snapshot of a plan, for `recordPlan`: every version of every step. */
export interface PlanGraphRecord {
  id: string;
  sessionId: string;
  goal?: string;
  status: string;
  maxParallel: number;
  createdAt: string;
  endedAt?: string;
  steps: PlanGraphStep[];
}

/** The plan step an action was an attempt of. */
export interface PlanStepRef {
  planId: string;
  stepId: string;
  version: number;
}

export interface GraphNode {
  id: string;
  label: GraphNodeLabel;
  /**
   * Primitive values only, as Neo4j stores them: nested values (session `metadata`) are JSON strings and
   * unknown fields are absent rather than null. The `id` property of `Kernel`, `Process` and `Checkpoint`
   * nodes is the engine's id (`krn_…`, `prc_…`, `chk_…`, what the engine's APIs take); Neo4j keeps it as
   * `kernelId` / `processId` / `checkpointId`, its `id` being the node id like every node's.
   */
  properties: Record<string, unknown>;
}

export interface GraphEdge {
  from: string;
  to: string;
  type: GraphEdgeType;
  properties: Record<string, unknown>;
}

export interface GraphView {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

/**
 * Narrows `sessionGraph` to a compact picture of a long session. The Session node is always included, and so
 * are the session's checkpoints, its plans and their steps, and the sessions it was forked from or into (the
 * filter narrows actions only); files, sandboxes, kernels, processes and approvals are those of the included
 * actions, and an edge is kept only when both its ends are included (so `NEXT` links only consecutive included
 * actions, `CALLED_BY` only a callee and a caller both included, `ATTEMPT` only reaches included actions, and
 * `BEFORE` and an action's `RESTORED` only leave included ones).
 */
export interface GraphFilter {
  /** Only actions started at or after this instant (ISO 8601, compared as an instant). */
  since?: string;
  /** Only actions of these types. */
  types?: ActionType[];
  /** Only actions with these statuses. */
  status?: ActionStatus[];
  /** At most this many actions: the latest (highest `seq`) that match, still returned oldest first. */
  limit?: number;
}

/** An action's identity and outcome, without its full input, output or result. */
export interface ActionSummary {
  id: string;
  seq: number;
  type: ActionType;
  operation: string;
  status: ActionStatus;
  inputSummary: string;
  inputHash: string;
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
  tier: ActionTier;
  exitCode?: number;
  error?: ActionError;
  retryOf?: string;
  retryReason?: string;
  /** The id of the action that called it. */
  calledBy?: string;
}

/** One action of a retry chain, and where it stands relative to the action asked about. */
export interface RetryChainEntry extends ActionSummary {
  relation: 'ancestor' | 'self' | 'descendant';
}

/** A file the action touched, and which earlier action last wrote it. */
export interface FileContext {
  path: string;
  /** How this action touched it: `read` before `write`. */
  access: FileTouch['access'][];
  /** The latest action of the session before this one (lower `seq`) that wrote the file; absent if none. */
  lastWrittenBy?: ActionSummary;
}

/** What a reflection loop needs to revise a failed action, in one answer. */
export interface FailureContext {
  /** The action itself, with its input, output excerpt, error and files. */
  action: ActionRecord;
  /**
   * Every action linked to it by `RETRY_OF` paths — the originals it retries (transitively) and the retries
   * of it (transitively) — plus the action itself, by `seq`.
   */
  retryChain: RetryChainEntry[];
  /** Up to `before` actions immediately preceding it in the session, oldest first. */
  before: ActionSummary[];
  /** The files it read or wrote, by path. */
  files: FileContext[];
  /** The plan step version it was an attempt of (its `ATTEMPT` edge); `null` when it ran outside a plan. */
  planStep: PlanStepRef | null;
  /**
   * The session kernel it ran in (its `RAN_IN` edge to a `Kernel`), `null` when it ran outside one. With
   * `started: true` the kernel was begun by this very action: whatever state the cell expected is gone.
   */
  kernel: KernelRunRef | null;
  /**
   * What a retry with `restore: true` would restore: the checkpoint taken before this action, or, when it has
   * none, before the nearest ancestor in its retry chain (walking `retryOf` back); `null` when none. A deleted
   * one keeps its `deletedAt`: it cannot be restored, so the action cannot be undone that way.
   */
  checkpoint: CheckpointRef | null;
  /**
   * Who called it (`CALLED_BY` paths): its direct caller, that one's caller, … up to the top-level action
   * (nearest first); empty when it was not called by another action.
   */
  callers: ActionSummary[];
  /** The actions it called directly (a skill's tools), by `seq`. */
  calls: ActionSummary[];
  /** Its approval as recorded (request and decision); `null` when no policy rule asked for one. */
  approval: ApprovalRecord | null;
}

export interface FailureContextQuery {
  /** How many preceding actions to include, 0–100. */
  before: number;
}

/** One action that touched a file, with how it did. */
export interface FileLineageEntry extends ActionSummary {
  /** The session whose action it was: a forked session's lineage begins with its source's. */
  sessionId: string;
  /** `read` before `write`. */
  access: FileTouch['access'][];
}

/**
 * Which actions wrote and read one workspace file, by `seq`. A forked session's lineage begins with its
 * source's entries up to the fork's `seq` (recursively, oldest origin first). Empty `entries` for a path never
 * touched.
 */
export interface FileLineage {
  path: string;
  entries: FileLineageEntry[];
}

/** Where the store stands: for `/health`, and for reads that may lag behind the writes. */
export interface GraphHealth {
  store: 'embedded' | 'neo4j';
  /** `degraded`: Neo4j cannot be reached or is refusing writes; records wait in the local outbox. */
  status: 'ok' | 'degraded';
  /** Records committed locally but not yet in Neo4j (always 0 for the embedded store). */
  backlog: number;
  /** The last error talking to Neo4j, while degraded. */
  error?: string;
}
