import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { RunnerLostError } from '../../core/pooled.errors';
import { SandboxInternalError } from '../../core/sandbox.errors';
import { RunnerRefusedError } from '../../core/runner/runner.errors';
import { runnerResult } from '../../core/runner/runner-result';
import { SupervisedRun } from '../../core/runner/supervised-run';
import type { ResolvedSandboxOptions } from '../../core/sandbox.options';
import type { TierJob, TierRunResult } from '../../core/sandbox.types';
import { emptyResult, formatBytes, outOfMemory } from '../../core/supervision/limit-messages';
import type { RunSupervisor } from '../../core/supervision/run-supervisor';
import type { SubprocessBox } from './subprocess-boxes';

/** How long past a run's timeout the box's runner may take to answer before the box counts as hung. */
const RUNNER_GRACE_MS = 5_000;

/**
 * Fresh runs of a session inside its stateful sandbox, while that sandbox holds a running kernel or background
 * process: the run shares their network namespace, so it reaches the servers they started on 127.0.0.1, as it would
 * in the session's pooled container. The confinement is the tier's (the box is a bubblewrap sandbox with the same
 * namespaces, uid, read-only system and rlimits, in a cgroup of the tier's limits under the session's group); the
 * box's runner gives the run a fresh interpreter with exactly its environment, its CPU-time limit and timeout, and
 * kills whatever the run left (never the kernels and processes). Runs of one box go one at a time, as the runner
 * takes them.
 */
export class BoxRuns {
  private readonly tails = new WeakMap<SubprocessBox, Promise<unknown>>();

  constructor(
    private readonly options: ResolvedSandboxOptions,
    private readonly clock: Clock,
    /** Ends a box whose runner stopped answering; the next action of the session starts afresh. */
    private readonly discard: (box: SubprocessBox, why: string) => Promise<void>,
    private readonly logger: Logger,
  ) {}

  run(box: SubprocessBox, job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = this.clock.monotonic();
    // The box stays open while a run waits for its turn or runs, even if its last process ends meanwhile.
    const unpin = box.pin();
    const turn = (this.tails.get(box) ?? Promise.resolve()).then(() =>
      this.runNow(box, job, signal, started),
    );
    this.tails.set(
      box,
      turn.catch(() => undefined),
    );
    return turn.finally(unpin);
  }

  private async runNow(
    box: SubprocessBox,
    job: TierJob,
    signal: AbortSignal | undefined,
    started: number,
  ): Promise<TierRunResult> {
    const run = new SupervisedRun(box.connection, job, this.clock, started);
    const { supervisor } = run;
    if (signal?.aborted) return { ...emptyResult(supervisor.elapsedMs()), aborted: true };
    if (box.gone) return this.lost(box, job, new Error('the sandbox had ended'), supervisor);
    // OOM kills before this run are not its own.
    box.oomKilledSinceLastCheck?.();
    const interpreter = box.interpreters[job.language];
    const sent = await run.send(
      {
        env: job.env,
        workspace: box.workspace,
        graceMs: RUNNER_GRACE_MS,
        ...(signal && { signal }),
        ...(interpreter !== undefined && { interpreter }),
      },
      { failed: (err) => this.lost(box, job, err as Error, supervisor) },
    );
    if ('result' in sent) return sent.result;
    if (sent.exit === 'hung') {
      await this.discard(box, `its runner did not finish ${job.actionId} within its timeout`);
      throw new RunnerLostError(
        'RUNNER_UNRESPONSIVE',
        `the runner of the session's stateful sandbox did not finish the run within its timeout + ` +
          `${RUNNER_GRACE_MS} ms; the sandbox was ended with its kernels and processes (workspace kept)`,
      );
    }
    const s = this.options.subprocess;
    const oomKilled = sent.exit.oomKilled || box.oomKilledSinceLastCheck?.() === true;
    return runnerResult({ ...sent.exit, oomKilled }, supervisor, {
      memory: `the session's stateful sandbox's ${formatBytes(s.memoryBytes)} limit`,
      output: job.output,
      fileSizeBytes: s.fileSizeBytes,
      pids: s.pids,
    });
  }

  /** The box's runner died during the run: out of memory is the run's outcome, anything else an engine fault. */
  private async lost(
    box: SubprocessBox,
    job: TierJob,
    err: Error,
    supervisor: RunSupervisor,
  ): Promise<TierRunResult> {
    if (err instanceof RunnerRefusedError) {
      throw new SandboxInternalError(
        'RUN_REFUSED',
        `the session's stateful sandbox refused the run: ${err.message}`,
        {
          retriable: true,
          cause: err,
        },
      );
    }
    // The runner is gone: its box ends with it (the OOM count is read as it closes).
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([box.closed, new Promise((resolve) => (timer = setTimeout(resolve, 2_000)))]);
    clearTimeout(timer);
    if (box.oomKilledSinceLastCheck?.() === true) {
      return {
        ...supervisor.collected(),
        signal: 'SIGKILL',
        limit: outOfMemory(
          `the session's stateful sandbox's ${formatBytes(this.options.subprocess.memoryBytes)} limit and ` +
            'took the sandbox down with its kernels and processes (workspace kept)',
        ),
      };
    }
    this.logger.warn(`stateful sandbox of ${job.sessionId} lost during ${job.actionId}: ${err.message}`);
    throw new RunnerLostError(
      'RUNNER_LOST',
      `the session's stateful sandbox stopped during the run (${err.message}); its kernels and processes ended ` +
        'with it (workspace kept)',
      {},
      { cause: err },
    );
  }
}
