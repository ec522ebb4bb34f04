import type {
  ActionError,
  ActionResult,
  ActionTier,
  EgressRecord,
  FileTouch,
  FinalActionStatus,
  RiskAssessment,
  RunOutput,
  SwitchyardError,
  Tier,
} from '@switchyard/common';
import type { KernelRunRef, ProcessGraphRef, SandboxRef } from '@switchyard/context-graph';
import type { Session } from '../../state/sessions/session.model';
import type { ActionRequest } from '../../state/actions/action-request';

/** How an action ended, before the engine wraps it in the result envelope. */
export interface Outcome {
  status: FinalActionStatus;
  tier: ActionTier;
  risk: RiskAssessment;
  /**
   * What the action's code printed and how it exited, as its sandbox tier returned it (already redacted and capped),
   * or a process's logs. Absent for actions that ran no code.
   */
  run?: RunOutput;
  output?: unknown;
  error?: ActionError;
  files: FileTouch[];
  /** The container the code ran in, for the graph's `RAN_IN` edge. */
  sandbox?: SandboxRef;
  /** The session kernel a cell ran in, for the graph's `RAN_IN` edge to its Kernel node. */
  kernel?: KernelRunRef;
  /** The background process the action started, for the graph's `STARTED` edge. */
  startedProcess?: ProcessGraphRef;
  /** What a caller can do about this outcome (e.g. code that met a session without network). */
  hints?: string[];
  /**
   * Connections the action made by a way of its own, not through the session's egress proxy (a browser page's
   * `localhost`, opened as the session's own sandbox port): listed in the result's `egress` with the proxy's.
   */
  egress?: EgressRecord[];
  /**
   * A refusal of the input itself that only running could find (a symlink leading out of the workspace). The action
   * is recorded `denied` like any refusal; the HTTP edge answers it as the 4xx it would have been if found earlier.
   */
  inputRefusal?: SwitchyardError;
}

export type OutputListener = (stream: 'stdout' | 'stderr', chunk: string) => void;

/** What a handler needs to prepare one action of a session. */
export interface ActionContext {
  session: Session;
  actionId: string;
  /** Absolute host path of the session's workspace. */
  workspaceDir: string;
  /** Live output of the action (already redacted by the tier), e.g. for SSE. */
  onOutput?: OutputListener;
  /** The weakest tier a code action may run in: a retry never runs weaker than its original. */
  minTier?: Tier;
  /** How deep in a call tree the action is: 0 for one a caller submitted, n for one a skill called at depth n. */
  depth: number;
  /**
   * Runs another action of the session as a call of this one (a skill's `ctx.call`): recorded with a `CALLED_BY`
   * edge, one level deeper, under the same policies, without waiting for a slot (this action holds its session's).
   */
  call(request: ActionRequest): Promise<NestedCall>;
}

/** A call an action made: its id, and its end (its envelope, or the input refusal that ended it). */
export interface NestedCall {
  id: string;
  completion: Promise<{ result: ActionResult; inputRefusal?: SwitchyardError }>;
}

interface Routed {
  tier: ActionTier;
  risk: RiskAssessment;
  /** The language its code runs in, when the request does not say (a skill's body): what policies match. */
  language?: string;
}

/** Refused when prepared: recorded `denied` with the reasons, never run. */
export interface DeniedAction extends Routed {
  denial: ActionError;
  run?: undefined;
}

/**
 * Ready to run. `run` resolves with an outcome for anything the action itself does or meets (exits, refusals found
 * while running, limits); it rejects only for faults of the engine.
 */
export interface RunnableAction extends Routed {
  denial?: undefined;
  run(signal: AbortSignal): Promise<Outcome>;
}

/** An action checked and routed once, ready to record and then run (or record as denied). */
export type PreparedAction = DeniedAction | RunnableAction;

/**
 * One kind of action (code, file, browser, …). The engine runs every kind through the same steps: prepare → record
 * `running` → run → record the completion → publish events → answer. A new kind is a new handler (registered in
 * `ActionsModule`) plus its DTO; nothing else in the engine changes.
 */
export abstract class ActionHandler<R extends ActionRequest = ActionRequest> {
  abstract readonly type: R['type'];

  /**
   * Validates and routes, once, without side effects. Throws a 4xx-kind `SwitchyardError` (naming the field) for
   * input that must never be recorded; answers a `denial` for a refusal that is recorded.
   */
  abstract prepare(request: R, ctx: ActionContext): PreparedAction;

  /** What the action ran, for the graph and the log: the op for files and browsers, the language for code. */
  abstract operation(request: R): string;

  /** A one-line human summary of the input (unclipped; the engine clips and redacts it). */
  abstract summary(request: R): string;

  /** Frees what this kind holds for a session that ended, after its actions stopped. Idempotent. */
  abstract releaseSession(sessionId: string): Promise<void>;
}

/**
 * A path refused only at execution (a symlink leading out of the workspace): recorded `denied`, and carried to the
 * HTTP edge as the 4xx it would have been if the lexical checks could have seen it.
 */
export function refusedWhileRunning(
  base: Pick<Outcome, 'tier' | 'risk'>,
  err: SwitchyardError & { code: string },
): Outcome {
  const error: ActionError = { class: 'policy', code: err.code, message: err.message };
  return { ...base, status: 'denied', error, files: [], inputRefusal: err };
}

/** Injection token of every registered `ActionHandler`. */
export const ACTION_HANDLERS = Symbol('switchyard:action-handlers');
