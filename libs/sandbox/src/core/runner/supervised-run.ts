import type { Clock } from '@switchyard/common';
import type { TierJob, TierRunResult } from '../sandbox.types';
import { RunSupervisor } from '../supervision/run-supervisor';
import type { RunnerConnection } from './runner-connection';
import type { RunnerExit, RunnerRunRequest } from './runner-protocol';

/** The runner may forward this much past the byte cap, so redaction (which can shorten text) still sees enough. */
export const CAP_SLACK_BYTES = 64 * 1024;

/** Where and how a box's runner runs one job. */
export interface SupervisedRunTarget {
  /** The job's environment as the box needs it (a call socket's path added, say). */
  env: Record<string, string>;
  /** Device and inode of the session workspace; the runner refuses the run when /workspace is another directory. */
  workspace: [dev: string, ino: string];
  /** How long past the job's timeout the runner may take to answer before the run counts as hung. */
  graceMs: number;
  signal?: AbortSignal;
  /** The job's interpreter inside the box, when not the runner's default. */
  interpreter?: string;
  /** The runner walks the workspace once the run ended and sends the snapshot with the exit (`RunnerExit.snapshot`). */
  snapshot?: RunnerRunRequest['snapshot'];
  /** A run nested in the one under way in the box (`RunnerRunRequest.nested`). */
  nested?: boolean;
  /** Keep a python started ahead for the box's next run (`RunnerRunRequest.standby`): a box that lives on. */
  standby?: boolean;
}

/** How the owner of the box answers what went wrong, while the run is still supervised. */
export interface SupervisedRunHooks {
  /** The run's exit was rejected (runner lost, run refused): the tier's answer, or its error. */
  failed(err: unknown): Promise<TierRunResult>;
  /** The run ended, however it ended, and its supervision stopped: for what must end with it (a call channel). */
  finished?(): Promise<void>;
}

/**
 * One `TierJob` through a box's runner (docker/sandbox/runner/runner.py), as the Docker pooled tier and the Kubernetes
 * tiers run it: the runner enforces the timeout and output caps and kills everything the run started; the engine
 * keeps the exact caps and redaction (`RunSupervisor`), the caller's abort, and a hard deadline of timeout + grace.
 * Make one per run: its `supervisor` is there for the owner's checks before the job is sent.
 */
export class SupervisedRun {
  readonly supervisor: RunSupervisor;
  private runId?: number;

  constructor(
    private readonly connection: RunnerConnection,
    private readonly job: TierJob,
    clock: Clock,
    startedAt: number,
  ) {
    this.supervisor = new RunSupervisor({
      job,
      clock,
      startedAt,
      // Past a cap the rest is unwanted, so the run ends now (the runner kills everything it started).
      kill: () => {
        if (this.runId !== undefined) connection.kill(this.runId);
      },
    });
  }

  /**
   * Sends the job and waits for the runner's exit, or `'hung'` when none came within timeout + grace; a rejected
   * exit is answered by `hooks.failed`, whose result is then the run's (`{ result }`).
   */
  async send(
    target: SupervisedRunTarget,
    hooks: SupervisedRunHooks,
  ): Promise<{ exit: RunnerExit | 'hung' } | { result: TierRunResult }> {
    const { job, supervisor } = this;
    const { id, exit } = this.connection.run(
      {
        language: job.language,
        ...(target.interpreter !== undefined && { interpreter: target.interpreter }),
        code: job.code,
        ...(job.stdin !== undefined && { stdin: job.stdin }),
        env: target.env,
        timeoutMs: job.timeoutMs,
        cpuSeconds: Math.ceil(job.timeoutMs / 1000) + 1,
        capBytes: job.output.maxBytes + CAP_SLACK_BYTES,
        capLines: job.output.maxLines,
        workspace: target.workspace,
        ...(target.snapshot && { snapshot: target.snapshot }),
        ...(target.nested && { nested: true }),
        ...(target.standby && { standby: true }),
      },
      (fd, data, id) => {
        // Output may arrive before `run` returns (the runner can answer within the write): the id comes with it.
        this.runId = id;
        supervisor.push(fd === 2 ? 'stderr' : 'stdout', data);
      },
    );
    this.runId = id;
    // The runner enforces the timeout itself; the supervisor watches the caller's abort only.
    supervisor.watch({ ...(target.signal && { signal: target.signal }) });
    let deadline: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => {
      deadline = setTimeout(() => resolve('hung'), job.timeoutMs + target.graceMs);
    });
    try {
      return { exit: await Promise.race([exit, hung]) };
    } catch (err) {
      return { result: await hooks.failed(err) };
    } finally {
      clearTimeout(deadline);
      supervisor.stop();
      await hooks.finished?.();
    }
  }
}
