import * as path from 'node:path';
import { SandboxConfigError } from '../sandbox.errors';
import { type Bounds, checkIntegers, type IntegerOption } from '../integer-options';

/** Kernels and background processes (`SandboxModuleOptions.stateful`). */
export interface StatefulOptions {
  /**
   * Host directory of the runner (`docker/sandbox/runner`), bound read-only into a session's subprocess-tier
   * stateful sandbox; the container image has its own copy. Default: none, and the subprocess tier holds no state.
   */
  runnerDir?: string;
  /** A kernel without cells this long is stopped. Default 30 min. */
  kernelIdleMs?: number;
  /** After an interrupt (timeout, cancel), how long a cell may take to stop before its kernel is killed. Default 2 s. */
  interruptGraceMs?: number;
  /** Running background processes per session. Default 8. */
  maxProcessesPerSession?: number;
  /** Output kept per background process. Default 1 MiB. */
  processLogBytes?: number;
  /** A cell's rich result (a display's MIME bundle) inlined at most; beyond it goes to a workspace file. 1 MiB. */
  resultMaxBytes?: number;
  /** All of a cell's rich results inlined at most; beyond it they go to workspace files. Default 4 MiB. */
  cellResultsMaxBytes?: number;
  /** Open terminals per session. Default 4. */
  maxTerminalsPerSession?: number;
  /** A terminal with no client attached and no output this long is closed. Default 15 min. */
  terminalIdleMs?: number;
  /** Output kept per terminal, replayed to a client that attaches. Default 256 KiB. */
  terminalScrollbackBytes?: number;
  /** How refusals name the settings (the engine's env names). */
  settingNames?: { maxProcessesPerSession?: string; maxTerminalsPerSession?: string };
}

export interface ResolvedStatefulOptions {
  runnerDir?: string;
  kernelIdleMs: number;
  interruptGraceMs: number;
  maxProcessesPerSession: number;
  processLogBytes: number;
  resultMaxBytes: number;
  cellResultsMaxBytes: number;
  maxTerminalsPerSession: number;
  terminalIdleMs: number;
  terminalScrollbackBytes: number;
  settingNames: { maxProcessesPerSession: string; maxTerminalsPerSession: string };
}

/** Ranges of the stateful options; declared here only. */
export const STATEFUL_BOUNDS = {
  kernelIdleMs: { min: 1000 },
  interruptGraceMs: { min: 0, max: 60_000 },
  maxProcessesPerSession: { min: 0, max: 1024 },
  processLogBytes: { min: 1024 },
  // The runner passes on a kernel's line of at most 12 MiB: a result of 8 MiB is 10.7 MiB of base64.
  resultMaxBytes: { min: 1024, max: 8 * 1024 * 1024 },
  cellResultsMaxBytes: { min: 1024, max: 64 * 1024 * 1024 },
  maxTerminalsPerSession: { min: 0, max: 256 },
  terminalIdleMs: { min: 1000, max: 7 * 24 * 3_600_000 },
  terminalScrollbackBytes: { min: 1024, max: 64 * 1024 * 1024 },
} as const satisfies Record<string, Bounds>;

export function resolveStatefulOptions(o: StatefulOptions = {}): ResolvedStatefulOptions {
  const resolved: ResolvedStatefulOptions = {
    runnerDir: o.runnerDir,
    kernelIdleMs: o.kernelIdleMs ?? 30 * 60_000,
    interruptGraceMs: o.interruptGraceMs ?? 2000,
    maxProcessesPerSession: o.maxProcessesPerSession ?? 8,
    processLogBytes: o.processLogBytes ?? 1024 * 1024,
    resultMaxBytes: o.resultMaxBytes ?? 1024 * 1024,
    cellResultsMaxBytes: o.cellResultsMaxBytes ?? 4 * 1024 * 1024,
    maxTerminalsPerSession: o.maxTerminalsPerSession ?? 4,
    terminalIdleMs: o.terminalIdleMs ?? 15 * 60_000,
    terminalScrollbackBytes: o.terminalScrollbackBytes ?? 256 * 1024,
    settingNames: {
      maxProcessesPerSession: o.settingNames?.maxProcessesPerSession ?? 'stateful.maxProcessesPerSession',
      maxTerminalsPerSession: o.settingNames?.maxTerminalsPerSession ?? 'stateful.maxTerminalsPerSession',
    },
  };
  checkIntegers(
    (
      [
        'kernelIdleMs',
        'interruptGraceMs',
        'maxProcessesPerSession',
        'processLogBytes',
        'resultMaxBytes',
        'cellResultsMaxBytes',
        'maxTerminalsPerSession',
        'terminalIdleMs',
        'terminalScrollbackBytes',
      ] as const
    ).map((name): IntegerOption => {
      const bounds: Bounds = STATEFUL_BOUNDS[name];
      return [name, resolved[name], bounds.min, bounds.max];
    }),
    'stateful.',
  );
  if (resolved.runnerDir !== undefined && !path.isAbsolute(resolved.runnerDir)) {
    throw new SandboxConfigError('stateful.runnerDir', 'must be an absolute path');
  }
  return resolved;
}
