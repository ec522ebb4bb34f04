import { Injectable, Logger } from '@nestjs/common';
import { ContextGraph, type ApprovalDecision, type ApprovalRequest } from '@switchyard/context-graph';
import { ApprovalGate } from '../../gates/approvals/approval-gate';
import { SessionEvents } from '../../session/events/session-events';
import { actionFacts } from '../../gates/policies/action-facts';
import { PolicyService } from '../../gates/policies/policy.service';
import type { PolicyFacts, PolicyLayer, PolicyVerdict } from '../../state/policies/policy.types';
import { AfterHooks } from '../../gates/hooks/after-hooks';
import { BeforeHooks } from '../../gates/hooks/before-hooks';
import type { HookedAction } from '../../gates/hooks/hooked-action';
import type { ActionResult } from '@switchyard/common';
import type { Session } from '../../state/sessions/session.model';
import type { Outcome, PreparedAction } from './action-handler.port';
import type { ActionRequest } from '../../state/actions/action-request';

/** An action past its policy: the action to record (a denial when the policy denies it) and the approval it awaits. */
export interface Gated {
  prepared: PreparedAction;
  /** What policies and hooks match of it (its tool among them). */
  facts: PolicyFacts;
  /** Set when a rule asks: the action is recorded `awaiting_approval` and runs only once approved. */
  approval?: ApprovalRequest;
}

/** What a gate's turn answers: a refusal to record instead of running, and what before-hooks noted on it. */
export interface Passage {
  refusal?: Outcome;
  annotations?: Record<string, unknown>;
}

const ruleText = (v: Extract<PolicyVerdict, { effect: 'ask' }>): string => JSON.stringify(v.rule.rule);

/**
 * What stands between an action's admission and its run, and who hears of its end: the policy's verdict, decided
 * when it is submitted (a denial is recorded like any refusal); when a rule asks, a person's approval, awaited at its
 * turn; the before-hooks, asked next; and the after-hooks, told of its result.
 */
@Injectable()
export class ActionGates {
  private readonly logger = new Logger('Approval');

  constructor(
    private readonly policies: PolicyService,
    private readonly approvals: ApprovalGate,
    private readonly graph: ContextGraph,
    private readonly events: SessionEvents,
    private readonly beforeHooks: BeforeHooks,
    private readonly afterHooks: AfterHooks,
  ) {}

  /** The policy's verdict on a prepared action (refusals the handler found stand as they are). */
  check(session: Session, request: ActionRequest, prepared: PreparedAction, plan?: PolicyLayer): Gated {
    const facts = actionFacts(request, prepared);
    if (prepared.denial) return { prepared, facts };
    const verdict = this.policies.decide(session, facts, plan);
    switch (verdict.effect) {
      case 'allow':
        return { prepared, facts };
      case 'deny':
        return {
          facts,
          prepared: {
            tier: prepared.tier,
            risk: prepared.risk,
            denial: { class: 'policy', code: 'POLICY_DENIED', message: verdict.message },
          },
        };
      case 'ask': {
        const reasons = [verdict.message, ...prepared.risk.reasons.map((r) => `risk: ${r}`)];
        return {
          prepared,
          facts,
          approval: this.approvals.request(ruleText(verdict), verdict.layer, reasons),
        };
      }
    }
  }

  /** Announces an action recorded `awaiting_approval` on its session's stream. */
  announce(session: Session, action: HookedAction, gated: Gated): void {
    if (!gated.approval) return;
    this.events.publish(session.id, 'action.awaiting_approval', {
      actionId: action.id,
      tool: gated.facts.tool,
      layer: gated.approval.layer,
      rule: gated.approval.rule,
      reasons: gated.approval.reasons,
      expiresAt: gated.approval.expiresAt,
    });
  }

  /**
   * At the action's turn, before it queues for a slot: waits for its approval when it needs one and records the
   * decision, then asks the before-hooks. Answers the refusal to record instead of running (rejected, expired, denied
   * by a hook) and the hooks' annotations. Cancelling the action while it waits answers an `error` outcome the engine
   * records as `cancelled`.
   */
  async pass(session: Session, action: HookedAction, gated: Gated, signal: AbortSignal): Promise<Passage> {
    const { prepared } = gated;
    if (prepared.denial) return {};
    const base = { tier: prepared.tier, risk: prepared.risk, files: [] };
    const refusal = await this.approve(session, action, gated, signal);
    if (refusal) return { refusal };
    const { denial, annotations } = await this.beforeHooks.run(action, gated.facts, signal);
    return {
      ...(denial && { refusal: { ...base, status: 'denied' as const, error: denial } }),
      ...(annotations && { annotations }),
    };
  }

  /** Queues the ended action's result for the after-hooks. */
  ended(action: HookedAction, gated: Gated, result: ActionResult): void {
    this.afterHooks.enqueue(action, result, gated.facts);
  }

  private async approve(
    session: Session,
    action: HookedAction,
    gated: Gated,
    signal: AbortSignal,
  ): Promise<Outcome | undefined> {
    const { approval, prepared } = gated;
    if (!approval) return undefined;
    const base = { tier: prepared.tier, risk: prepared.risk, files: [] };
    let decision: ApprovalDecision;
    try {
      decision = await this.approvals.wait(
        {
          ...approval,
          actionId: action.id,
          sessionId: session.id,
          tenant: session.tenant,
          type: action.type,
          tool: gated.facts.tool,
          summary: action.inputSummary,
          risk: prepared.risk,
          tier: prepared.tier,
        },
        signal,
      );
    } catch {
      return { ...base, status: 'error' };
    }
    await this.graph.recordApprovalDecision(action.id, decision);
    this.logger.log({
      msg: `action ${decision.decision}`,
      actionId: action.id,
      sessionId: session.id,
      ...decision,
    });
    this.events.publish(session.id, 'action.approval', { actionId: action.id, ...decision });
    switch (decision.decision) {
      case 'approved':
        return undefined;
      case 'rejected':
        return {
          ...base,
          status: 'denied',
          error: {
            class: 'policy',
            code: 'APPROVAL_REJECTED',
            message:
              `${gated.facts.tool} was rejected by ${decision.decidedBy ?? 'an approver'}` +
              (decision.reason ? `: ${decision.reason}` : ''),
          },
        };
      case 'expired':
        return {
          ...base,
          status: 'denied',
          error: {
            class: 'policy',
            code: 'APPROVAL_EXPIRED',
            message:
              `${gated.facts.tool} waited for approval until ${approval.expiresAt} and nobody decided ` +
              '(SWITCHYARD_APPROVAL_TIMEOUT_MS); ask again, or have an approver watch GET /v1/approvals',
          },
        };
    }
  }
}
