import type { TierRunResult } from '../sandbox.types';
import { signalExit } from '../supervision/exit-status';
import { enforcedLimit, type LimitSettings } from '../supervision/limit-messages';
import type { RunSupervisor } from '../supervision/run-supervisor';
import type { RunnerExit } from './runner-protocol';

const SIGXCPU_EXIT = signalExit('SIGXCPU');
const SIGXFSZ_EXIT = signalExit('SIGXFSZ');

/**
 * A fresh run's result from the runner's `exit` event and what the supervisor collected: the same for every tier that
 * runs code through a runner (Docker's pooled containers, Kubernetes pods). `settings` name the tier's limits in the
 * messages.
 */
export function runnerResult(
  exit: RunnerExit,
  supervisor: RunSupervisor,
  settings: LimitSettings,
): TierRunResult {
  const collected = supervisor.collected();
  const result: TierRunResult = {
    ...collected,
    timedOut: exit.timedOut,
    truncated: {
      stdout: collected.truncated.stdout || exit.capped.stdout,
      stderr: collected.truncated.stderr || exit.capped.stderr,
    },
  };
  if (exit.exitCode !== null) result.exitCode = exit.exitCode;
  if (exit.signal !== null) result.signal = exit.signal;
  if (exit.ahead) result.startedAhead = true;
  if (supervisor.reason === 'abort') result.aborted = true;
  if (exit.spawnError) {
    result.spawnError = exit.spawnError;
    return result;
  }
  // bash reports a child killed by signal n as exit 128 + n.
  const limit = enforcedLimit(
    result,
    {
      oomKilled: exit.oomKilled,
      outputCapped:
        supervisor.reason === 'output' || exit.ended === 'output' || exit.capped.stdout || exit.capped.stderr,
      cpuTime: result.signal === 'SIGXCPU' || exit.exitCode === SIGXCPU_EXIT,
      fileSize: result.signal === 'SIGXFSZ' || exit.exitCode === SIGXFSZ_EXIT,
      pidsLimitHit: exit.pidsLimitHit,
    },
    settings,
  );
  if (limit) result.limit = limit;
  return result;
}
