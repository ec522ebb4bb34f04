import * as k8s from '@kubernetes/client-node';
import type { ContainerStatusInfo, ContainerTermination, PodCondition, PodInfo } from './kube-types';
import { KubeApiError, type KubeErrorCode } from './kubernetes.errors';

/** The adapter's translations from `@kubernetes/client-node` 0.22's objects and errors (part of the adapter). */

/** Where the adapter's cluster and account come from, for messages: the server, and the settings that chose it. */
export interface KubeOrigin {
  /** The API server's URL. */
  server: string;
  /** How the operator chose it: `KUBECONFIG /path/kubeconfig, SWITCHYARD_K8S_CONTEXT ctx`, or the in-cluster account. */
  source: string;
  /** The settings to change for another cluster or account: `KUBECONFIG (or SWITCHYARD_K8S_CONTEXT)`. */
  settings: string;
}

/**
 * Says what a failure of the cluster means to an operator, for the failures that are about the cluster rather than
 * the call: no answer (`KUBE_UNAVAILABLE`, `KUBE_TIMEOUT`: which server, from which setting), the credentials refused
 * (401) or a right missing (403: which account's setting). Other errors are returned as they are.
 */
export function explainKubeError(err: KubeApiError, origin: KubeOrigin): KubeApiError {
  let hint: string | undefined;
  if (err.code === 'KUBE_UNAVAILABLE' || err.code === 'KUBE_TIMEOUT') {
    hint =
      `the Kubernetes API server ${origin.server} (from ${origin.source}) does not answer: start it, or set ` +
      `${origin.settings} to a cluster that answers`;
  } else if (err.code === 'KUBE_FORBIDDEN' && err.status === 401) {
    hint =
      `the API server ${origin.server} does not accept the engine's credentials (from ${origin.source}): renew ` +
      `them, or set ${origin.settings} to credentials it accepts`;
  } else if (err.code === 'KUBE_FORBIDDEN') {
    hint =
      `the cluster refuses the engine's account (from ${origin.source}) this right: grant it (docs/kubernetes.md ` +
      `lists the rights the engine uses), or set ${origin.settings} to an account that has it`;
  }
  if (hint === undefined) return err;
  return new KubeApiError(err.code, `${err.message}; ${hint}`, {
    ...(err.status !== undefined && { status: err.status }),
    retriable: err.retriable,
    cause: err.cause ?? err,
    details: { ...err.details, server: origin.server },
  });
}

/**
 * Maps a failed attach or exec WebSocket to a `KubeApiError`: the server's refusal of the upgrade by its status (403:
 * `pods/exec` or `pods/attach` not allowed; 404: no such pod), no connection as `KUBE_UNAVAILABLE`, anything else
 * (a dropped or garbled stream) as `KUBE_STREAM`.
 */
export function toSocketError(what: string, err: unknown): KubeApiError {
  if (err instanceof KubeApiError) return err;
  const e = err as { message?: string; error?: NodeJS.ErrnoException };
  const message = e.error?.message ?? e.message ?? String(err);
  const status = /Unexpected server response: (\d{3})/.exec(message)?.[1];
  if (status !== undefined) {
    const mapped = toKubeError(what, { statusCode: Number(status), body: { message: `HTTP ${status}` } });
    if (mapped.code !== 'KUBE_API' || mapped.retriable) return mapped;
  }
  const errno = e.error?.code ?? (err as NodeJS.ErrnoException).code;
  if (errno !== undefined && CONNECTION_ERRNOS.has(errno)) {
    return new KubeApiError('KUBE_UNAVAILABLE', `${what}: ${message}`, {
      retriable: true,
      cause: err,
      details: { errno },
    });
  }
  return new KubeApiError('KUBE_STREAM', `${what}: ${message}`, { retriable: true, cause: err });
}

/** Failures to reach the server at all (no listener, no route, no name, reset while connecting). */
const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
]);

