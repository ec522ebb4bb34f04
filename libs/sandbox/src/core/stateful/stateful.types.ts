import type { DisplayResult, Language } from '@switchyard/common';
import type { OutputLimits, RoutingDecision, SessionEgressAccess, TierRunResult } from '../sandbox.types';
import { isStatefulTier, type KernelRef, type StatefulTier } from './kernel-ref';

export {
  CODE_STATES,
  isStatefulTier,
  STATEFUL_TIERS,
  type CodeState,
  type KernelRef,
  type StatefulTier,
} from './kernel-ref';

/** A routing decision that may run in a session's stateful sandbox: no denial, a tier that holds state. */
export const isStatefulDecision = (
  d: RoutingDecision,
): d is RoutingDecision & { tier: StatefulTier; denial: undefined } =>
  d.denial === undefined && d.tier !== undefined && isStatefulTier(d.tier);

/** A live kernel of a session (`GET …/kernels`). */
export interface KernelInfo {
  id: string;
  sessionId: string;
  language: Language;
  tier: StatefulTier;
  executionCount: number;
  /** A cell is running. */
  busy: boolean;
  pid?: number;
  startedAt: string;
  lastUsedAt: string;
}

/** Why a kernel ended. */
export type KernelEndReason = 'restarted' | 'stopped' | 'died' | 'idle' | 'session_ended' | 'shutdown';

/** One cell for the session's kernel of its language, already validated and routed. */
export interface CellJob {
  actionId: string;
  sessionId: string;
  language: Language;
  code: string;
  /** The caller's own environment entries (validated), applied in the kernel before the cell; they persist. */
  env: Record<string, string>;
  /** The base environment a kernel starts with (the tier's allowlist for the language). */
  baseEnv: Record<string, string>;
  timeoutMs: number;
  /** The tier the risk policy routed the cell to: it never runs in a weaker one. */
  tier: StatefulTier;
  /** The caller asked for this tier explicitly: run there, not in a stronger kernel that already exists. */
  tierExplicit: boolean;
  workspaceDir: string;
  /** The session's egress (pooled kernels reach it; `baseEnv` names the proxy). */
  egress?: SessionEgressAccess;
  /** The session's image (a template's) when its pooled box is created; `baseEnv` holds the template's env. */
  image?: string;
  output: OutputLimits;
  onOutput?: (stream: 'stdout' | 'stderr', chunk: string) => void;
}

/** What running a cell observed: a tier run's result, plus the kernel, the last expression's value and state loss. */
export interface CellRunResult extends TierRunResult {
  kernel: KernelRef;
  /** repr (python) / util.inspect (node) of the cell's last expression; absent when it has none. */
  result?: string;
  /** What the cell displayed, in order (python, node; none in bash); absent when the runner answered nothing. */
  results?: DisplayResult[];
  /** The kernel was killed during the cell (timeout that would not stop, out of memory, exit): its state is gone. */
  stateLost?: boolean;
  /** The cell was stopped by an interrupt request: state kept. */
  interrupted?: boolean;
  /** The cell raised (python, node): its exception's name and message; the traceback is on stderr. */
  exception?: { name: string; message: string };
  /** Why the session's existing kernel of this language did not run the cell (it is in a weaker tier). */
  note?: string;
}

/** A background process to start in a session's stateful sandbox. */
export interface ProcessStart {
  actionId: string;
  sessionId: string;
  name?: string;
  command: string;
  /** Relative to the workspace root (validated by the caller). Default: the root. */
  cwd?: string;
  /** The caller's own environment entries (validated). */
  env: Record<string, string>;
  baseEnv: Record<string, string>;
  tier: StatefulTier;
  workspaceDir: string;
  egress?: SessionEgressAccess;
  /** The session's image (a template's) when its pooled box is created. */
  image?: string;
}

/** A background process of a session (`process` actions, op `list`). */
export interface ProcessInfo {
  id: string;
  sessionId: string;
  name?: string;
  command: string;
  tier: StatefulTier;
  pid?: number;
  startedAt: string;
  running: boolean;
  endedAt?: string;
  exitCode?: number;
  signal?: string;
  /** Why it ended when the engine ended it: `stopped`, `session_ended`, `sandbox_lost`, `shutdown`. */
  endReason?: string;
}

/** One piece of a process's output, numbered in the order the engine received it. */
export interface ProcessLogEntry {
  seq: number;
  stream: 'stdout' | 'stderr';
  text: string;
}

/** What the stateful sandboxes report as it happens, for SSE and the logs. */
export interface StatefulListener {
  kernelStarted?(info: KernelInfo): void;
  kernelEnded?(info: KernelInfo, reason: KernelEndReason): void;
  processOutput?(info: ProcessInfo, entry: ProcessLogEntry): void;
  processExited?(info: ProcessInfo): void;
}

/** A terminal to open in a session's stateful sandbox: a PTY running a login bash (or `command`). */
export interface TerminalOpen {
  /** Its id (`trm_` and 16 hex digits), when the caller made it ahead (to name it before it opens); else one is made. */
  id?: string;
  sessionId: string;
  cols: number;
  rows: number;
  /** Relative to the workspace root (validated by the caller). Default: the root. */
  cwd?: string;
  /** Run instead of a login shell, by `bash -c`; the terminal ends with it. */
  command?: string;
  /** The caller's own environment entries (validated). */
  env: Record<string, string>;
  baseEnv: Record<string, string>;
  tier: StatefulTier;
  workspaceDir: string;
  egress?: SessionEgressAccess;
  /** The session's image (a template's) when its pooled box is created. */
  image?: string;
}

/** Why a terminal ended: its shell exited, a client closed it, nobody used it, or the engine ended it. */
export type TerminalEndReason = 'exited' | 'closed' | 'idle' | 'session_ended' | 'sandbox_lost' | 'shutdown';

/** A terminal of a session, open or ended (`GET …/terminals`). */
export interface TerminalInfo {
  id: string;
  sessionId: string;
  tier: StatefulTier;
  status: 'open' | 'closed';
  cols: number;
  rows: number;
  /** As asked for, relative to the workspace root (`""`: the root). */
  cwd: string;
  command?: string;
  pid?: number;
  createdAt: string;
  /** Bytes typed into it (all clients) and written out of it. */
  bytesIn: number;
  bytesOut: number;
  /** Clients attached now. */
  clients: number;
  endedAt?: string;
  exitCode?: number;
  signal?: string;
  endReason?: TerminalEndReason;
}
