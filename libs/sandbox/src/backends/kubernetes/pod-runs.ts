import { type Language, SESSION_HOME } from '@switchyard/common';
import { withCallSocket } from '../../core/call-channel';
import { type RunnerExit } from '../../core/runner/runner-protocol';
import { RunnerRefusedError } from '../../core/runner/runner.errors';
import { runnerResult } from '../../core/runner/runner-result';
import type { TierJob, TierRunResult } from '../../core/sandbox.types';
import { emptyResult, formatBytes, outOfMemory } from '../../core/supervision/limit-messages';
import type { RunSupervisor } from '../../core/supervision/run-supervisor';
import { SupervisedRun } from '../../core/runner/supervised-run';
import type { Clock } from '@switchyard/common';
import type { PodChannels } from './pod-channels';
import type { PodRunner } from './pod-runner';
import type { RunnerLoss } from './runner-recovery';

/** No line cap for raw runs (a tar stream has newlines anywhere). */
const NO_LINE_CAP = 2 ** 31 - 1;

/** The pod a run goes to: its runner, the workspace it must see, and what to do when things go wrong. */
export interface RunTarget {
  readonly podName: string;
  readonly runner: PodRunner;
  readonly workspace: [dev: string, ino: string];
  /** The run's pod is going away (session released, tier shutting down): a failure then is an abort. */
  gone(): boolean;
  /** The runner's connection closed during the run: how its container ended (and whatever the owner does then). */
  lost(err: Error): Promise<RunnerLoss | undefined>;
  /** The runner did not answer within the run's timeout + grace; the owner restarts or drops it, then this throws. */
  hung(): Promise<never>;
  /** The runner refused the run because /workspace is not the expected one; throws. */
  workspaceNotVisible(err: RunnerRefusedError): Promise<never>;
  /** Throws the error that tells the caller the runner was lost (not an out-of-memory). */
  lostError(err: Error, loss: RunnerLoss | undefined): Error;
  /** A tier run's snapshot after it, walked by the runner with these bounds (`RunnerRunRequest.snapshot`)… */
  readonly walkAfter?: { maxEntries: number; maxScanEntries: number };
  /** …and what it answered, for the workspaces' next snapshot (`SessionPods.snapshot`). */
  walked?(answer: Record<string, unknown>): void;
  /**
   * Runs here are nested in the run under way (`RunnerRunRequest.nested`): the calls of the action whose run holds
   * the pod (`SessionPods.withPod`).
   */
  readonly nested?: boolean;
}

export interface PodRunLimits {
  memoryBytes: number;
  fileSizeBytes: number;
  /** The pod's memory limit in words, e.g. "the pod's 512 MiB limit". */
  memoryWords: string;
}

/** A fresh run's request through `runRaw`: output as bytes, capped per stream. */
export interface RawRunRequest {
  language: Language;
  code: string;
  /** Text for the code's stdin (the runner's protocol carries text: binary goes base64-encoded). */
  stdin?: string;
  timeoutMs: number;
  /** Per stream; past it the run ends and `capped` says so. */
  capBytes: number;
  env?: Record<string, string>;
}

export interface RawRunResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  oomKilled: boolean;
  capped: { stdout: boolean; stderr: boolean };
  stdout: Buffer;
  stderr: Buffer;
  durationMs: number;
}

const RAW_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: SESSION_HOME };

/**
 * Runs through a pod's runner (docker/sandbox/runner/runner.py), a `TierJob` as a `SupervisedRun` like the Docker
 * pooled tier's, with a hard deadline of timeout + `graceMs`; raw runs for the file API and workspace copies; and the
 * workspace snapshots the runner walks itself. A job's egress and call channel reach the pod over the runner's attach
 * stream (`PodChannels`).
 */
export class PodRuns {
  constructor(
    private readonly clock: Clock,
    private readonly graceMs: number,
    readonly channels: PodChannels,
  ) {}

  /**
   * A `TierJob` in the target pod. `started`: when the action reached the tier, so `durationMs` includes the claim.
   * `standby`: the pod lives on (a session pod), so the runner keeps a python started for its next run.
   */
  async run(
    target: RunTarget,
    job: TierJob,
    limits: PodRunLimits,
    signal: AbortSignal | undefined,
    started: number,
    standby = false,
  ): Promise<TierRunResult> {
    const run = new SupervisedRun(target.runner.connection, job, this.clock, started);
    const { supervisor } = run;
    if (target.gone() || signal?.aborted) return { ...emptyResult(supervisor.elapsedMs()), aborted: true };
    const connection = target.runner.connection;
    if (job.egress) await this.channels.ensureEgress(connection, job.egress);
    const call = job.channel && (await this.channels.openCall(connection, job.actionId, job.channel));
    const sent = await run.send(
      {
        env: withCallSocket(job.env, call?.inside),
        workspace: target.workspace,
        graceMs: this.graceMs,
        ...(signal && { signal }),
        ...(target.walkAfter && { snapshot: target.walkAfter }),
        ...(target.nested && { nested: true }),
        ...(standby && { standby: true }),
      },
      {
        // However the run ended (exit, timeout, kill, runner lost, hung), its channel ends with it.
        finished: async () => {
          await call?.close();
        },
        failed: (err) => {
          if (target.gone()) return Promise.resolve({ ...supervisor.collected(), aborted: true });
          if (err instanceof RunnerRefusedError && err.code === 'workspace')
            return target.workspaceNotVisible(err);
          return this.runnerLost(target, err as Error, supervisor, limits);
        },
      },
    );
    if ('result' in sent) return sent.result;
    const outcome = sent.exit;
    if (outcome === 'hung') return target.hung();
    if (outcome.oomKilled) target.runner.oomSeen = true;
    if (outcome.restarting) target.runner.close(); // the next use waits for the restarted runner
    if (outcome.snapshot) target.walked?.(outcome.snapshot);
    return toResult(outcome, supervisor, job, limits);
  }

