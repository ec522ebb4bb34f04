import { Inject, Injectable } from '@nestjs/common';
import { KUBERNETES_SESSION_PODS, type SessionPods } from '@switchyard/sandbox';
import { PodWorkspaceIo } from '@switchyard/workspace';

/** Checkpoints of pod workspaces (`PodCheckpointStore`) reach them as tars, through the session pods. */
@Injectable()
export class SessionPodsIo extends PodWorkspaceIo {
  constructor(@Inject(KUBERNETES_SESSION_PODS) private readonly pods: SessionPods) {
    super();
  }

  tarOut(sessionId: string): Promise<Buffer> {
    return this.pods.tarOut(sessionId);
  }

  tarIn(sessionId: string, tar: Buffer, options: { replace: boolean }): Promise<void> {
    return this.pods.tarIn(sessionId, tar, options);
  }
}
