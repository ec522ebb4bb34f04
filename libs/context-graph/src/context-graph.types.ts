import type {
  ActionError,
  ActionResult,
  ActionStatus,
  ActionTier,
  ActionType,
  FileTouch,
  RiskAssessment,
} from '@switchyard/common';

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
  /** Reserved for the reflection issue: the action this one retries. */
  retryOf?: string;
}

/** The container an action ran in (container tiers only). One `Sandbox` node per container. */
export interface SandboxRef {
  tier: Extract<ActionTier, 'pooled' | 'container'>;
  containerId: string;
}

/** What is known when it ends. `result` is the full envelope returned to the caller. */
export interface ActionCompletion {
  status: Exclude<ActionStatus, 'running'>;
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
  sandbox?: SandboxRef;
  /** Deduplicated, sorted by path then access. */
  files: FileTouch[];
  /** The envelope as returned to the caller; absent while running or after a crash. */
  result?: ActionResult;
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

export type GraphNodeLabel = 'Session' | 'Action' | 'File' | 'Sandbox';
export type GraphEdgeType = 'HAS_ACTION' | 'NEXT' | 'READ' | 'WROTE' | 'RETRY_OF' | 'RAN_IN';

export interface GraphNode {
  id: string;
  label: GraphNodeLabel;
  /**
   * Primitive values only, as Neo4j stores them: nested values (session `metadata`) are JSON strings and
   * unknown fields are absent rather than null.
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
