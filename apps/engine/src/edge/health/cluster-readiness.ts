import type { ModuleRef } from '@nestjs/core';
import { KubernetesSandbox, type TierAvailability } from '@switchyard/sandbox';

/** Whether the Kubernetes backend can give sessions pods, and if not why (`code`: what tells causes apart). */
export interface ClusterReadiness {
  ready: boolean;
  reason?: string;
  code?: string;
}

/**
 * The Kubernetes backend's readiness, for `/health` and `/health/ready`: its tiers' probe (the API server, the
 * credentials and rights, the namespace, a Ready node, the image on it), and then whether pods of the sandbox image
 * actually start: a cluster that answers and is set up may still run none (no scheduler, no node with room, an image
 * the node cannot pull), which only a pod that tried says (`KubernetesSandbox.podStartFailure`).
 */
export function clusterReadiness(ref: ModuleRef, pooled: TierAvailability | undefined): ClusterReadiness {
  if (!pooled) return { ready: false, reason: 'not checked: shutting down' };
  if (!pooled.available) {
    return {
      ready: false,
      ...(pooled.reason !== undefined && { reason: pooled.reason }),
      ...(pooled.code !== undefined && { code: pooled.code }),
    };
  }
  const failure = ref.get(KubernetesSandbox, { strict: false }).podStartFailure();
  if (!failure) return { ready: true };
  return {
    ready: false,
    reason: `sandbox pods do not start (${failure.at}): ${failure.message}`,
    code: failure.code,
  };
}
