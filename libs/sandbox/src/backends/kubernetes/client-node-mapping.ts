import * as k8s from '@kubernetes/client-node';
import type { ContainerStatusInfo, ContainerTermination, PodInfo } from './kube-types';
import { KubeApiError, type KubeErrorCode } from './kubernetes.errors';

/** The adapter's translations from `@kubernetes/client-node` 0.22's objects and errors (part of the adapter). */

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

export function toPodInfo(pod: k8s.V1Pod): PodInfo {
  const m = pod.metadata ?? {};
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
  };
}
