import type { RunnerExit } from '../src/core/runner/runner-protocol';

/** A run the pooled runner reports as a plain success; specs override what they test. @internal */
export const RUNNER_EXIT_OK: Readonly<RunnerExit> = Object.freeze({
  exitCode: 0,
  signal: null,
  timedOut: false,
  ended: null,
  capped: Object.freeze({ stdout: false, stderr: false }),
  oomKilled: false,
  pidsLimitHit: false,
  leftovers: 0,
  durationMs: 12,
  spawnError: null,
});