/** Maps what the client library throws to a `KubeApiError`. */
export function toKubeError(what: string, err: unknown): KubeApiError {
  if (err instanceof KubeApiError) return err;
  if (err instanceof k8s.HttpError || (typeof err === 'object' && err !== null && 'statusCode' in err)) {
    const e = err as { statusCode?: number; body?: { message?: string; reason?: string } };
    const status = e.statusCode ?? 0;
    const message = `${what}: ${e.body?.message ?? e.body?.reason ?? `HTTP ${status}`}`;
    const code: KubeErrorCode =
      status === 401 || status === 403
        ? 'KUBE_FORBIDDEN'
        : status === 404
          ? 'KUBE_NOT_FOUND'
          : status === 409
            ? 'KUBE_CONFLICT'
            : status === 400 || status === 422
              ? 'KUBE_INVALID'
              : 'KUBE_API';
    return new KubeApiError(code, message, {
      status,
      retriable: status === 429 || status >= 500,
      cause: err,
    });
  }
  const e = err as NodeJS.ErrnoException;
  const timeout = e.code === 'ETIMEDOUT' || e.code === 'ESOCKETTIMEDOUT';
  return new KubeApiError(
    timeout ? 'KUBE_TIMEOUT' : 'KUBE_UNAVAILABLE',
    `${what}: ${e.message ?? String(err)}`,
    {
      retriable: true,
      cause: err,
      ...(e.code !== undefined && { details: { errno: e.code } }),
    },
  );
}

function toTermination(t: k8s.V1ContainerStateTerminated | undefined): ContainerTermination | undefined {
  if (!t) return undefined;
  return {
    exitCode: t.exitCode,
    ...(t.reason !== undefined && { reason: t.reason }),
    ...(t.signal !== undefined && { signal: t.signal }),
    ...(t.finishedAt !== undefined && { finishedAt: new Date(t.finishedAt).toISOString() }),
  };
}

function toContainerStatus(s: k8s.V1ContainerStatus): ContainerStatusInfo {
  const st = s.state;
  const state = st?.running ? 'running' : st?.terminated ? 'terminated' : st?.waiting ? 'waiting' : 'unknown';
  const terminated = toTermination(st?.terminated);
  const last = toTermination(s.lastState?.terminated);
  const reason = st?.waiting?.reason ?? st?.terminated?.reason;
  const message = st?.waiting?.message ?? st?.terminated?.message;
  return {
    name: s.name,
    ...(s.containerID !== undefined && { containerId: s.containerID }),
    ready: s.ready,
    restartCount: s.restartCount,
    state,
    ...(reason !== undefined && { reason }),
    ...(message !== undefined && { message }),
    ...(terminated && { terminated }),
    ...(last && { lastTermination: last }),
  };
}

function toScheduled(pod: k8s.V1Pod): PodCondition | undefined {
  const c = pod.status?.conditions?.find((x) => x.type === 'PodScheduled');
  if (!c) return undefined;
  const status = c.status === 'True' || c.status === 'False' ? c.status : 'Unknown';
  return {
    status,
    ...(c.reason !== undefined && { reason: c.reason }),
    ...(c.message !== undefined && { message: c.message }),
  };
}

export function toPodInfo(pod: k8s.V1Pod): PodInfo {
  const m = pod.metadata ?? {};
  const scheduled = toScheduled(pod);
  return {
    name: m.name ?? '',
    uid: m.uid ?? '',
    phase: pod.status?.phase ?? 'Unknown',
    ...(pod.status?.reason !== undefined && { reason: pod.status.reason }),
    ...(pod.status?.message !== undefined && { message: pod.status.message }),
    labels: m.labels ?? {},
    annotations: m.annotations ?? {},
    resourceVersion: m.resourceVersion ?? '',
    ...(pod.spec?.nodeName !== undefined && { nodeName: pod.spec.nodeName }),
    ...(pod.status?.podIP !== undefined && { podIP: pod.status.podIP }),
    deleting: m.deletionTimestamp !== undefined,
    ...(m.creationTimestamp !== undefined && { createdAt: new Date(m.creationTimestamp).toISOString() }),
    containers: (pod.status?.containerStatuses ?? []).map(toContainerStatus),
    ...(pod.status?.initContainerStatuses && {
      initContainers: pod.status.initContainerStatuses.map(toContainerStatus),
    }),
    ...(scheduled && { scheduled }),
  };
}
