/** Shared vocabulary of an action's outcome, used by every tier, the graph and the HTTP API. */

export const ACTION_STATUSES = [
  'running',
  /**
   * Held before it runs: a policy rule asked a person to decide. Approved, it becomes `running`; rejected or
   * expired, it ends `denied`.
   */
  'awaiting_approval',
  'succeeded',
  'failed',
  'timed_out',
  'denied',
  'error',
  /** Stopped on request: a cancel call, its session ending, or the engine shutting down. */
  'cancelled',
  'interrupted',
] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];
/** Statuses an action can end in (everything but `running` and `awaiting_approval`). */
export type FinalActionStatus = Exclude<ActionStatus, 'running' | 'awaiting_approval'>;

/** What an action does; a `skill` is a tool made of other tools (the actions it calls record it as their caller). */
export const ACTION_TYPES = ['code', 'file', 'browser', 'process', 'kernel', 'skill', 'terminal'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];

/** Why the engine itself (not the user's code) failed an action. */
export const ERROR_CLASSES = [
  'validation',
  'policy',
  'timeout',
  'spawn',
  'limit',
  'cancelled',
  'internal',
] as const;
export type ErrorClass = (typeof ERROR_CLASSES)[number];

export interface ActionError {
  class: ErrorClass;
  message: string;
  /** Optional machine code, e.g. `ENOENT`, `OUT_OF_MEMORY`. */
  code?: string;
}

export const RISK_LEVELS = ['low', 'medium', 'high', 'critical'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

export interface RiskAssessment {
  score: number;
  level: RiskLevel;
  reasons: string[];
}

/** The refusal of critical-risk code, worded alike wherever code is assessed (sandbox tiers, page scripts). */
export function criticalRiskDenial(risk: RiskAssessment): ActionError {
  return {
    class: 'policy',
    code: 'RISK_CRITICAL',
    message: `refused: critical risk (score ${risk.score}): ${risk.reasons.join('; ')}`,
  };
}

/** Execution tiers, weakest isolation first. Order matters: a caller may only move right. */
export const TIERS = ['subprocess', 'pooled', 'container'] as const;
export type Tier = (typeof TIERS)[number];
export type TierRequest = 'auto' | Tier;
/** Tier recorded on an action: a sandbox tier, the engine itself (file ops), the browser, or none (refused before routing). */
export type ActionTier = Tier | 'engine' | 'browser' | 'none';

export const LANGUAGES = ['python', 'node', 'bash'] as const;
export type Language = (typeof LANGUAGES)[number];

export interface OutputTruncation {
  stdout: boolean;
  stderr: boolean;
}

/**
 * What a run of code printed and how it exited, as the sandbox tier observed it: output redacted as it streamed
 * (before the caps) and capped. The tier makes it once; the sandbox's outcome and the engine's outcome carry it as
 * `run`, as is, and only the result envelope lays its fields out, flat, for callers.
 */
export interface RunOutput {
  /** Absent when the process did not exit by itself (killed, never started). */
  exitCode?: number;
  stdout: string;
  stderr: string;
  truncated: OutputTruncation;
  /** Secrets were replaced by `***REDACTED***` in stdout or stderr. */
  redacted?: boolean;
}

/** The output of a run that never happened (refused, or failed before its tier started it). */
export const NO_OUTPUT: RunOutput = Object.freeze({
  stdout: '',
  stderr: '',
  truncated: Object.freeze({ stdout: false, stderr: false }),
});

/** A file an action touched, relative to the workspace root. */
export interface FileTouch {
  path: string;
  access: 'read' | 'write';
}

/** One connection a sandbox asked the egress proxy for while the action ran, allowed or refused. */
export interface EgressRecord {
  host: string;
  port: number;
  allowed: boolean;
  /**
   * Why it was refused; on an allowed connection that did not go to the network, where it went (a browser page's
   * `localhost`: `the session's own sandbox port`, and why it could not be opened when it could not).
   */
  reason?: string;
  bytesIn: number;
  bytesOut: number;
}

/** The result envelope, identical for every action type. */
export interface ActionResult {
  id: string;
  sessionId: string;
  type: ActionType;
  status: ActionStatus;
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  output?: unknown;
  truncated: OutputTruncation;
  durationMs: number;
  startedAt: string;
  endedAt?: string;
  tier: ActionTier;
  risk: RiskAssessment;
  error?: ActionError;
  /** Secrets were replaced by `***REDACTED***` somewhere in the output. */
  redacted?: boolean;
  /** The HTTP request that submitted the action (`X-Request-Id`), also on its log line. */
  requestId?: string;
  /**
   * Connections the session's sandboxes asked the egress proxy for while the action ran (sessions with network), and
   * those a browser action's pages made to the session's own ports (`localhost`).
   */
  egress?: EgressRecord[];
  /** What a caller can do about an outcome the engine recognised (e.g. code that met a session without network). */
  hints?: string[];
  /** The checkpoint taken just before it ran (`checkpoint: "before"`): what a retry with `restore: true` restores. */
  checkpoint?: { id: string; createdAt: string };
  /** The checkpoint it put the workspace back to before it ran (a retry with `restore: true`), and how. */
  restored?: RestoredCheckpoint;
  /** What before-action hooks noted on it (their `annotations`), by hook name. */
  annotations?: Record<string, unknown>;
}

/** A restore of the workspace to a checkpoint: entries written back, removed and kept as they were. */
export interface RestoredCheckpoint {
  checkpointId: string;
  copied: number;
  removed: number;
  kept: number;
  /** Bytes actually copied: 0 when every file came back as a copy-on-write reflink. */
  bytesCopied: number;
}

export const NO_RISK: RiskAssessment = Object.freeze({ score: 0, level: 'low', reasons: [] });
