import type { ErrorKind } from '@switchyard/common';
import { SandboxError } from '../../core/sandbox.errors';

export type KubeErrorCode =
  | 'KUBE_UNAVAILABLE'
  | 'KUBE_TIMEOUT'
  | 'KUBE_FORBIDDEN'
  | 'KUBE_NOT_FOUND'
  | 'KUBE_CONFLICT'
  | 'KUBE_INVALID'
  | 'KUBE_API'
  | 'KUBE_CONFIG'
  | 'KUBE_STREAM'
  | 'KUBE_EXEC_OUTPUT';

/**
 * A call to the Kubernetes API failed; `code` says how, `status` is the HTTP status when there was one. The cluster
 * not answering (`KUBE_UNAVAILABLE`, `KUBE_TIMEOUT`, a 5xx or 429 `KUBE_API`) and refusing the engine's account
 * (`KUBE_FORBIDDEN`: 401 or 403) are a dependency that is down or not set up for the engine (`unavailable`: 503), not
 * an engine fault; the adapter's message then names the server and the setting it came from.
 */
export class KubeApiError extends SandboxError {
  readonly kind: ErrorKind;
  override readonly retriable: boolean;

  constructor(
    readonly code: KubeErrorCode,
    message: string,
    options: {
      status?: number;
      retriable?: boolean;
      cause?: unknown;
      details?: Record<string, unknown>;
    } = {},
  ) {
    super(
      message,
      { ...options.details, ...(options.status !== undefined && { status: options.status }) },
      {
        cause: options.cause,
      },
    );
    this.retriable = options.retriable ?? false;
    this.kind = kubeErrorKind(code, options.status);
  }

  get status(): number | undefined {
    return this.details.status as number | undefined;
  }
}

function kubeErrorKind(code: KubeErrorCode, status: number | undefined): ErrorKind {
  if (code === 'KUBE_UNAVAILABLE' || code === 'KUBE_TIMEOUT' || code === 'KUBE_FORBIDDEN')
    return 'unavailable';
  if (code === 'KUBE_API' && status !== undefined && (status === 429 || status >= 500)) return 'unavailable';
  return 'internal';
}

/** Why the cluster cannot run the engine's pods (`KubernetesUnavailableError`); `/health` reports the same codes. */
export type KubernetesUnavailableCode =
  | 'KUBERNETES_NAMESPACE_MISSING'
  | 'KUBERNETES_FORBIDDEN'
  | 'POD_START_TIMEOUT'
  | 'POD_REJECTED'
  | 'SANDBOX_IMAGE_MISSING';

/**
 * The cluster cannot give the engine what it was configured to use: the namespace is not there, the cluster refuses
 * the engine's pods, a pod does not start in time (no such node, no scheduler, no node with room or matching the
 * selector), its node refuses it (`POD_REJECTED`: the node lacks the selector's labels), or its image cannot be had on the node (`SANDBOX_IMAGE_MISSING`: not there with pull policy `Never`, or
 * the pull failed). A missing dependency, not an engine fault: answered 503 with the code, the message naming what to
 * check and the setting to change. Retriable: the cluster may be fixed meanwhile.
 */
export class KubernetesUnavailableError extends SandboxError {
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;

  constructor(
    readonly code: KubernetesUnavailableCode,
    message: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.details ?? {}, { cause: options.cause });
  }
}

/** The options a start-up failure can blame: the namespace, or the credentials (the kubeconfig and its context). */
export type KubernetesSetupSetting = 'namespace' | 'kubeconfigPath';

/**
 * The configuration cannot work with the cluster it names, found at start-up: the kubeconfig cannot be read, the API
 * server refuses its credentials, the namespace does not exist, or the account lacks a right the engine uses. Thrown
 * while the module starts, so the engine does not; `variable` is how the operator sets the option at fault (the
 * engine exits 78 naming it). Never thrown once the engine runs: then the same causes are 503s and `/health` says so.
 */
export class KubernetesSetupError extends SandboxError {
  readonly code = 'KUBERNETES_SETUP';
  readonly kind: ErrorKind = 'internal';

  constructor(
    readonly setting: KubernetesSetupSetting,
    /** The option's name as the operator sets it (`SWITCHYARD_K8S_NAMESPACE`, `KUBECONFIG`). */
    readonly variable: string,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, { setting, variable }, { cause: options.cause });
  }
}

/**
 * The session's pod or its workspace is gone or unusable: evicted (the workspace outgrew its `sizeLimit`, the node
 * ran short), deleted by someone else, or its runner never came back. `SESSION_POD_LOST` means the workspace is
 * lost: the session is forgotten and its next action starts with a fresh pod and an empty workspace.
 */
export class SessionPodError extends SandboxError {
  readonly kind: ErrorKind = 'internal';
  override readonly retriable: boolean;

  constructor(
    readonly code: 'SESSION_POD_LOST' | 'RUNNER_RESTART_TIMEOUT' | 'WORKSPACE_NOT_VISIBLE' | 'WORKSPACE_TAR',
    message: string,
    options: { retriable?: boolean; cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.details ?? {}, { cause: options.cause });
    this.retriable = options.retriable ?? false;
  }
}
