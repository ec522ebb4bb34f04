import { randomBytes } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { ApprovalDecision } from '@switchyard/context-graph';
import { ApprovalGate } from '../approvals/approval-gate';
import type { PolicyVerdict } from '../../state/policies/policy.types';
import type { Session } from '../../state/sessions/session.model';

type Ask = Extract<PolicyVerdict, { effect: 'ask' }>;

/**
 * Connections a policy rule asks about, held until a person decides. Each is listed by `GET /v1/approvals` like a
 * waiting action (type `egress`, id `egress_…`, its summary the host and port) and decided with the same
 * `POST /v1/sessions/{id}/actions/{egress id}/approve|reject`. An approval holds for the session's later connections
 * to that host and port (a package install opens dozens); concurrent connections to it wait on one approval. A
 * rejection or an expiry refuses the connections that waited, naming the approval, and is not remembered: the next
 * connection asks again.
 */
@Injectable()
export class EgressApprovals {
  private readonly logger = new Logger('EgressApproval');
  /** Per session: `host:port` approved, and the decisions being waited for. */
  private readonly approved = new Map<string, Set<string>>();
  private readonly waiting = new Map<
    string,
    Map<string, Promise<{ id: string; decision: ApprovalDecision }>>
  >();
  /** Per session: ends its approvals' waits when it ends. */
  private readonly sessions = new Map<string, AbortController>();

  constructor(private readonly gate: ApprovalGate) {}

  /**
   * Waits for the decision on a connection to `host:port` that `verdict` asks about. Answers why it is refused, or
   * undefined once approved. `signal` (the client left) ends this connection's wait, not the approval's.
   */
  async decide(
    session: Session,
    host: string,
    port: number,
    verdict: Ask,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    const key = `${host}:${port}`;
    if (this.approved.get(session.id)?.has(key)) return undefined;
    let perSession = this.waiting.get(session.id);
    if (!perSession) {
      perSession = new Map<string, Promise<{ id: string; decision: ApprovalDecision }>>();
      this.waiting.set(session.id, perSession);
    }
    let pending = perSession.get(key);
    if (!pending) {
      pending = this.ask(session, key, verdict);
      perSession.set(key, pending);
      const settled = () => {
        perSession.delete(key);
        if (perSession.size === 0 && this.waiting.get(session.id) === perSession) {
          this.waiting.delete(session.id);
        }
      };
      pending.then(settled, settled);
    }
    const { id, decision } = await abortable(pending, signal);
    switch (decision.decision) {
      case 'approved':
        return undefined;
      case 'rejected':
        return (
          `egress to ${key} was rejected by ${decision.decidedBy ?? 'an approver'} (approval ${id})` +
          (decision.reason ? `: ${decision.reason}` : '')
        );
      case 'expired':
        return (
          `egress to ${key} waited for approval ${id} until it expired and nobody decided ` +
          '(SWITCHYARD_APPROVAL_TIMEOUT_MS); an approver watches GET /v1/approvals'
        );
    }
  }

  /** The session ended: its approvals are forgotten and those still waiting are withdrawn. */
  forget(sessionId: string): void {
    this.approved.delete(sessionId);
    this.sessions.get(sessionId)?.abort(new Error('the session ended'));
    this.sessions.delete(sessionId);
  }

  private async ask(
    session: Session,
    key: string,
    verdict: Ask,
  ): Promise<{ id: string; decision: ApprovalDecision }> {
    const id = `egress_${randomBytes(12).toString('hex')}`;
    const request = this.gate.request(JSON.stringify(verdict.rule.rule), verdict.layer, [verdict.message]);
    this.logger.log({ msg: 'egress awaiting approval', approvalId: id, sessionId: session.id, target: key });
    // The wait is the approval's own: it ends with a decision, at its expiry or with the session, not with a client.
    let ended = this.sessions.get(session.id);
    if (!ended) this.sessions.set(session.id, (ended = new AbortController()));
    const decision = await this.gate.wait(
      {
        ...request,
        actionId: id,
        sessionId: session.id,
        tenant: session.tenant,
        type: 'egress',
        tool: 'egress',
        summary: `connect to ${key}`,
        risk: { score: 0, level: 'low', reasons: [] },
        tier: 'egress',
      },
      ended.signal,
    );
    this.logger.log({
      msg: `egress ${decision.decision}`,
      approvalId: id,
      sessionId: session.id,
      ...decision,
    });
    if (decision.decision === 'approved') {
      let set = this.approved.get(session.id);
      if (!set) this.approved.set(session.id, (set = new Set()));
      set.add(key);
    }
    return { id, decision };
  }
}

/** `promise`, or a rejection with the signal's reason once it aborts. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error('the connection was closed'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('the connection was closed while it waited for approval'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
