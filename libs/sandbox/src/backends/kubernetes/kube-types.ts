import type { Readable, Writable } from 'node:stream';

/**
 * The plain shapes the Kubernetes port speaks: what the sandbox tiers write into a pod and read back from it. Only
 * the fields the tiers use; the adapter maps them to and from the API's objects. Nothing here imports the client
 * library.
 */

export type Quantities = Partial<Record<'cpu' | 'memory' | 'ephemeral-storage', string>>;

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

export interface ContainerManifest {
  name: string;
  image: string;
  imagePullPolicy: 'Never' | 'IfNotPresent' | 'Always';
  command: string[];
  args?: string[];
  workingDir?: string;
  env?: Array<{ name: string; value: string }>;
  /** The runner's protocol runs over the attach API: stdin open, never closed by a detach, no terminal. */
  stdin: boolean;
  stdinOnce: boolean;
  tty: boolean;
  securityContext: {
    runAsUser: number;
    runAsGroup: number;
    runAsNonRoot: boolean;
    allowPrivilegeEscalation: boolean;
    readOnlyRootFilesystem: boolean;
    privileged: boolean;
    capabilities: { drop: string[] };
    seccompProfile: { type: 'RuntimeDefault' };
  };
  resources: { requests: Quantities; limits: Quantities };
  volumeMounts: VolumeMount[];
  terminationMessagePolicy?: 'File' | 'FallbackToLogsOnError';
}

export interface EmptyDirVolume {
  name: string;
  emptyDir: { medium?: 'Memory'; sizeLimit: string };
}

export interface PodManifest {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
  spec: {
    nodeName?: string;
    nodeSelector?: Record<string, string>;
    runtimeClassName?: string;
    restartPolicy: 'Always' | 'Never';
    hostname: string;
    automountServiceAccountToken: false;
    enableServiceLinks: false;
    hostNetwork: false;
    hostPID: false;
    hostIPC: false;
    shareProcessNamespace: boolean;
    terminationGracePeriodSeconds: number;
    /** One-off pods: the kubelet kills the pod this long after it started, engine or not. */
    activeDeadlineSeconds?: number;
    securityContext: {
      runAsUser: number;
      runAsGroup: number;
      runAsNonRoot: boolean;
      fsGroup: number;
      seccompProfile: { type: 'RuntimeDefault' };
    };
    /** Session pods: the `reserve` container, whose limit raises the pod's memory cgroup above the runner's. */
    initContainers?: ContainerManifest[];
    containers: ContainerManifest[];
    volumes: EmptyDirVolume[];
  };
}

export interface NetworkPolicyManifest {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: Array<'Ingress' | 'Egress'>;
    ingress: [];
    egress: [];
  };
}

/** How a container ended, as the kubelet recorded it. */
export interface ContainerTermination {
  exitCode: number;
  /** `OOMKilled`, `Error`, `Completed`, `ContainerCannotRun`, … */
  reason?: string;
  signal?: number;
  finishedAt?: string;
}

export interface ContainerStatusInfo {
  name: string;
  /** The runtime's id of the current instance (`containerd://…`); changes with every restart. */
  containerId?: string;
  ready: boolean;
  restartCount: number;
  state: 'waiting' | 'running' | 'terminated' | 'unknown';
  /** Why it waits (`ContainerCreating`, `CrashLoopBackOff`, `ErrImageNeverPull`, …), or the termination reason. */
  reason?: string;
  message?: string;
  /** Set when `state` is `terminated`. */
  terminated?: ContainerTermination;
  /** How the previous instance ended (after a restart): `reason` `OOMKilled` when the OOM killer took it. */
  lastTermination?: ContainerTermination;
}

export interface PodInfo {
  name: string;
  uid: string;
  /** `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`. */
  phase: string;
  /** Why the pod failed as a whole (`Evicted`, …). */
  reason?: string;
  message?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  resourceVersion: string;
  nodeName?: string;
  podIP?: string;
  /** Set once the pod is being deleted. */
  deleting: boolean;
  createdAt?: string;
  containers: ContainerStatusInfo[];
  /** The init containers' statuses (a session pod's `reserve` runs the same image before the runner). */
  initContainers?: ContainerStatusInfo[];
  /**
   * The `PodScheduled` condition, once a scheduler looked at the pod: `False` with reason `Unschedulable` and its
   * words (`0/1 nodes are available: 1 Insufficient memory.`) while no node fits. Absent for a pod no scheduler has
   * seen (none runs, or the pod names its node).
   */
  scheduled?: PodCondition;
}

export interface PodCondition {
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
}

/** One right to ask the API server about (`SelfSubjectAccessReview`), in the client's namespace unless cluster-wide. */
export interface AccessCheck {
  verb: string;
  resource: string;
  subresource?: string;
  /** The API group; the core group when absent. */
  group?: string;
  /** A cluster-scoped resource (`nodes`): asked without a namespace. */
  clusterScoped?: boolean;
  /** One object by name (`namespaces` get: the namespace itself). */
  name?: string;
}

export interface AccessAnswer {
  allowed: boolean;
  /** The authorizer's words, when it gave any. */
  reason?: string;
}

export interface KubeNode {
  name: string;
  /** The `Ready` condition is `True`. */
  ready: boolean;
  unschedulable: boolean;
  labels: Record<string, string>;
  /** Every name of every image the kubelet reports present (normalised, e.g. `docker.io/library/x:1`). */
  images: string[];
}

/** A container's main process reached over the attach API. */
export interface AttachedStreams {
  /** Its stdin. `end()` half-closes where the server speaks `v5.channel.k8s.io`; the container keeps its stdin (`stdinOnce: false`). */
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Drops the connection. Idempotent. */
  close(): void;
  /** Resolves once the connection is gone (closed here, by the server, or the container ended). Never rejects. */
  closed: Promise<void>;
}

export interface ExecResult {
  /** Its exit code; `-1` when the server reported a failure without one. */
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
}

export interface ExecOptions {
  /** Written to the command's stdin, which is then closed (`v5.channel.k8s.io`; on older servers the command must read exactly this much). */
  stdin?: Buffer;
  /** The whole exec, from connect to exit; default the client's exec deadline. */
  timeoutMs?: number;
  /** Most bytes kept per stream; past it the exec is abandoned with `KUBE_EXEC_OUTPUT`. Default 64 MiB. */
  maxOutputBytes?: number;
}

/**
 * A command running in a container with its stdio streamed both ways (the file transfer API: a 1 GiB upload or
 * download goes through without being held in memory).
 */
export interface ExecStream {
  /** Its stdin: pipe into it (writes wait for the socket, so backpressure reaches the caller); `end()` half-closes it. */
  stdin: Writable;
  /** Its stdout; the socket is paused while this stream is over its buffer (the server then stops sending). */
  stdout: Readable;
  /** Its stderr, with the same flow control as stdout: read it (or drop its data) so stdout keeps moving. */
  stderr: Readable;
  /**
   * Settles once the command ended and the connection closed: its exit code (`-1` with the server's `message` when it
   * failed without one, e.g. the command could not start). Rejects with `KUBE_STREAM` when the connection closed
   * without an exit status (dropped, or `close()`d here).
   */
  exit: Promise<ExecExit>;
  /** Drops the connection (the command sees its stdin end). Idempotent. */
  close(): void;
}

export interface ExecExit {
  exitCode: number;
  message?: string;
}

export interface DeletePrecondition {
  /** Delete only while the pod is at this version (a claim by another engine changes it). */
  resourceVersion?: string;
  uid?: string;
}
