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

/** A call to the Kubernetes API failed; `code` says how, `status` is the HTTP status when there was one. */
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
    this.kind = code === 'KUBE_UNAVAILABLE' || code === 'KUBE_TIMEOUT' ? 'unavailable' : 'internal';
  }

  get status(): number | undefined {
    return this.details.status as number | undefined;
  }
}

/**
 * The cluster cannot give the engine what it was configured to use: the namespace is not there, the cluster refuses
 * the engine's pods, or a pod does not start in time (no such node, a node that is not Ready, an image that will not
 * come). A missing dependency, not an engine fault: answered 503 with the code, the message naming what to check and
 * the setting to change. Retriable: the cluster may be fixed meanwhile.
 */
export class KubernetesUnavailableError extends SandboxError {
  readonly kind: ErrorKind = 'unavailable';
  override readonly retriable = true;

  constructor(
    readonly code: 'KUBERNETES_NAMESPACE_MISSING' | 'KUBERNETES_FORBIDDEN' | 'POD_START_TIMEOUT',
    message: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.details ?? {}, { cause: options.cause });
  }
}

/**
 * A job asks for something this backend cannot give (`EGRESS_UNSUPPORTED`, `CALL_CHANNEL_UNSUPPORTED`): the engine
 * should not route such a job to the Kubernetes tiers. Not retriable.
 */
export class KubernetesUnsupportedError extends SandboxError {
  readonly kind: ErrorKind = 'unprocessable';

  constructor(
    readonly code: 'EGRESS_UNSUPPORTED' | 'CALL_CHANNEL_UNSUPPORTED',
    message: string,
  ) {
    super(message);
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
