/** `ResolvedKubernetesOptions` for the Kubernetes backend's providers. */
export const KUBERNETES_OPTIONS = Symbol('switchyard:sandbox:kubernetes:options');
/** The `KubeClient` (port) the Kubernetes backend talks through. */
export const KUBE_CLIENT = Symbol('switchyard:sandbox:kubernetes:client');
/** Resolves once the configuration was checked against the cluster at start-up (`KubernetesSandbox.validate`). */
export const KUBERNETES_CHECKED = Symbol('switchyard:sandbox:kubernetes:checked');
/** `SessionPods`: each session's pod, its runner and workspace (file API, checkpoints). */
export const KUBERNETES_SESSION_PODS = Symbol('switchyard:sandbox:kubernetes:session-pods');
/** `KubernetesPooledTier` (`SandboxTier` named `pooled`). */
export const KUBERNETES_POOLED_TIER = Symbol('switchyard:sandbox:kubernetes:pooled-tier');
/** `KubernetesOneOffTier` (`SandboxTier` named `container`). */
export const KUBERNETES_ONE_OFF_TIER = Symbol('switchyard:sandbox:kubernetes:one-off-tier');

/**
 * Labels of every pod this backend makes. Values are label-safe forms (`labelValue`); the exact engine and session
 * ids are in the annotations of the same names.
 */
export const K8S_LABELS = Object.freeze({
  /** Every sandbox pod of Switchyard: what the NetworkPolicy and the reaper select. */
  managed: 'switchyard.dev/sandbox',
  engine: 'switchyard.dev/engine',
  session: 'switchyard.dev/session',
  /** `session` (a session pod, warm or claimed) or `container` (a one-off pod). */
  tier: 'switchyard.dev/tier',
  /** Session pods: `starting` → `warm` → `claimed`. */
  state: 'switchyard.dev/state',
  /** Hash of what makes two session pods interchangeable (image, limits, runtime…): only a match is claimed. */
  spec: 'switchyard.dev/spec',
  action: 'switchyard.dev/action',
});

export const K8S_ANNOTATIONS = Object.freeze({
  engine: 'switchyard.dev/engine-id',
  session: 'switchyard.dev/session-id',
  image: 'switchyard.dev/image',
  /** The runner's pid and protocol, as its `hello` said when the pod was warmed. */
  runner: 'switchyard.dev/runner',
  action: 'switchyard.dev/action-id',
});

export const MANAGED_VALUE = 'true';
export const SESSION_TIER_VALUE = 'session';
export const ONE_OFF_TIER_VALUE = 'container';
export type SessionPodState = 'starting' | 'warm' | 'claimed';

/** The container that runs the runner, in every pod. */
export const RUNNER_CONTAINER = 'runner';
/** The NetworkPolicy denying all traffic to and from every Switchyard sandbox pod of the namespace. */
export const NETWORK_POLICY_NAME = 'switchyard-sandbox-deny-all';

/**
 * Grace of every pod deletion. Not 0: a zero grace is a force deletion (the object goes at once, the kubelet finds out
 * later), which crashed the test cluster's kubelet (v1.34, `cgroupsPerQOS: false`: a nil pointer in
 * `doPodResizeAction` for a pod whose resource record was already dropped). The runner dies on the SIGTERM anyway.
 */
export const DELETE_GRACE_SECONDS = 1;
