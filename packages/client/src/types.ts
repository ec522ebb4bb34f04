import type { components, operations } from './generated/schema';

type Schemas = components['schemas'];

// ---- Requests: from the generated OpenAPI schema (`npm run client:generate`). ----
// A few DTO fields are free-form objects, which the document types as `Record<string, never>`; they are widened here.

/** One action as `POST …/actions` takes it (code, file, browser, process or kernel). */
export type ActionInput = NonNullable<
  operations['ActionsController_run']['requestBody']
>['content']['application/json'];
export type CreateSessionRequest = Omit<Schemas['CreateSessionDto'], 'metadata'> & {
  metadata?: Record<string, unknown>;
};
export type CreateCheckpointRequest = Schemas['CreateCheckpointDto'];
export type ForkSessionRequest = Schemas['ForkSessionDto'];
export type RetryRequest = Omit<Schemas['RetryActionDto'], 'action'> & { action?: ActionInput };
export type PlanStepInput = Omit<Schemas['PlanStepDto'], 'action'> & { action: ActionInput };
export type CreatePlanRequest = Omit<Schemas['CreatePlanDto'], 'steps'> & { steps: PlanStepInput[] };
export type ReplanRequest = Omit<Schemas['ReplanDto'], 'steps'> & { steps: PlanStepInput[] };
export type ToolCall = NonNullable<
  operations['ToolsController_call']['requestBody']
>['content']['application/json'];
export type ToolCallAnswer =
  operations['ToolsController_call']['responses'][200]['content']['application/json'];
export type ErrorBody = Schemas['ErrorResponse'];

// ---- Responses: HAND-WRITTEN. The OpenAPI document has no response schema for these yet; each interface holds
// only what this client and its CLI rely on, with the rest left open. Replace with generated types once the
// engine documents them. ----

export type ActionStatus =
  'running' | 'succeeded' | 'failed' | 'timed_out' | 'denied' | 'error' | 'cancelled' | 'interrupted';

/** Hand-written: the action envelope (`ActionResult` plus timeline fields). */
export interface Action {
  id: string;
  sessionId: string;
  type: string;
  status: ActionStatus;
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  output?: unknown;
  durationMs?: number;
  startedAt?: string;
  endedAt?: string;
  tier?: string;
  risk?: { score: number; level: string; reasons: string[] };
  error?: { class: string; message: string; code?: string };
  checkpoint?: { id: string; createdAt: string };
  restored?: { checkpointId: string; copied: number; removed: number; kept: number };
  retryOf?: string;
  seq?: number;
  inputSummary?: string;
  [key: string]: unknown;
}

/** Hand-written: a session. */
export interface Session {
  id: string;
  createdAt: string;
  expiresAt: string;
  lastActiveAt: string;
  ttlSeconds: number;
  metadata: Record<string, unknown>;
  maxConcurrentActions: number;
  network: { allow: string[] };
  template?: string;
  forkedFrom?: { sessionId: string; checkpointId?: string };
}

export interface ActionPage {
  actions: Action[];
  nextCursor?: string;
}

/** Hand-written: failure context of an action (`GET …/actions/:id/context`). */
export interface FailureContext {
  action: Record<string, unknown>;
  checkpoint?: { id: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** Hand-written: who wrote and read a file, in order. */
export interface FileLineage {
  path: string;
  [key: string]: unknown;
}

export interface GraphNode {
  id: string;
  label: string;
  properties: Record<string, unknown>;
}

export interface GraphEdge {
  from: string;
  to: string;
  type: string;
  properties: Record<string, unknown>;
}

export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

export interface GraphQuery {
  types?: string[];
  status?: string[];
  since?: string;
  limit?: number;
}

export type PlanStatus = 'running' | 'succeeded' | 'needs_replan' | 'cancelled' | 'interrupted';
export type StepStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';

/** Hand-written: a plan step's state. */
export interface PlanStep {
  id: string;
  version: number;
  status: StepStatus;
  attempts: Array<{ actionId?: string; status: ActionStatus; startedAt: string; endedAt?: string }>;
  dependsOn: string[];
  reason?: string;
  [key: string]: unknown;
}

/** Hand-written: a plan. */
export interface Plan {
  id: string;
  sessionId: string;
  goal?: string;
  status: PlanStatus;
  steps: PlanStep[];
  failedStep?: string;
  failureContext?: Record<string, unknown>;
  createdAt: string;
  endedAt?: string;
  [key: string]: unknown;
}

/** Hand-written: a checkpoint. */
export interface Checkpoint {
  id: string;
  sessionId: string;
  label?: string;
  createdAt: string;
  files: number;
  directories: number;
  bytes: number;
  auto: boolean;
  seq: number;
}

export interface CheckpointRestore {
  checkpoint: Checkpoint;
  restored: { checkpointId: string; copied: number; removed: number; kept: number; bytesCopied: number };
  running: { kernels: unknown[]; processes: unknown[] };
}

/** Hand-written: what changed between a checkpoint and another one or the workspace. */
export interface CheckpointDiff {
  added: unknown[];
  removed: unknown[];
  modified: unknown[];
  [key: string]: unknown;
}

/** Hand-written: a session kernel. */
export interface Kernel {
  id: string;
  language: string;
  tier: string;
  [key: string]: unknown;
}

/** Hand-written: one tool of the catalog, in the asked format (its shape is the model API's). */
export type Tool = Record<string, unknown>;

export type SessionEventType =
  | 'action.started'
  | 'action.output'
  | 'action.completed'
  | 'plan.started'
  | 'plan.step.started'
  | 'plan.step.completed'
  | 'plan.needs_replan'
  | 'plan.completed'
  | 'kernel.started'
  | 'kernel.ended'
  | 'process.output'
  | 'process.exited'
  | 'checkpoint.created'
  | 'checkpoint.restored'
  | 'checkpoint.deleted'
  | 'session.ended';

/** One event of a session's stream. `id` is absent on `session.ended`, the last one. */
export interface SessionEvent {
  id?: number;
  type: SessionEventType;
  data: Record<string, unknown> & { at?: string };
}
