import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { KubeClient } from './kube-client';
import { DELETE_GRACE_SECONDS } from './kubernetes.constants';
import type { DeletePrecondition, PodInfo, PodManifest } from './kube-types';
import { KubeApiError, KubernetesUnavailableError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import { attachRunner, runnerStatus, type PodRunner } from './pod-runner';

/** Waiting reasons that never resolve by themselves: the pod is given up at once. */
const FATAL_WAITING = new Set([
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'ImageInspectError',
]);
const POLL_FIRST_MS = 40;
/** The kubelet's admission refusals (`OutOfcpu`, `OutOfmemory`, `OutOfephemeral-storage`, `OutOfpods`). */
const ADMISSION_REJECTION = /^OutOf/;
const REJECTED_RETRY_MS = 250;
const REJECTED_RETRY_MAX_MS = 2000;

const isRejection = (err: unknown): boolean =>
  err instanceof SandboxInternalError && err.code === 'POD_REJECTED';
const POLL_MAX_MS = 250;

export type Sleep = (ms: number) => Promise<void>;
export const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());

/** A pod whose runner answered: ready for runs. */
export interface LaunchedPod {
  info: PodInfo;
  runner: PodRunner;
}

/**
 * Pod lifecycle the tiers share: create, wait until the runner container runs, attach to the runner (waking it),
 * delete. Every failure on the way deletes what was made.
 */
