import type {
  ActionError,
  DisplayResult,
  Language,
  RiskAssessment,
  RiskLevel,
  RunOutput,
  Tier,
  TierRequest,
} from '@switchyard/common';
import type { CodeState, KernelRef } from './stateful/kernel-ref';

/** What a code action asks for, as its caller sent it. */
export interface CodeSpec {
  language: Language;
  code: string;
  stdin?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
  /** `auto` (the default) lets the risk policy choose; a stronger tier may be asked for, never a weaker one. */
  tier?: TierRequest;
  /** `session`: run in the session's kernel for the language, keeping state between actions. Default `fresh`. */
  state?: CodeState;
}

/**
 * A session's way out, when its network policy allows any: the engine's egress proxy for the session, reached over a
 * Unix socket in a directory only the session's sandbox sees. Only the container tiers get it.
 */
export interface SessionEgressAccess {
  /** Host directory holding the proxy's socket `proxy.sock` (one-off containers mount it read-only). */
  socketDir: string;
  /** The proxy answers at `socketPath` too (a pooled container's own directory) until the returned stop. */
  listen(socketPath: string): Promise<() => Promise<void>>;
}

/**
 * A way back to the engine for the code of one action (a skill's `ctx.call`): a Unix socket in a directory only that
 * action's sandbox sees, never the network. The tier puts its path inside the sandbox in the child's environment as
 * SWITCHYARD_CALL_SOCKET. Its sockets must accept any user (mode 0666, in a directory of mode 0755): the sandbox
 * user is not the engine's.
 */
export interface CallChannel {
  /** Host directory holding the channel's socket `call.sock` (one-off containers and bubblewrap sandboxes mount it read-only at /run/switchyard-call). */
  socketDir: string;
  /** The channel also answers at `socketPath` (a pooled container's own directory) until the returned stop. */
  listen(socketPath: string): Promise<() => Promise<void>>;
}
export const CALL_SOCKET_ENV = 'SWITCHYARD_CALL_SOCKET';

/**
 * A session's own image for the container tiers (a sandbox template's), instead of the default sandbox image: the
 * template's packages exist only there.
 */
export interface SessionImage {
  /** Image reference both container tiers create the session's containers from. */
  ref: string;
  /**
   * The template's environment, set for every run in it under the caller's own entries (the pooled runner starts
   * children with exactly the request's environment, not the image's).
   */
  env: Record<string, string>;
}

/** A code action as the engine hands it to the sandbox manager. */
export interface CodeRequest extends CodeSpec {
  actionId: string;
  sessionId: string;
  /** Absolute host path of the session's workspace. */
  workspaceDir: string;
  /** The session's egress, when its network policy allows any (container tiers only). */
  egress?: SessionEgressAccess;
  /** The session's image, in every tier (the subprocess tier on its exported root); the default image when absent. */
  image?: SessionImage;
  /** This action's way back to the engine (every tier; fresh runs only: a kernel cell cannot have one). */
  channel?: CallChannel;
}

/** Where the policy sends a request, decided before anything runs. */
export interface RoutingDecision {
  risk: RiskAssessment;
  /** The tier the action will run in, or the tier it was refused for. `undefined` for critical risk. */
  tier?: Tier;
  /** Set when the action must not run; the action is recorded as `denied`. */
  denial?: ActionError;
}

/**
 * A code request validated and routed once, by `SandboxManager.prepare`. Later stages take it as it is: nothing
 * re-validates, re-scores or re-routes it.
 */
export interface RoutedCode extends RoutingDecision {
  request: CodeRequest;
  /** The run's wall-clock limit: the request's (or the default), within the routed tier's maximum. */
  timeoutMs: number;
  /** The child's final environment: the allowlisted base plus the request's validated entries. */
  env: Record<string, string>;
  /** The request's own validated entries (a kernel gets them per cell, on top of the base it started with). */
  callerEnv: Record<string, string>;
}

/** A routed request that may run: it has a tier and no denial. */
export type RunnableCode = RoutedCode & { tier: Tier; denial?: undefined };

export const isRunnable = (routed: RoutedCode): routed is RunnableCode =>
  routed.tier !== undefined && routed.denial === undefined;

