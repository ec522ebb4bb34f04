import { Injectable } from '@nestjs/common';
import type { PolicyLayer } from '../../state/policies/policy.types';

/**
 * The plan layers in force in each session right now: those of its admitted, not yet ended actions that are plan
 * steps. A connection a sandbox opens cannot be tied to one action (a session's kernels, processes and concurrent
 * actions share its egress proxy), so the proxy judges it by every plan layer that is in force in the session when
 * it is made.
 */
@Injectable()
export class ActivePlanLayers {
  private readonly bySession = new Map<string, Map<PolicyLayer, number>>();

  /** Puts `layer` in force in the session until the returned function is called (once per action). */
  enter(sessionId: string, layer: PolicyLayer): () => void {
    let layers = this.bySession.get(sessionId);
    if (!layers) this.bySession.set(sessionId, (layers = new Map<PolicyLayer, number>()));
    layers.set(layer, (layers.get(layer) ?? 0) + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const n = (layers.get(layer) ?? 1) - 1;
      if (n > 0) layers.set(layer, n);
      else layers.delete(layer);
      if (layers.size === 0 && this.bySession.get(sessionId) === layers) this.bySession.delete(sessionId);
    };
  }

  /** The plan layers in force in the session, each once. */
  of(sessionId: string): PolicyLayer[] {
    return [...(this.bySession.get(sessionId)?.keys() ?? [])];
  }
}