export class PodLauncher {
  /** Creations in flight; shutdown waits for them so that a pod made meanwhile is still deleted. */
  readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly sleep: Sleep = realSleep,
  ) {}

  /** Creates the pod and waits for its runner; on any failure the pod is deleted and the error rethrown. */
  launch(manifest: PodManifest, timeoutMs = this.options.podStartTimeoutMs): Promise<LaunchedPod> {
    const launching = this.launchOne(manifest, timeoutMs);
    const tracked = launching.catch(() => undefined);
    this.inFlight.add(tracked);
    void tracked.finally(() => this.inFlight.delete(tracked));
    return launching;
  }

  private async launchOne(first: PodManifest, timeoutMs: number): Promise<LaunchedPod> {
    const deadline = this.clock.monotonic() + timeoutMs;
    let manifest = first;
    let name = manifest.metadata.name;
    let created = false;
    try {
      let info: PodInfo;
      for (let attempt = 1; ; attempt++) {
        await this.create(manifest);
        created = true;
        try {
          info = await this.waitRunning(name, deadline);
          break;
        } catch (err) {
          // Without a scheduler (pods name their node) a full node rejects a pod instead of queueing it; resources
          // of pods still terminating come free within seconds: try again under a new name until the deadline.
          const backoff = Math.min(REJECTED_RETRY_MAX_MS, REJECTED_RETRY_MS * attempt);
          if (!isRejection(err) || this.clock.monotonic() + backoff > deadline) throw err;
          await this.remove(name).catch(() => undefined);
          created = false;
          this.logger.debug(`pod ${name} rejected by its node (${(err as Error).message}); retrying`);
          await this.sleep(backoff);
          name = `${first.metadata.name.slice(0, 56)}-r${attempt}`;
          manifest = { ...first, metadata: { ...first.metadata, name } };
        }
      }
      const left = Math.max(1, deadline - this.clock.monotonic());
      const containerId = runnerStatus(info)?.containerId;
      const runner = await attachRunner(
        this.client,
        name,
        {
          startTimeoutMs: Math.min(left, this.options.runnerStartTimeoutMs),
          ...(containerId !== undefined && { containerId }),
        },
        this.clock,
      );
      return { info, runner };
    } catch (err) {
      if (created)
        await this.remove(name).catch((e: Error) => this.logger.warn(`cleanup of pod ${name}: ${e.message}`));
      throw launchError(name, err);
    }
  }

  /**
   * Creates the pod. The API server answers a create 404 only when the namespace is not there, and 403 when the
   * engine's account may not create pods there (or the namespace lacks its `default` ServiceAccount): the cluster is
   * not what the engine was configured for, which the caller answers 503, naming the setting.
   */
  private async create(manifest: PodManifest): Promise<void> {
    try {
      await this.client.createPod(manifest);
    } catch (err) {
      if (!(err instanceof KubeApiError)) throw err;
      const o = this.options;
      const namespace = o.namespace;
      if (err.code === 'KUBE_NOT_FOUND') {
        throw new KubernetesUnavailableError(
          'KUBERNETES_NAMESPACE_MISSING',
          `namespace ${namespace} does not exist in the cluster: create it (with its default ServiceAccount) or ` +
            `set ${o.settingNames.namespace} to one that does`,
          { cause: err, details: { namespace } },
        );
      }
      if (err.code === 'KUBE_FORBIDDEN') {
        throw new KubernetesUnavailableError(
          'KUBERNETES_FORBIDDEN',
          `the cluster refuses to create the engine's pods in namespace ${namespace} (${err.message}): let the ` +
            `engine's account create, get and delete pods there, or set ${o.settingNames.namespace}`,
          { cause: err, details: { namespace } },
        );
      }
      throw err;
    }
  }

  /**
   * Polls the pod until its runner container runs (the pod is `Running`). Rejects at `deadline`, when the pod failed
   * (admission refused it: `OutOfcpu`, `OutOfmemory`…), is being deleted, or waits for a reason that never clears.
   */
  async waitRunning(name: string, deadline: number): Promise<PodInfo> {
    let delay = POLL_FIRST_MS;
    let last: PodInfo | undefined;
    for (;;) {
      last = await this.client.readPod(name);
      if (!last)
        throw new SandboxInternalError('POD_GONE', `pod ${name} disappeared while starting`, {
          retriable: true,
        });
      const runner = runnerStatus(last);
      if (last.phase === 'Running' && runner?.state === 'running') return last;
      if (last.phase === 'Failed' || last.phase === 'Succeeded' || last.deleting) {
        throw new SandboxInternalError(
          last.phase === 'Failed' && ADMISSION_REJECTION.test(last.reason ?? '')
            ? 'POD_REJECTED'
            : 'POD_START',
          `pod ${name} ended before it ran: ${last.reason ?? last.phase}${last.message ? ` (${last.message})` : ''}`,
          { retriable: true },
        );
      }
      if (runner?.state === 'waiting' && runner.reason && FATAL_WAITING.has(runner.reason)) {
        throw new SandboxUnavailableError(
          `pod ${name} cannot start its container: ${runner.reason}${runner.message ? ` (${runner.message})` : ''}`,
        );
      }
      if (this.clock.monotonic() + delay > deadline) throw this.startTimeout(last, runner?.reason);
      await this.sleep(delay);
      delay = Math.min(POLL_MAX_MS, delay * 2);
    }
  }

  /**
   * A pod that did not run in time: its node is missing or not Ready, or its image or volumes will not come. The
   * cluster's fault (503), said with what the pod was waiting for and the settings that place and time it.
   */
  private startTimeout(pod: PodInfo, waiting: string | undefined): KubernetesUnavailableError {
    const o = this.options;
    const why = waiting ?? pod.reason ?? pod.phase;
    const where = o.nodeName
      ? `node ${o.nodeName} (${o.settingNames.nodeName})`
      : o.nodeSelector
        ? `a node matching ${o.settingNames.nodeSelector}`
        : 'a node';
    return new KubernetesUnavailableError(
      'POD_START_TIMEOUT',
      `pod ${pod.name} was not running within ${o.podStartTimeoutMs} ms (still ${why}${pod.message ? `: ${pod.message}` : ''}): ` +
        `check that ${where} exists, is Ready and has the sandbox image, or raise ${o.settingNames.podStartTimeoutMs}`,
      { details: { pod: pod.name, waiting: why, ...(o.nodeName !== undefined && { node: o.nodeName }) } },
    );
  }

  /** Deletes the pod (`DELETE_GRACE_SECONDS`); `false` when the precondition failed (someone else changed it). */
  remove(name: string, precondition?: DeletePrecondition): Promise<boolean> {
    return this.client.deletePod(name, DELETE_GRACE_SECONDS, precondition);
  }
}

function launchError(name: string, err: unknown): SandboxError {
  if (err instanceof SandboxError) return err;
  return new KubeApiError('KUBE_STREAM', `cannot start pod ${name}: ${(err as Error).message}`, {
    retriable: true,
    cause: err,
  });
}