/**
 * What a code action produced: the tier's run output as is (`run`), and what the manager decided of it. A non-zero
 * exit is `failed`, not an error.
 */
export interface CodeOutcome {
  /** `cancelled`: a kernel cell stopped by an interrupt request (the kernel keeps its state). */
  status: 'succeeded' | 'failed' | 'timed_out' | 'denied' | 'error' | 'cancelled';
  tier?: Tier;
  risk: RiskAssessment;
  /** What the code printed and how it exited: the tier's own result (`NO_OUTPUT` when nothing ran). */
  run: RunOutput;
  error?: ActionError;
  /** Set when the code ran in a container (pooled or one-off). */
  containerId?: string;
  /** The Docker runtime of that container when the tier chose one (one-off: `runsc` for gVisor, or `runc`). */
  runtime?: string;
  durationMs: number;
  /** `state: "session"`: the kernel that ran the cell (`stateLost` when it died during the cell). */
  kernel?: KernelRef & { stateLost?: boolean };
  /** `state: "session"`: the repr of the cell's last expression, when it has one. */
  result?: string;
  /** `state: "session"`: what the cell displayed, in order (Jupyter MIME bundles). */
  results?: DisplayResult[];
  /** `state: "session"`: why the cell ran in another kernel than the session's existing one of its language. */
  note?: string;
}

/** One run handed to a tier, already validated and routed. */
export interface TierJob {
  actionId: string;
  sessionId: string;
  language: Language;
  code: string;
  stdin?: string;
  /** Final environment for the child: allowlisted base plus the caller's validated entries. */
  env: Record<string, string>;
  timeoutMs: number;
  workspaceDir: string;
  /** The session's egress (container tiers): the environment already names the proxy. */
  egress?: SessionEgressAccess;
  /** The image to run in (the subprocess tier runs its exported root): a template's; the default image when absent. */
  image?: string;
  /** This run's way back to the engine: the tier makes its socket reachable and names it in `CALL_SOCKET_ENV`. */
  channel?: CallChannel;
  output: OutputLimits;
  /**
   * Called with decoded output as it arrives (only what fits within `output`), so a caller can stream it
   * live. Must not throw; it runs on the tier's read path.
   */
  onOutput?: (stream: 'stdout' | 'stderr', chunk: string) => void;
}

export interface OutputLimits {
  /** Per stream. */
  maxBytes: number;
  /** Per stream. */
  maxLines: number;
  /** Secret patterns replaced by `***REDACTED***` before the caps apply (matched within a line). */
  redact?: readonly RegExp[];
}

/**
 * What a tier observed: the run's output, and how the run ended. The manager judges it into a `CodeOutcome`, which
 * keeps it as its `run`.
 */
export interface TierRunResult extends RunOutput {
  signal?: string;
  timedOut: boolean;
  /** A limit the tier enforced that ended the run (output cap hit, out of memory, …). */
  limit?: { code: 'OUTPUT_CAP' | 'OUT_OF_MEMORY' | 'CPU_TIME' | 'FILE_SIZE' | 'PIDS'; message: string };
  /** The interpreter could not be started at all. */
  spawnError?: string;
  /** The caller's `AbortSignal` fired and the run was killed. */
  aborted?: boolean;
  /** The container the run used (container tiers), for the graph's `Sandbox` node. */
  containerId?: string;
  /** The Docker runtime of that container, when the tier chose one (`runsc`, `runc`). */
  runtime?: string;
  /**
   * The run's sandbox was started before the run asked: one-off tier, its container (`AheadContainers`); pooled tiers,
   * its python interpreter (`RunnerRunRequest.standby`).
   */
  startedAhead?: boolean;
  durationMs: number;
}

export interface TierAvailability {
  available: boolean;
  /** Why not, in words an operator can act on. */
  reason?: string;
  /** Why not, for code that tells causes apart (readiness): `DOCKER_UNAVAILABLE`, `SANDBOX_IMAGE_MISSING`, … */
  code?: string;
  /** What the tier found when probing (limits in force, interpreters, …), for operators. */
  details?: Record<string, unknown>;
}

export interface RiskThresholds {
  /** Scores at or above each threshold take that level. */
  medium: number;
  high: number;
  critical: number;
}

export type TierForLevel = Record<Exclude<RiskLevel, 'critical'>, Tier>;
