import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import type { KubeClient } from './kube-client';
import type { ContainerTermination } from './kube-types';
import { RUNNER_CONTAINER } from './kubernetes.constants';
import { SessionPodError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import type { Sleep } from './pod-launcher';
import { attachRunner, runnerStatus } from './pod-runner';
import type { SessionPod } from './session-pod';

/** After a runner's connection closed, how long the kubelet gets to record how its container ended. */
const LOSS_SETTLE_MS = 4000;
/** A container still "running" this long after its runner's connection closed: the connection dropped, not the runner. */
const SAME_INSTANCE_GRACE_MS = 1500;
const POLL_MS = 100;
/** Kills every process of the sandbox user but PID 1 (the pause process) and the caller: the runner first. */
export const KILL_ALL = ['/bin/sh', '-c', 'kill -KILL -1'];

/** How a runner's container ended, as the kubelet recorded it. */
export interface RunnerLoss {
  oomKilled: boolean;
  exitCode?: number;
  reason?: string;
  /** The whole pod failed or went away (evicted, deleted): why. Its workspace is lost. */
  podGone?: string;
}

/**
 * What happens to a session pod's runner after its connection closed: how it ended (out of memory?), and getting it
 * back. The pod has `restartPolicy: Always`, so the kubelet restarts a dead runner in the same pod (same emptyDir
 * workspace and /tmp); the engine waits for that, bounded, and re-attaches. A connection that dropped while the runner
 * kept running is no way back either: that runner's kernels and processes are unknown to the engine now, so it is
 * killed and restarted like a dead one.
 */
export class RunnerRecovery {
  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly sleep: Sleep,
  ) {}

  /** Waits (briefly) until the kubelet has recorded the end of the runner's container instance, and reads it. */
  async inspectLoss(podName: string, containerId: string | undefined): Promise<RunnerLoss | undefined> {
    const deadline = this.clock.monotonic() + LOSS_SETTLE_MS;
    for (;;) {
      const pod = await this.client.readPod(podName).catch(() => null);
      if (pod === undefined || pod?.phase === 'Failed' || pod?.deleting) {
        const why = pod ? `${pod.reason ?? pod.phase}${pod.message ? `: ${pod.message}` : ''}` : 'deleted';
        return { oomKilled: false, podGone: why };
      }
      const status = runnerStatus(pod ?? undefined);
      let ended: ContainerTermination | undefined;
      if (status && containerId !== undefined && status.containerId !== containerId)
        ended = status.lastTermination;
      else if (status?.state === 'terminated') ended = status.terminated;
      if (ended) {
        return {
          oomKilled: ended.reason === 'OOMKilled',
          exitCode: ended.exitCode,
          ...(ended.reason !== undefined && { reason: ended.reason }),
        };
      }
      if (this.clock.monotonic() > deadline) return undefined;
      await this.sleep(POLL_MS);
    }
  }

  /** Kills the runner (and everything it started); the kubelet restarts it. Never throws. */
  async killRunner(pod: SessionPod, why: string): Promise<void> {
    this.logger.warn(`session ${pod.sessionId}: restarting the runner of pod ${pod.name} (${why})`);
    pod.runner.close();
    try {
      await this.client.exec(pod.name, RUNNER_CONTAINER, KILL_ALL, { timeoutMs: this.options.apiTimeoutMs });
    } catch (err) {
      this.logger.warn(`could not kill the runner of pod ${pod.name}: ${(err as Error).message}`);
    }
  }

  /**
   * Gets the session pod's runner back: waits for the kubelet to run a new instance of the container, attaches and
   * wakes it, and checks it sees the same /workspace. Rejects with `SESSION_POD_LOST` when the pod is gone (evicted,
   * deleted: the workspace with it) and `RUNNER_RESTART_TIMEOUT` past `runnerRestartTimeoutMs` (the kubelet backs
   * off restarts of a container that keeps dying: 10 s, 20 s, … up to 5 min).
   */
  async recover(pod: SessionPod): Promise<void> {
    const started = this.clock.monotonic();
    const deadline = started + this.options.runnerRestartTimeoutMs;
    const oldInstance = pod.runner.containerId;
    let lastWhy = 'not restarted yet';
    for (;;) {
      if (pod.released)
        throw new SessionPodError('SESSION_POD_LOST', `session ${pod.sessionId} was released`);
      const info = await this.client.readPod(pod.name);
      if (
        !info ||
        info.uid !== pod.uid ||
        info.deleting ||
        info.phase === 'Failed' ||
        info.phase === 'Succeeded'
      ) {
        const why = info
          ? `${info.reason ?? info.phase}${info.message ? `: ${info.message}` : ''}`
          : 'deleted';
        throw new SessionPodError(
          'SESSION_POD_LOST',
          `the pod of session ${pod.sessionId} is gone (${why}); its workspace is lost. The session's next action ` +
            `gets a new pod with an empty workspace`,
          { details: { pod: pod.name } },
        );
      }
      const status = runnerStatus(info);
      const newInstance = status?.containerId !== oldInstance;
      const overdue = this.clock.monotonic() - started > SAME_INSTANCE_GRACE_MS;
      if (status?.state === 'running' && (newInstance || overdue)) {
        const left = Math.max(1, deadline - this.clock.monotonic());
        try {
          const runner = await attachRunner(
            this.client,
            pod.name,
            {
              startTimeoutMs: Math.min(left, this.options.runnerStartTimeoutMs),
              ...(status.containerId !== undefined && { containerId: status.containerId }),
            },
            this.clock,
          );
          if (!runner.fresh) {
            // The old runner lives on behind a dropped connection: restart it so nothing of it is left unknown.
            pod.runner = runner;
            await this.killRunner(pod, 'its connection dropped');
            lastWhy = 'restarting after a dropped connection';
          } else if (runner.workspace.join('/') !== pod.workspace.join('/')) {
            runner.close();
            throw new SessionPodError(
              'WORKSPACE_NOT_VISIBLE',
              `the restarted runner of pod ${pod.name} sees another /workspace (${runner.workspace.join('/')}, ` +
                `expected ${pod.workspace.join('/')})`,
            );
          } else {
            pod.runner = runner;
            if (runner.hello) pod.runnerPid = runner.hello.pid;
            this.logger.log(
              `session ${pod.sessionId}: runner of pod ${pod.name} back after ${Math.round(this.clock.monotonic() - started)} ms ` +
                `(restart ${status.restartCount})`,
            );
            return;
          }
        } catch (err) {
          if (err instanceof SessionPodError) throw err;
          lastWhy = (err as Error).message;
        }
      } else if (status) {
        lastWhy = status.reason ?? status.state;
      }
      if (this.clock.monotonic() > deadline) {
        throw new SessionPodError(
          'RUNNER_RESTART_TIMEOUT',
          `the runner of session ${pod.sessionId}'s pod ${pod.name} did not come back within ` +
            `${this.options.runnerRestartTimeoutMs} ms (${lastWhy}); the workspace is kept, try again later`,
          { retriable: true, details: { pod: pod.name } },
        );
      }
      await this.sleep(POLL_MS);
    }
  }
}
