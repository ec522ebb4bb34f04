import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { CLOCK, type Clock, ForbiddenError } from '@switchyard/common';
import type { ApprovalDecision, ApprovalRequest } from '@switchyard/context-graph';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { Principal } from '../../platform/auth/principal';

/** An action waiting for a person's decision, as the approvals list shows it. */
export interface PendingApproval extends ApprovalRequest {
  actionId: string;
  sessionId: string;
  tenant: string;
  type: string;
  /** The tool it calls (`python`, `browser_upload`, a skill…). */
  tool: string;
  /** A short, redacted summary of its input. */
  summary: string;
  risk: { score: number; level: string; reasons: string[] };
  tier: string;
}

interface Waiter {
  pending: PendingApproval;
  resolve: (decision: ApprovalDecision) => void;
  timer: NodeJS.Timeout;
}

/** Why the wait ended early, as an Error (a signal's reason may be anything). */
const abortReason = (signal: AbortSignal): Error =>
  signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? 'aborted'));

/** What deciding answered. */
export type Decided = ApprovalDecision & { actionId: string; sessionId: string };

/**
 * Actions waiting for approval, each until a person decides or its time runs out. The engine awaits `wait` at the
 * action's turn and records whatever it resolves with; `decide` is the REST edge's. Nothing here is durable: an
 * engine that stops while actions wait records them `interrupted` at its next start.
 */
@Injectable()
export class ApprovalGate implements OnApplicationShutdown {
  private readonly waiters = new Map<string, Waiter>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /** The request an `ask` verdict makes now: until SWITCHYARD_APPROVAL_TIMEOUT_MS from now. */
  request(rule: string, layer: string, reasons: string[]): ApprovalRequest {
    const now = this.clock.now();
    return {
      rule,
      layer,
      reasons,
      requestedAt: now.toISOString(),
      expiresAt: new Date(now.getTime() + this.config.policy.approvalTimeoutMs).toISOString(),
    };
  }

  /**
   * Resolves with the decision, or `expired` at `expiresAt`. Rejects with the signal's reason when the action is
   * cancelled (its session ends, the engine shuts down) while it waits.
   */
  wait(pending: PendingApproval, signal: AbortSignal): Promise<ApprovalDecision> {
    if (signal.aborted) return Promise.reject(abortReason(signal));
    return new Promise<ApprovalDecision>((resolve, reject) => {
      const done = (decision: ApprovalDecision) => {
        clearTimeout(waiter.timer);
        this.waiters.delete(pending.actionId);
        signal.removeEventListener('abort', onAbort);
        resolve(decision);
      };
      const onAbort = () => {
        clearTimeout(waiter.timer);
        this.waiters.delete(pending.actionId);
        reject(abortReason(signal));
      };
      const left = Math.max(0, new Date(pending.expiresAt).getTime() - this.clock.now().getTime());
      const waiter: Waiter = {
        pending,
        resolve: done,
        timer: setTimeout(
          () => done({ decision: 'expired', decidedAt: this.clock.now().toISOString() }),
          left,
        ),
      };
      waiter.timer.unref();
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.set(pending.actionId, waiter);
    });
  }

  /** The action waiting, when it is one of the session's. */
  find(sessionId: string, actionId: string): PendingApproval | undefined {
    const waiter = this.waiters.get(actionId);
    return waiter?.pending.sessionId === sessionId ? waiter.pending : undefined;
  }

  /** Who may decide the approvals of a tenant's sessions (SWITCHYARD_APPROVERS). */
  mayDecide(caller: Principal, tenant: string): boolean {
    return caller.admin || (this.config.policy.approvers === 'tenant' && caller.tenant === tenant);
  }

  /**
   * Decides a waiting action. The caller must be an approver of its tenant (403 otherwise); `undefined` when the
   * action is not waiting (the edge tells a missing action from one already decided).
   */
  decide(
    caller: Principal,
    pending: PendingApproval,
    decision: 'approved' | 'rejected',
    reason?: string,
  ): Decided | undefined {
    if (!this.mayDecide(caller, pending.tenant)) {
      throw new ForbiddenError(
        this.config.policy.approvers === 'admin'
          ? 'only an admin key (SWITCHYARD_ADMIN_KEYS) may approve or reject actions (SWITCHYARD_APPROVERS=admin)'
          : "only the session's own key or an admin key may approve or reject its actions",
        'NOT_AN_APPROVER',
      );
    }
    const waiter = this.waiters.get(pending.actionId);
    if (!waiter) return undefined;
    const decided: ApprovalDecision = {
      decision,
      decidedAt: this.clock.now().toISOString(),
      decidedBy: caller.id,
      ...(reason !== undefined && { reason }),
    };
    waiter.resolve(decided);
    return { ...decided, actionId: pending.actionId, sessionId: pending.sessionId };
  }

  /** Every action waiting that the caller may decide, oldest first. */
  list(caller: Principal): PendingApproval[] {
    return [...this.waiters.values()]
      .map((w) => w.pending)
      .filter((p) => this.mayDecide(caller, p.tenant) || p.tenant === caller.tenant)
      .sort((a, b) => a.requestedAt.localeCompare(b.requestedAt) || a.actionId.localeCompare(b.actionId));
  }

  onApplicationShutdown(): void {
    // The engine cancelled every waiting action before this (its drain); timers left would only keep a test alive.
    for (const w of this.waiters.values()) clearTimeout(w.timer);
    this.waiters.clear();
  }
}
