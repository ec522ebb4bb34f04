import type { LaunchedProcess, LaunchSpec } from '@switchyard/common';

export type { LaunchedProcess, LaunchSpec, ProcessExit } from '@switchyard/common';

/** Port for starting processes, so the subprocess tier can be tested with a fake. */
export abstract class ProcessLauncher {
  abstract launch(spec: LaunchSpec): LaunchedProcess;
  /**
   * Kills processes launched by engines that are no longer running (found by the engine mark in their
   * environment, see `ENGINE_MARK_ENV`); returns their pids. Default: none to find.
   */
  reapOrphans(): number[] {
    return [];
  }
}