  /** A fresh run with raw output (the file API, checkpoints, the workspace copies). Rejects when the runner is lost. */
  async runRaw(target: RunTarget, request: RawRunRequest): Promise<RawRunResult> {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const { exit } = target.runner.connection.run(
      {
        language: request.language,
        code: request.code,
        ...(request.stdin !== undefined && { stdin: request.stdin }),
        env: request.env ?? RAW_ENV,
        timeoutMs: request.timeoutMs,
        cpuSeconds: 0,
        capBytes: request.capBytes,
        capLines: NO_LINE_CAP,
        workspace: target.workspace,
        ...(target.nested && { nested: true }),
      },
      (fd, data) => (fd === 2 ? err : out).push(data),
    );
    let deadline: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => {
      deadline = setTimeout(() => resolve('hung'), request.timeoutMs + this.graceMs);
    });
    let outcome: RunnerExit | 'hung';
    try {
      outcome = await Promise.race([exit, hung]);
    } catch (e) {
      if (e instanceof RunnerRefusedError && e.code === 'workspace') return target.workspaceNotVisible(e);
      const loss = target.gone() ? undefined : await target.lost(e as Error);
      throw target.lostError(e as Error, loss);
    } finally {
      clearTimeout(deadline);
    }
    if (outcome === 'hung') return target.hung();
    if (outcome.oomKilled) target.runner.oomSeen = true;
    if (outcome.restarting) target.runner.close();
    const cap = (chunks: Buffer[]) => {
      const all = Buffer.concat(chunks);
      return all.length > request.capBytes ? all.subarray(0, request.capBytes) : all;
    };
    return {
      exitCode: outcome.exitCode,
      signal: outcome.signal,
      timedOut: outcome.timedOut,
      oomKilled: outcome.oomKilled,
      capped: outcome.capped,
      stdout: cap(out),
      stderr: cap(err),
      durationMs: outcome.durationMs,
    };
  }

  /**
   * A workspace snapshot walked by the target's runner itself (`snapshot`): the workspace tool's answer. Rejects as a
   * raw run does when the runner is lost or /workspace is not the session's; `timeoutMs` is the walk's deadline.
   */
  async snapshot(
    target: RunTarget,
    bounds: { maxEntries: number; maxScanEntries: number },
    timeoutMs: number,
  ): Promise<Record<string, unknown>> {
    const answer = target.runner.connection.snapshot({ ...bounds, workspace: target.workspace });
    let deadline: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => {
      deadline = setTimeout(() => resolve('hung'), timeoutMs + this.graceMs);
    });
    let outcome: Record<string, unknown> | 'hung';
    try {
      outcome = await Promise.race([answer, hung]);
    } catch (e) {
      if (e instanceof RunnerRefusedError && e.code === 'workspace') return target.workspaceNotVisible(e);
      if (e instanceof RunnerRefusedError) throw e;
      const loss = target.gone() ? undefined : await target.lost(e as Error);
      throw target.lostError(e as Error, loss);
    } finally {
      clearTimeout(deadline);
    }
    if (outcome === 'hung') return target.hung();
    return outcome;
  }

  /** The runner died during a run: out of memory is the run's outcome; anything else the owner's error. */
  private async runnerLost(
    target: RunTarget,
    err: Error,
    supervisor: RunSupervisor,
    limits: PodRunLimits,
  ): Promise<TierRunResult> {
    const loss = await target.lost(err);
    // An earlier OOM of this instance (which the runner survived) would make any later end read `OOMKilled`.
    if (loss?.oomKilled && !target.runner.oomSeen) {
      return {
        ...supervisor.collected(),
        signal: 'SIGKILL',
        limit: outOfMemory(
          `${limits.memoryWords} and took the runner down (workspace kept, kernels and processes lost)`,
        ),
      };
    }
    throw target.lostError(err, loss);
  }
}

/** The run's result; a runner leaving after it (`restarting`) says why in the out-of-memory message. */
function toResult(
  exit: RunnerExit,
  supervisor: RunSupervisor,
  job: TierJob,
  limits: PodRunLimits,
): TierRunResult {
  return runnerResult(exit, supervisor, {
    memory: exit.restarting
      ? `${limits.memoryWords}, and left it full: memory held by no process, such as files in the memory-backed /tmp ` +
        '(the runner restarts in a fresh cgroup with a reserve; kernels and background processes are lost)'
      : limits.memoryWords,
    output: job.output,
    fileSizeBytes: limits.fileSizeBytes,
  });
}

export const memoryWords = (bytes: number, what: string): string =>
  `the ${what}'s ${formatBytes(bytes)} limit`;
