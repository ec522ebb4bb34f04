import type { RunnerConnection } from '../../core/runner/runner-connection';
import type { SessionEgressAccess } from '../../core/sandbox.types';
import { type StatefulBox, StatefulBoxHost } from '../../core/stateful/stateful-box.port';
import type { PodChannels } from './pod-channels';
import type { PodRunner } from './pod-runner';
import type { SessionPod } from './session-pod';
import type { SessionPods } from './session-pods';

/** A session pod's runner as the box of the session's kernels and processes: one per runner instance. */
class PodBox implements StatefulBox {
  readonly tier = 'pooled' as const;
  readonly interpreters = {};
  readonly closed: Promise<void>;

  constructor(
    readonly pod: SessionPod,
    private readonly runner: PodRunner,
    private readonly pods: SessionPods,
  ) {
    this.closed = runner.connection.closed;
  }

  get sessionId(): string {
    return this.pod.sessionId;
  }

  /** The pod's name: a cell's action gets a `RAN_IN` edge to it. */
  get containerId(): string {
    return this.pod.name;
  }

  get connection(): RunnerConnection {
    return this.runner.connection;
  }

  get workspace(): [string, string] {
    return this.pod.workspace;
  }

  pin(): () => void {
    return this.pods.pin(this.pod);
  }
}

/**
 * The session pods as the boxes of their kernels and background processes (tier `pooled`). A box lives as long as
 * its runner: when the runner dies (killed, OOM) the box closes, its kernels and processes are gone, and the next
 * `box` re-attaches to the runner the kubelet restarted in the same pod. Pods are never reclaimed for idleness: the
 * pod holds the workspace.
 */
export class KubernetesBoxes extends StatefulBoxHost {
  readonly tier = 'pooled' as const;
  private readonly boxes = new WeakMap<PodRunner, PodBox>();

  constructor(
    private readonly pods: SessionPods,
    readonly memoryBytes: number,
    private readonly channels: PodChannels,
  ) {
    super();
    // An adopted pod's runner kept its kernels and processes: the registries take them back before it serves.
    pods.onAdopted(({ pod, state }) =>
      this.emitAdopted({
        box: this.boxOf(pod),
        kernels: state.kernels.map((k) => ({
          id: k.kernel,
          language: k.language,
          pid: k.pid,
          executionCount: k.count,
          record: k.meta,
        })),
        processes: state.procs.map((p) => ({ id: p.proc, pid: p.pid, record: p.meta })),
      }),
    );
  }

  /**
   * `workspaceDir` is meaningless here (the pod holds the workspace); `egress` reaches the pod over its runner's
   * attach stream (`PodChannels`), for the kernels' and processes' 127.0.0.1:3128.
   */
  async box(
    sessionId: string,
    _workspaceDir: string,
    egress?: SessionEgressAccess,
    image?: string,
  ): Promise<StatefulBox> {
    const box = this.boxOf(await this.pods.podFor(sessionId, image));
    if (egress) await this.channels.ensureEgress(box.connection, egress);
    return box;
  }

  existing(sessionId: string): StatefulBox | undefined {
    const pod = this.pods.current(sessionId);
    return pod && this.boxOf(pod);
  }

  private boxOf(pod: SessionPod): PodBox {
    const runner = pod.runner;
    let box = this.boxes.get(runner);
    if (!box) this.boxes.set(runner, (box = new PodBox(pod, runner, this.pods)));
    return box;
  }

  /** The box stopped answering: its runner is restarted (the pod and its workspace stay). */
  async discard(box: StatefulBox, why: string): Promise<void> {
    if (box instanceof PodBox) await this.pods.restartRunner(box.pod, why);
  }
}
