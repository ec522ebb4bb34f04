import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { KubeClient } from './kube-client';
import { namespaceMissingMessage } from './kube-setup-check';
import {
  DELETE_GRACE_SECONDS,
  K8S_ANNOTATIONS,
  K8S_LABELS,
  ONE_OFF_TIER_VALUE,
  RUNNER_CONTAINER,
} from './kubernetes.constants';
import type { DeletePrecondition, PodInfo, PodManifest } from './kube-types';
import {
  KubeApiError,
  type KubernetesUnavailableCode,
  KubernetesUnavailableError,
} from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import { attachRunner, runnerStatus, type PodRunner } from './pod-runner';

/**
 * Waiting reasons that say the node cannot have the pod's image: not there with pull policy `Never`, a name that is
 * not one, or a pull that failed (the kubelet retries a failed pull with a back-off of 10 s doubling to 5 min: a
 * session waiting for that would wait its whole start timeout to learn what the first failure said).
 */
const IMAGE_WAITING = new Set(['ErrImageNeverPull', 'InvalidImageName', 'ErrImagePull', 'ImagePullBackOff']);
/** The ServiceAccount admission plugin's refusal of a pod in a namespace without its `default` ServiceAccount. */
const MISSING_SERVICE_ACCOUNT = /error looking up service account|serviceaccounts? "default" not found/i;
/** Other waiting reasons that never resolve by themselves: the pod is given up at once. */
const FATAL_WAITING = new Set([
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
/** A failed start of a pod of the sandbox image is reported by `/health` this long, unless one starts meanwhile. */
const FAILURE_MEMORY_MIN_MS = 60_000;

/** The latest start of a pod of the configured sandbox image that failed because of the cluster. */
export interface PodStartFailure {
  code: KubernetesUnavailableCode;
  message: string;
  /** When, as an ISO time. */
  at: string;
}

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
  private failure?: PodStartFailure & { monotonic: number };

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
    const ofSandboxImage = imageOf(manifest) === this.options.image;
    const tracked = launching.then(
      () => {
        if (ofSandboxImage) this.failure = undefined;
      },
      (err: unknown) => {
        // Only the engine's own image says something about the cluster: a session image may just be a bad one.
        if (ofSandboxImage && err instanceof KubernetesUnavailableError) {
          this.failure = {
            code: err.code,
            message: err.message,
            at: this.clock.now().toISOString(),
            monotonic: this.clock.monotonic(),
          };
        }
      },
    );
    this.inFlight.add(tracked);
    void tracked.finally(() => this.inFlight.delete(tracked));
    return launching;
  }

  /**
   * Why the latest pod of the sandbox image did not start, while no later one did: for `/health`, for at least a
   * minute (and the pod start timeout) after it. Not a gate: every request still tries (the cluster may be fixed).
   */
  lastFailure(): PodStartFailure | undefined {
    const f = this.failure;
    if (!f) return undefined;
    const memory = Math.max(FAILURE_MEMORY_MIN_MS, this.options.podStartTimeoutMs);
    if (this.clock.monotonic() - f.monotonic > memory) return undefined;
    return { code: f.code, message: f.message, at: f.at };
  }

  private async launchOne(first: PodManifest, timeoutMs: number): Promise<LaunchedPod> {
    const deadline = this.clock.monotonic() + timeoutMs;
    let manifest = first;
    let name = manifest.metadata.name;
    let created = false;
    let rejection: Error | undefined;
    try {
      let info: PodInfo;
      for (let attempt = 1; ; attempt++) {
        await this.create(manifest);
        created = true;
        try {
          info = await this.waitRunning(name, deadline);
          break;
        } catch (err) {
          // A retry still waiting for its node's word at the deadline: the node's last word says why.
          if (rejection && err instanceof KubernetesUnavailableError && err.code === 'POD_START_TIMEOUT') {
            throw this.rejected(manifest, rejection);
          }
          // Without a scheduler (pods name their node) a full node rejects a pod instead of queueing it; resources
          // of pods still terminating come free within seconds: try again under a new name until the deadline.
          const backoff = Math.min(REJECTED_RETRY_MAX_MS, REJECTED_RETRY_MS * attempt);
          if (!isRejection(err)) throw err;
          rejection = err as Error;
          if (this.clock.monotonic() + backoff > deadline) throw this.rejected(manifest, rejection);
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
   * engine's account may not create pods there, or the namespace lacks its `default` ServiceAccount: the cluster is
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
          namespaceMissingMessage(o, this.client.server),
          { cause: err, details: { namespace } },
        );
      }
      if (err.code === 'KUBE_FORBIDDEN' && MISSING_SERVICE_ACCOUNT.test(err.message)) {
        throw new KubernetesUnavailableError(
          'KUBERNETES_FORBIDDEN',
          `namespace ${namespace} has no default ServiceAccount, which every pod needs (${err.message.split(';')[0]}): ` +
            `create it (a cluster's kube-controller-manager makes one in every namespace), or set ` +
            `${o.settingNames.namespace} to a namespace that has one`,
          { cause: err, details: { namespace } },
        );
      }
      if (err.code === 'KUBE_FORBIDDEN') {
        throw new KubernetesUnavailableError(
          'KUBERNETES_FORBIDDEN',
          `the cluster refuses to create the engine's pods in namespace ${namespace}: ${err.message}`,
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
        const ended = `pod ${name} ended before it ran: ${last.reason ?? last.phase}${last.message ? ` (${last.message})` : ''}`;
        const refused = last.phase === 'Failed' && !last.deleting && last.reason !== undefined;
        const neverRan = last.containers.every((c) => c.state === 'waiting' || c.state === 'unknown');
        if (refused && ADMISSION_REJECTION.test(last.reason!)) {
          throw new SandboxInternalError('POD_REJECTED', ended, { retriable: true });
        }
        // Its node's admission turned it away for good (`NodeAffinity`: the node lacks the selector's labels).
        if (refused && neverRan) throw this.refusedByNode(last, ended);
        throw new SandboxInternalError('POD_START', ended, { retriable: true });
      }
      // The runner, or an init container ahead of it (it waits `PodInitializing` meanwhile), that cannot start.
      const stuck = [...(last.initContainers ?? []), ...last.containers].find(
        (c) =>
          c.state === 'waiting' &&
          c.reason !== undefined &&
          (IMAGE_WAITING.has(c.reason) || FATAL_WAITING.has(c.reason)),
      );
      if (stuck && IMAGE_WAITING.has(stuck.reason!))
        throw this.imageMissing(last, stuck.reason!, stuck.message);
      if (stuck) {
        throw new SandboxUnavailableError(
          `pod ${name} cannot start its container ${stuck.name}: ${stuck.reason}${stuck.message ? ` (${stuck.message})` : ''}`,
        );
      }
      if (this.clock.monotonic() + delay > deadline) throw this.startTimeout(last, runner?.reason);
      await this.sleep(delay);
      delay = Math.min(POLL_MAX_MS, delay * 2);
    }
  }

  /**
   * A pod that did not run in time: no scheduler bound it to a node, no node fits it (the scheduler's words), its
   * node is missing or not Ready, or its image or volumes will not come. The cluster's fault (503), said with what the
   * pod was waiting for and the settings that place and time it.
   */
  private startTimeout(pod: PodInfo, waiting: string | undefined): KubernetesUnavailableError {
    const o = this.options;
    const names = o.settingNames;
    const within = `pod ${pod.name} was not running within ${o.podStartTimeoutMs} ms`;
    const raise = `or raise ${names.podStartTimeoutMs}`;
    const details = {
      pod: pod.name,
      ...(o.nodeName !== undefined && { node: o.nodeName }),
      ...(pod.nodeName !== undefined && { boundTo: pod.nodeName }),
    };
    if (pod.nodeName === undefined && pod.scheduled?.status === 'False') {
      // A scheduler looked and found no node: its message counts the nodes and says what each lacked.
      const words = pod.scheduled.message ?? pod.scheduled.reason ?? 'no node fits';
      return new KubernetesUnavailableError(
        'POD_START_TIMEOUT',
        `${within}: no node can take it (${words.trim()}): ${this.fitHint(tierOf(pod.labels))}, ${raise}`,
        { details: { ...details, waiting: pod.scheduled.reason ?? 'Unschedulable' } },
      );
    }
    if (pod.nodeName === undefined) {
      return new KubernetesUnavailableError(
        'POD_START_TIMEOUT',
        `${within}: no scheduler bound it to a node (still Pending, not scheduled): a cluster without a running ` +
          `kube-scheduler needs ${names.nodeName} (the node to bind pods to), ${raise}`,
        { details: { ...details, waiting: 'Unscheduled' } },
      );
    }
    const why = waiting ?? pod.reason ?? pod.phase;
    const where = o.nodeName
      ? `node ${o.nodeName} (${names.nodeName})`
      : o.nodeSelector
        ? `node ${pod.nodeName} (matching ${names.nodeSelector})`
        : `node ${pod.nodeName}`;
    return new KubernetesUnavailableError(
      'POD_START_TIMEOUT',
      `${within} (still ${why}${pod.message ? `: ${pod.message}` : ''}): ` +
        `check that ${where} exists, is Ready and has the sandbox image, ${raise}`,
      { details: { ...details, waiting: why } },
    );
  }

  /** What to change when no node fits the pod: where pods may go, and what they ask for. */
  private fitHint(tier: 'pooled' | 'container'): string {
    const names = this.options.settingNames;
    const where = this.options.nodeSelector
      ? `check ${names.nodeSelector} (does a Ready node have those labels?)`
      : 'check that a Ready node takes pods (taints, cordons)';
    const memory = tier === 'pooled' ? names.pooledMemoryBytes : names.containerMemoryBytes;
    return (
      `${where}; each pod asks for ${names.cpuRequest} CPUs, ${memory} of memory and its workspace on disk ` +
      `(${names.workspaceBytes}): lower them, or add nodes`
    );
  }

  /**
   * Its node turned the pod away until the deadline (`OutOfcpu`, `OutOfmemory`…: a pod bound by `nodeName` skips the
   * scheduler, and a node without room rejects it): the pod asks more than the node has free.
   */
  private rejected(manifest: PodManifest, err: Error): KubernetesUnavailableError {
    const o = this.options;
    const requests =
      manifest.spec.containers.find((c) => c.name === RUNNER_CONTAINER)?.resources.requests ?? {};
    const asks = Object.entries(requests)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const where = o.nodeName ? `node ${o.nodeName} (${o.settingNames.nodeName})` : 'its node';
    return new KubernetesUnavailableError(
      'POD_START_TIMEOUT',
      `${err.message}; ${where} had no room for it within ${o.podStartTimeoutMs} ms (it asks for ${asks}): ` +
        `${this.fitHint(tierOf(manifest.metadata.labels))}, or raise ${o.settingNames.podStartTimeoutMs}`,
      { cause: err, details: { pod: manifest.metadata.name, waiting: 'Rejected' } },
    );
  }

  /** The pod's node refused it (not for want of room, which `rejected` reports after retrying). */
  private refusedByNode(pod: PodInfo, ended: string): KubernetesUnavailableError {
    const names = this.options.settingNames;
    const node = pod.nodeName ?? this.options.nodeName;
    const hint =
      pod.reason === 'NodeAffinity' && this.options.nodeSelector
        ? `${names.nodeSelector} asks for labels node ${node ?? '?'} does not have` +
          `${this.options.nodeName ? ` (${names.nodeName} binds every pod to it)` : ''}: change either`
        : `check node ${node ?? '?'}${this.options.nodeName ? ` (${names.nodeName})` : ''} and the pods' placement ` +
          `(${names.nodeSelector})`;
    return new KubernetesUnavailableError('POD_REJECTED', `${ended}: ${hint}`, {
      details: { pod: pod.name, waiting: pod.reason, ...(node !== undefined && { node }) },
    });
  }

  /** The node cannot have the pod's image: which image, why, and the settings that choose it and how it is had. */
  private imageMissing(
    pod: PodInfo,
    reason: string,
    message: string | undefined,
  ): KubernetesUnavailableError {
    const o = this.options;
    const names = o.settingNames;
    const image = pod.annotations[K8S_ANNOTATIONS.image] ?? o.image ?? 'the sandbox image';
    const node = pod.nodeName ? `node ${pod.nodeName}` : 'the node';
    const how =
      o.imagePullPolicy === 'Never'
        ? `${names.imagePullPolicy} is Never, so the image must already be on the node: import it into the ` +
          `node's container runtime (scripts/k8s.sh does for the sandbox image), or set ${names.imagePullPolicy} ` +
          `to IfNotPresent for a registry the nodes reach`
        : `${names.imagePullPolicy} is ${o.imagePullPolicy}: the node must reach a registry that has it`;
    return new KubernetesUnavailableError(
      'SANDBOX_IMAGE_MISSING',
      `pod ${pod.name} cannot start: ${node} cannot have image ${image} (${reason}` +
        `${message ? `: ${message.trim()}` : ''}); ${how}; or set ${names.image} to an image the nodes have`,
      { details: { pod: pod.name, image, waiting: reason, ...(pod.nodeName && { node: pod.nodeName }) } },
    );
  }

  /** Deletes the pod (`DELETE_GRACE_SECONDS`); `false` when the precondition failed (someone else changed it). */
  remove(name: string, precondition?: DeletePrecondition): Promise<boolean> {
    return this.client.deletePod(name, DELETE_GRACE_SECONDS, precondition);
  }
}

function imageOf(manifest: PodManifest): string | undefined {
  return manifest.spec.containers.find((c) => c.name === RUNNER_CONTAINER)?.image;
}

/** The tier a pod serves, by its labels. */
function tierOf(labels: Record<string, string>): 'pooled' | 'container' {
  return labels[K8S_LABELS.tier] === ONE_OFF_TIER_VALUE ? 'container' : 'pooled';
}

function launchError(name: string, err: unknown): SandboxError {
  if (err instanceof SandboxError) return err;
  return new KubeApiError('KUBE_STREAM', `cannot start pod ${name}: ${(err as Error).message}`, {
    retriable: true,
    cause: err,
  });
}
