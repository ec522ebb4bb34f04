import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import * as os from 'node:os';
import { RunnerLostError } from '../../core/pooled.errors';
import { SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { TierJob, TierRunResult } from '../../core/sandbox.types';
import { emptyResult } from '../../core/supervision/limit-messages';
import type { KubeClient } from './kube-client';
import { SessionPodError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import type { LaunchedPod, PodLauncher } from './pod-launcher';
import { memoryWords, type PodRuns, type RawRunRequest, type RunTarget } from './pod-runs';
import { oneOffPodManifest, podName } from './pod-spec';
import type { RunnerRecovery } from './runner-recovery';
import type { SessionPods } from './session-pods';
import { tarIn, tarOut, type TarTarget } from './workspace-tar';

/** Margin of the one-off pod's `activeDeadlineSeconds` over the run's own timeout (start, copies in and out). */
const DEADLINE_MARGIN_MS = 10 * 60_000;

interface ActiveRun {
  readonly sessionId: string;
  readonly controller: AbortController;
  readonly done: Promise<void>;
}

/** How long each part of the latest one-off action took, in ms (for operators and the measurements). */
export interface OneOffTimings {
  /** Create → runner answering (in parallel with the session's copy out). */
  launchMs: number;
  copyOutMs: number;
  copyInMs: number;
  runMs: number;
  copyBackMs: number;
  deleteMs: number;
  totalMs: number;
}

/**
 * The one-off tier's work: a pod per action (its own runner, `restartPolicy: Never`, the RuntimeClass when
 * configured), given the session's workspace (a tar of the session pod, unpacked before the code runs), the code run
 * through its runner (caps, timeout, kill, out-of-memory), then its /workspace copied back into the session pod with
 * `replace` (deletions propagate), and the pod deleted, always. The session pod is held for the whole action, so no
 * run of the session changes the workspace between the copy out and the copy back (its background processes and
 * kernels still can: such writes are overwritten).
 */
export class OneOffRuns {
  private readonly active = new Set<ActiveRun>();
  private closing = false;
  last?: OneOffTimings;

  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly launcher: PodLauncher,
    private readonly sessions: SessionPods,
    private readonly runs: PodRuns,
    private readonly recovery: RunnerRecovery,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult> {
    const started = this.clock.monotonic();
    if (this.closing) throw new SandboxUnavailableError('the Kubernetes sandbox backend is shutting down');
    if (signal?.aborted) return { ...emptyResult(0), aborted: true };
    let finish!: () => void;
    const active: ActiveRun = {
      sessionId: job.sessionId,
      controller: new AbortController(),
      done: new Promise<void>((resolve) => (finish = resolve)),
    };
    this.active.add(active);
    const abort = signal ? AbortSignal.any([signal, active.controller.signal]) : active.controller.signal;
    const name = podName('one-off', job.actionId);
    let launching: Promise<LaunchedPod> | undefined;
    let launched: LaunchedPod | undefined;
    try {
      const sessionPod = await this.sessions.podFor(job.sessionId, job.image);
      const image = job.image ?? this.options.image;
      if (!image) throw new SandboxUnavailableError('no sandbox image configured for the Kubernetes tiers');
      const limits = this.options.limits.container;
      launching = this.launcher.launch(
        oneOffPodManifest({
          name,
          image,
          engineId: this.options.engineId,
          limits,
          options: this.options,
          sessionId: job.sessionId,
          actionId: job.actionId,
          activeDeadlineSeconds: Math.ceil(
            (job.timeoutMs + this.options.podStartTimeoutMs + DEADLINE_MARGIN_MS) / 1000,
          ),
        }),
      );
      launching.catch(() => undefined); // awaited below; a failure must not count as unhandled meanwhile
      // The session's workspace: serialised, or the one a calling skill's run holds (its nested one-off skill).
      return await this.sessions.withPod(sessionPod, async (source) => {
        const t0 = this.clock.monotonic();
        const tar = await this.sessions.tarOutFrom(source);
        const t1 = this.clock.monotonic();
        launched = await launching!;
        const t2 = this.clock.monotonic();
        const target = this.target(launched.info.name, launched);
        await tarIn(this.client, tarTarget(this.runs, target), tar, { replace: false });
        const t3 = this.clock.monotonic();
        const run = () =>
          this.runs.run(
            target,
            job,
            {
              memoryBytes: limits.memoryBytes,
              fileSizeBytes: limits.fileSizeBytes,
              memoryWords: memoryWords(limits.memoryBytes, 'one-off pod'),
            },
            abort,
            started,
          );
        // A skill's calls act on the workspace its run sees, this pod's copy, which then comes back with the rest.
        const result = job.channel
          ? await this.sessions.holding(sessionPod, job.actionId, target, run)
          : await run();
        const t4 = this.clock.monotonic();
        // The code's writes come back, also after a timeout or an abort, unless its runner died with the pod.
        if (!sessionPod.released && !this.closing && launched.runner.alive) {
          const back = await tarOut(this.client, tarTarget(this.runs, target), {
            maxBytes: this.options.limits.pooled.workspaceBytes + 64 * 2 ** 20,
          });
          await this.sessions.tarInTo(source, back, { replace: true });
        } else if (!launched.runner.alive) {
          this.logger.warn(
            `one-off pod ${name}: its runner died, the workspace changes of ${job.actionId} are lost`,
          );
        }
        const t5 = this.clock.monotonic();
        this.last = {
          launchMs: t2 - started,
          copyOutMs: t1 - t0,
          copyInMs: t3 - t2,
          runMs: t4 - t3,
          copyBackMs: t5 - t4,
          deleteMs: 0,
          totalMs: t5 - started,
        };
        return withDockerExit({
          ...result,
          containerId: launched.info.name,
          ...(this.options.runtimeClassName && { runtime: this.options.runtimeClassName }),
        });
      });
    } finally {
      launched?.runner.close();
      const t = this.clock.monotonic();
      if (launching) {
        // A launch that failed deleted its pod; a launched one may carry another name (a node rejection retried).
        const made = await launching.catch(() => undefined);
        const launchedName = made?.info.name ?? name;
        await this.launcher
          .remove(launchedName)
          .catch((err: Error) =>
            this.logger.warn(`could not delete one-off pod ${launchedName}: ${err.message}`),
          );
      }
      if (this.last) this.last.deleteMs = this.clock.monotonic() - t;
      this.active.delete(active);
      finish();
    }
  }

  /** Kills the session's one-off runs in flight (they report `aborted`) and waits until their pods are deleted. */
  async releaseSession(sessionId: string): Promise<void> {
    const runs = [...this.active].filter((r) => r.sessionId === sessionId);
    for (const r of runs) r.controller.abort(new Error(`session ${sessionId} released`));
    await Promise.all(runs.map((r) => r.done));
  }

  /** Kills every run in flight and waits for their pods to be deleted. */
  async close(): Promise<void> {
    this.closing = true;
    const runs = [...this.active];
    for (const r of runs) r.controller.abort(new Error('engine shutting down'));
    await Promise.all(runs.map((r) => r.done));
  }

  private target(name: string, launched: LaunchedPod): RunTarget {
    const runner = launched.runner;
    return {
      podName: name,
      runner,
      workspace: runner.workspace,
      gone: () => this.closing,
      lost: async () => {
        runner.close();
        return this.recovery.inspectLoss(name, runner.containerId);
      },
      hung: async () => {
        throw new RunnerLostError(
          'RUNNER_UNRESPONSIVE',
          `the runner of one-off pod ${name} did not finish the run within its timeout + ${this.options.runnerGraceMs} ms; the pod was deleted`,
          { pod: name },
        );
      },
      workspaceNotVisible: async (err) => {
        throw new SessionPodError('WORKSPACE_NOT_VISIBLE', `one-off pod ${name}: ${err.message}`);
      },
      lostError: (err, loss) =>
        new SandboxInternalError(
          'RUNNER_LOST',
          `the runner of one-off pod ${name} stopped during the run (${loss?.reason ?? err.message}); the workspace ` +
            `changes of the action were not copied back`,
          { retriable: true, cause: err },
        ),
    };
  }
}

function tarTarget(runs: PodRuns, target: RunTarget): TarTarget {
  return { podName: target.podName, raw: (r: RawRunRequest) => runs.runRaw(target, r) };
}

/** As the Docker one-off tier reports a run killed by a signal: exit code 128 + n beside the signal's name. */
function withDockerExit(result: TierRunResult): TierRunResult {
  if (result.exitCode === undefined && result.signal) {
    const n = os.constants.signals[result.signal as keyof typeof os.constants.signals];
    if (typeof n === 'number') result.exitCode = 128 + n;
  }
  return result;
}
