import { STATEFUL_BOUNDS } from '@switchyard/sandbox';
import * as path from 'node:path';
import { IntVar, MiB } from './env-parsing';

/** Session kernels (`state: "session"` code) and background processes (`process` actions). */
export class StatefulEnv {
  /** A kernel without cells this long is stopped (its state is gone; the next cell starts a fresh one). */
  @IntVar(STATEFUL_BOUNDS.kernelIdleMs.min, 7 * 24 * 3_600_000)
  SWITCHYARD_KERNEL_IDLE_MS = 30 * 60_000;

  /**
   * After a cell's timeout or cancel interrupts it, how long it may take to stop before its kernel is killed (and its
   * state lost).
   */
  @IntVar(STATEFUL_BOUNDS.interruptGraceMs.min, STATEFUL_BOUNDS.interruptGraceMs.max)
  SWITCHYARD_KERNEL_INTERRUPT_GRACE_MS = 2000;

  /** Background processes running at once per session. */
  @IntVar(STATEFUL_BOUNDS.maxProcessesPerSession.min, STATEFUL_BOUNDS.maxProcessesPerSession.max)
  SWITCHYARD_MAX_PROCESSES = 8;

  /** Output kept per background process for `logs` (the oldest goes first). */
  @IntVar(STATEFUL_BOUNDS.processLogBytes.min, 1024 * MiB)
  SWITCHYARD_PROCESS_LOG_BYTES = 1 * MiB;

  /**
   * A kernel cell's rich result (one displayed MIME bundle: a chart's PNG, a table's HTML) is inlined in
   * `output.results` up to this size; a bigger one is written to the session's workspace (`.switchyard/results/`)
   * and the result names the file.
   */
  @IntVar(STATEFUL_BOUNDS.resultMaxBytes.min, STATEFUL_BOUNDS.resultMaxBytes.max)
  SWITCHYARD_RESULT_MAX_BYTES = 1 * MiB;

  /** All of a cell's rich results are inlined up to this size; the ones past it are written to workspace files. */
  @IntVar(STATEFUL_BOUNDS.cellResultsMaxBytes.min, STATEFUL_BOUNDS.cellResultsMaxBytes.max)
  SWITCHYARD_CELL_RESULTS_MAX_BYTES = 4 * MiB;

  /** Open terminals (`POST /v1/sessions/{id}/terminals`) per session; one more is answered 429 TERMINAL_LIMIT. */
  @IntVar(STATEFUL_BOUNDS.maxTerminalsPerSession.min, STATEFUL_BOUNDS.maxTerminalsPerSession.max)
  SWITCHYARD_MAX_TERMINALS_PER_SESSION = 4;

  /** A terminal with no client attached to its WebSocket and no output for this long is closed. */
  @IntVar(STATEFUL_BOUNDS.terminalIdleMs.min / 1000, STATEFUL_BOUNDS.terminalIdleMs.max / 1000)
  SWITCHYARD_TERMINAL_IDLE_SECONDS = 900;

  /** Output kept per open terminal, replayed to a client that attaches (or reconnects); the oldest goes first. */
  @IntVar(STATEFUL_BOUNDS.terminalScrollbackBytes.min, STATEFUL_BOUNDS.terminalScrollbackBytes.max)
  SWITCHYARD_TERMINAL_SCROLLBACK_BYTES = 256 * 1024;
}

export interface StatefulConfig {
  /** The runner the subprocess tier's stateful sandboxes run (the container image carries its own copy). */
  runnerDir: string;
  kernelIdleMs: number;
  interruptGraceMs: number;
  maxProcessesPerSession: number;
  processLogBytes: number;
  resultMaxBytes: number;
  cellResultsMaxBytes: number;
  maxTerminalsPerSession: number;
  terminalIdleMs: number;
  terminalScrollbackBytes: number;
}

/** The runner directory is the checkout's (relative to `cwd`, like the sandbox image's tag file). */
export function statefulConfig(env: StatefulEnv, cwd: string): StatefulConfig {
  return {
    runnerDir: path.resolve(cwd, 'docker', 'sandbox', 'runner'),
    kernelIdleMs: env.SWITCHYARD_KERNEL_IDLE_MS,
    interruptGraceMs: env.SWITCHYARD_KERNEL_INTERRUPT_GRACE_MS,
    maxProcessesPerSession: env.SWITCHYARD_MAX_PROCESSES,
    processLogBytes: env.SWITCHYARD_PROCESS_LOG_BYTES,
    resultMaxBytes: env.SWITCHYARD_RESULT_MAX_BYTES,
    cellResultsMaxBytes: env.SWITCHYARD_CELL_RESULTS_MAX_BYTES,
    maxTerminalsPerSession: env.SWITCHYARD_MAX_TERMINALS_PER_SESSION,
    terminalIdleMs: env.SWITCHYARD_TERMINAL_IDLE_SECONDS * 1000,
    terminalScrollbackBytes: env.SWITCHYARD_TERMINAL_SCROLLBACK_BYTES,
  };
}
