import { Inject, Injectable } from '@nestjs/common';
import { InvalidInputError, NotFoundError, type Tier, TIERS } from '@switchyard/common';
import { type ActionRecord, ContextGraph } from '@switchyard/context-graph';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ActionsRunningError, NoCheckpointError } from '../../session/checkpoints/checkpoint.errors';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { ActionRequest } from '../../state/actions/action-request';
import { RetryRefusedError } from './engine.errors';

/** What a retry runs: the request (revised or the original's), the action it retries, and its tier floor. */
export interface RetryPlan {
  request: ActionRequest;
  retryOf: string;
  /** A code retry never runs in a weaker tier than its original; one above it when escalating. */
  minTier?: Tier;
  /** The checkpoint to put the workspace back to first (`restore: true`). */
  restore?: string;
}

/**
 * Decides whether and how an action may be retried: the original must exist and have ended, the chain must stay
 * within SWITCHYARD_MAX_RETRY_DEPTH, and a code retry keeps (or, escalating, raises) its original's tier.
 */
@Injectable()
export class RetryPolicy {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly graph: ContextGraph,
    private readonly sessions: SessionsService,
  ) {}

  async plan(
    session: Session,
    actionId: string,
    retry: { revised?: ActionRequest; escalate?: boolean; restore?: boolean },
  ): Promise<RetryPlan> {
    const sessionId = session.id;
    const original = await this.graph.getAction(sessionId, actionId);
    if (!original)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    if (original.status === 'running') {
      throw new RetryRefusedError(`action ${actionId} is still running; cancel it or wait for it to end`, {
        actionId,
      });
    }
    await this.checkDepth(sessionId, original);
    const restore = retry.restore ? await this.undoPoint(session, original) : undefined;
    const undo = restore !== undefined ? { restore } : {};
    // The graph keeps the input as it was validated and run: the same request type the edge builds.
    const request = retry.revised ?? (original.input as unknown as ActionRequest);
    if (request.type !== 'code') {
      // A revised action in the body contradicts `escalate` itself (400); the original's type is its state (409).
      if (retry.escalate && retry.revised) {
        throw new InvalidInputError('escalate', 'only code actions run in tiers that can be escalated');
      }
      if (retry.escalate) {
        throw new RetryRefusedError(
          `action ${actionId} is a ${request.type} action; only code actions run in tiers that can be escalated`,
          { actionId, field: 'escalate' },
        );
      }
      return { request, retryOf: actionId, ...undo };
    }
    const minTier = this.floor(original, retry.escalate ?? false);
    return { request, retryOf: actionId, ...(minTier && { minTier }), ...undo };
  }

  /**
   * The checkpoint a retry with `restore: true` goes back to: the one taken before the original, or before the
   * nearest action of its retry chain that has one (a retry of a retry undoes back to the first checkpointed try).
   * 409 when there is none, when it was deleted, or while another action of the session runs.
   */
  private async undoPoint(session: Session, original: ActionRecord): Promise<string> {
    let found: ActionRecord['checkpoint'];
    let hops = 0;
    for (let a: ActionRecord | undefined = original; a && !found; hops++) {
      found = a.checkpoint;
      if (a.retryOf === undefined || hops > this.config.actions.maxRetryDepth) break;
      a = await this.graph.getAction(session.id, a.retryOf);
    }
    if (!found) {
      throw new NoCheckpointError(
        `action ${original.id} has no checkpoint to restore: neither it nor the actions it retries ran with ` +
          `"checkpoint": "before"`,
        { actionId: original.id, field: 'restore' },
      );
    }
    if (found.deletedAt !== undefined) {
      throw new NoCheckpointError(
        `the checkpoint taken before action ${original.id} (${found.id}) was deleted at ${found.deletedAt}`,
        { actionId: original.id, checkpointId: found.id, field: 'restore' },
      );
    }
    const running = this.sessions.activeActions(session.id);
    if (running > 0) {
      throw new ActionsRunningError(
        `${running} action(s) of session ${session.id} are running; a retry with restore: true waits for none ` +
          `(cancel them or wait for them)`,
        { sessionId: session.id, running },
      );
    }
    return found.id;
  }

  /** Chains longer than SWITCHYARD_MAX_RETRY_DEPTH are refused (409). */
  private async checkDepth(sessionId: string, original: ActionRecord): Promise<void> {
    const max = this.config.actions.maxRetryDepth;
    // Hops from the original back to the first action of its chain; the retry adds one.
    let hops = 0;
    for (let id = original.retryOf; id !== undefined && hops < max; hops++) {
      id = (await this.graph.getAction(sessionId, id))?.retryOf;
    }
    if (hops + 1 > max) {
      throw new RetryRefusedError(
        `action ${original.id} is already retry ${hops} of its chain; SWITCHYARD_MAX_RETRY_DEPTH allows ${max}`,
        { actionId: original.id, depth: hops },
      );
    }
  }

  /** The original's tier (one up when escalating); none when the original never reached a sandbox tier. */
  private floor(original: ActionRecord, escalate: boolean): Tier | undefined {
    let floor = (TIERS as readonly string[]).indexOf(original.tier);
    if (!escalate) return floor < 0 ? undefined : TIERS[floor];
    const limited = original.error?.class === 'timeout' || original.error?.class === 'limit';
    if (!limited) {
      // How the original ended is its state, not a fault of this request: a conflict, as "no stronger tier" is.
      throw new RetryRefusedError(
        `escalation is for actions that failed on their tier's limits (timeout, out of memory, output cap); ` +
          `${original.id} ended ${original.status}${original.error ? ` (${original.error.class})` : ''}`,
        { actionId: original.id, field: 'escalate' },
      );
    }
    if (floor < 0 || floor === TIERS.length - 1) {
      throw new RetryRefusedError(
        `action ${original.id} ran in "${original.tier}", there is no stronger tier`,
        {
          actionId: original.id,
        },
      );
    }
    floor += 1;
    return TIERS[floor];
  }
}
