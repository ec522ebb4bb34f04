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

// ---- Responses: from the generated OpenAPI schema too (the document's response schemas). ----

/** The action envelope: what running one answers (`ActionResult`), plus the timeline's fields (`ActionView`). */
export type Action = Schemas['ActionResult'] &
  Partial<Omit<Schemas['ActionView'], keyof Schemas['ActionResult']>>;
export type ActionStatus = Schemas['ActionResult']['status'];
export type ActionPage = Omit<Schemas['ActionPage'], 'actions'> & { actions: Action[] };
export type AcceptedAction = Schemas['AcceptedAction'];
export type Session = Schemas['Session'];
/** What a session has run (`Session.activity`): actions by status, the tiers they ran in, the latest start. */
export type SessionActivity = Schemas['SessionActivity'];
export type FailureContext = Schemas['FailureContext'];
export type FileLineage = Schemas['FileLineage'];
export type Graph = Schemas['Graph'];
export type GraphNode = Graph['nodes'][number];
export type GraphEdge = Graph['edges'][number];

export interface GraphQuery {
  types?: string[];
  status?: string[];
  since?: string;
  limit?: number;
}

export type Plan = Schemas['Plan'];
export type PlanStatus = Plan['status'];
export type PlanStep = Schemas['PlanStep'];
export type StepStatus = PlanStep['status'];
export type Checkpoint = Schemas['Checkpoint'];
export type CheckpointRestore = Schemas['CheckpointRestore'];
export type CheckpointDiff = Schemas['CheckpointDiff'];
export type Kernel = Schemas['Kernel'];
export type KernelInterrupt = Schemas['KernelInterrupt'];
/** A terminal of a session (a PTY in its sandbox), as the REST answers show it, with its WebSocket's `wsPath`. */
export type Terminal = Schemas['Terminal'];
/** What opening one answers (201): the terminal, a token for its WebSocket, and the action that recorded it. */
export type OpenedTerminal = Schemas['OpenedTerminal'];
/** A policy holds the terminal (its open, or its close) for approval (202). */
export type TerminalAwaitingApproval = Schemas['TerminalAwaitingApproval'];
export type ClosedTerminal = Schemas['ClosedTerminal'];
export type TerminalToken = Schemas['TerminalToken'];
export type OpenTerminalRequest = Omit<Schemas['OpenTerminalDto'], 'env'> & { env?: Record<string, string> };
export type Template = Schemas['Template'];
export type Health = Schemas['Health'];
export type PendingApproval = Schemas['PendingApproval'];
export type ApprovalDecision = Schemas['ApprovalDecision'];
export type Caller = Schemas['Caller'];
export type EffectivePolicy = Schemas['EffectivePolicy'];
export type TenantPolicy = Schemas['TenantPolicy'];
export type PolicyInput = Schemas['PolicyDto'];
export type Skill = Schemas['Skill'];
/** A skill to add (`POST /v1/skills`): its schemas are free-form JSON Schema objects. */
export type SkillInput = Omit<Schemas['Skill'], 'source' | 'createdAt' | 'inputSchema' | 'outputSchema'> & {
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
};
export type HookList = Schemas['HookList'];
export type HookDelivery = Schemas['HookDelivery'];

// ---- File transfer (`PUT`/`GET …/files/content`, `…/files/archive`). ----

/** What `PUT …/files/content` answers: the file as written, its sha256 and the action that recorded it. */
export type FileUpload = Schemas['FileUpload'];
/** What `PUT …/files/archive` answers: what the tar held, extracted. */
export type ArchiveUpload = Schemas['ArchiveUpload'];

/** A raw request body the client streams as it is (a `ReadableStream` with `duplex: 'half'`). */
export type UploadBody = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

/** Hand-written: one tool of the catalog, in the asked format (its shape is the model API's). */
export type Tool = Record<string, unknown>;

/** The engine's list (`SESSION_EVENT_TYPES`) and the stream's own `events.gap` and `session.ended`. */
export type SessionEventType = Schemas['SessionEventType'];

/**
 * One event of a session's stream. `id` is absent on `session.ended`, the last one, and on `events.gap`: sent
 * before a resumed stream's replay when events after `Last-Event-ID` are no longer buffered, its data names them
 * (`firstMissingId`, `lastMissingId`, `missing`) so the caller knows to re-read what they reported.
 */
export interface SessionEvent {
  id?: number;
  type: SessionEventType;
  data: Record<string, unknown> & { at?: string };
}
