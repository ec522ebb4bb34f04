import type {
  AccessAnswer,
  AccessCheck,
  AttachedStreams,
  DeletePrecondition,
  ExecOptions,
  ExecResult,
  ExecStream,
  KubeNode,
  NetworkPolicyManifest,
  PodInfo,
  PodManifest,
} from './kube-types';

export type * from './kube-types';

/**
 * The Kubernetes API as the sandbox tiers need it: one namespace, pods, their attach and exec streams, and one
 * NetworkPolicy. The adapter (`ClientNodeKubeClient`) is the only code that knows the client library.
 *
 * Contract, for every method:
 * - it settles within its deadline (the client's `apiTimeoutMs`, or the exec's own timeout): a call the server does
 *   not answer in time rejects with `KubeApiError` code `KUBE_TIMEOUT` (retriable);
 * - failures are `KubeApiError`s (a `SandboxError`) with a `code` and `retriable`: `KUBE_UNAVAILABLE` (no
 *   connection; retriable), `KUBE_FORBIDDEN` (RBAC), `KUBE_NOT_FOUND`, `KUBE_CONFLICT`, `KUBE_INVALID` (the server
 *   refused the object), `KUBE_API` (any other status; retriable for 5xx and 429);
 * - the exceptions below (a 404 on delete, a 409 on claim) are answers, not errors.
 */
export abstract class KubeClient {
  /** The one namespace every call works in. */
  abstract readonly namespace: string;

  /** The API server's URL, for messages. */
  get server(): string {
    return 'the API server';
  }

  /** Where the cluster and the account come from (`KUBECONFIG /path, context x`), for messages. */
  get source(): string {
    return 'its configuration';
  }

  /** The API server's version (`v1.34.4`); rejects when it does not answer. */
  abstract ping(): Promise<string>;

  /** The user the server takes the engine for (`SelfSubjectReview`), or `undefined` when it does not say. */
  abstract whoAmI(): Promise<string | undefined>;

  /**
   * Whether the engine's account may do `check` in this namespace (or cluster-wide): a `SelfSubjectAccessReview`, the
   * server's authorizers' own answer. Rejects (`KUBE_FORBIDDEN`) when even asking is refused.
   */
  abstract reviewAccess(check: AccessCheck): Promise<AccessAnswer>;

  /** True when the namespace exists (and is not being deleted). */
  abstract namespaceExists(): Promise<boolean>;

  /** Every node, with readiness and the images its kubelet reports. Needs `list nodes` (cluster-scoped). */
  abstract nodes(): Promise<KubeNode[]>;

  /** Names of the nodes whose `Ready` condition is `True` and that take new pods. */
  async nodeNames(): Promise<string[]> {
    return (await this.nodes()).filter((n) => n.ready && !n.unschedulable).map((n) => n.name);
  }

  /** Creates the pod; resolves with it as the server stored it. A name in use rejects with `KUBE_CONFLICT`. */
  abstract createPod(manifest: PodManifest): Promise<PodInfo>;

  /** The pod, or `undefined` when there is none by that name. */
  abstract readPod(name: string): Promise<PodInfo | undefined>;

  /** Pods matching a label selector (`a=b,c`), in this namespace. */
  abstract listPods(labelSelector: string): Promise<PodInfo[]>;

  /**
   * Deletes the pod with `graceSeconds` of grace (0: SIGKILL now). Resolves `true` when it is gone or going (a 404
   * counts: it is already gone), `false` only when `precondition` no longer holds (the pod changed: someone claimed
   * it). Resolves once the API accepted the deletion, not once the kubelet finished.
   */
  abstract deletePod(name: string, graceSeconds: number, precondition?: DeletePrecondition): Promise<boolean>;

  /**
   * Sets `labels` (and `annotations`) on the pod, only if it is still at `resourceVersion`: an update carrying
   * `metadata.resourceVersion`, so the server refuses it with 409 when anything changed the pod since it was read.
   * Resolves `true` when this call won, `false` on that conflict (another engine claimed it first, or the kubelet
   * updated its status: read it again to tell) and on a 404 (the pod is gone). This is how two engines sharing a
   * namespace never claim the same warm pod.
   */
  abstract claim(
    name: string,
    resourceVersion: string,
    labels: Record<string, string>,
    annotations?: Record<string, string>,
  ): Promise<boolean>;

  /**
   * Attaches to the main process of a running container (created with `stdin: true`, `stdinOnce: false`,
   * `tty: false`): its stdin, stdout and stderr, from now on (earlier output is not replayed). Rejects when the
   * container does not run. The streams end when the connection does: the engine closed it, the container ended,
   * or the server dropped it.
   */
  abstract attach(name: string, container: string): Promise<AttachedStreams>;

  /**
   * Runs `argv` in a running container (as its user, within its limits), collects its output and exit code. A
   * non-zero exit is an answer, not an error. Output past `maxOutputBytes` ends the call with `KUBE_EXEC_OUTPUT`.
   */
  abstract exec(name: string, container: string, argv: string[], options?: ExecOptions): Promise<ExecResult>;

  /**
   * Starts `argv` in a running container with its stdin, stdout and stderr as streams (no deadline but the
   * connection's: the caller ends it). Resolves once the connection is up; a non-zero exit is an answer in `exit`.
   */
  abstract execStream(name: string, container: string, argv: string[]): Promise<ExecStream>;

  /**
   * Creates the NetworkPolicy unless one of that name exists (its contents are then left alone). Resolves `true`
   * when this call created it.
   */
  abstract ensureNetworkPolicy(manifest: NetworkPolicyManifest): Promise<boolean>;

  /** Releases connections and timers. */
  close(): void {}
}
