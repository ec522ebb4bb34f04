import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { EgressRecord } from '@switchyard/common';
import { type EgressGate, EgressPolicy, SessionEgress } from '@switchyard/network';
import type { SessionEgressAccess } from '@switchyard/sandbox';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ActivePlanLayers } from '../policies/active-plan-layers';
import { PolicyService } from '../policies/policy.service';
import type { PolicyVerdict } from '../../state/policies/policy.types';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../../session/sessions/sessions.service';
import { EgressApprovals } from './egress-approvals';

/** Failures that mean "there is no network here", as code prints them (resolvers, clients, the forwarder). */
const NO_NETWORK =
  /Temporary failure in name resolution|Name or service not known|Could not resolve host|Network is unreachable|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|No address associated with hostname|Failed to establish a new connection|this session has no network/i;

/**
 * Each session's network, as its policy allows: the engine's egress proxy for the session (`SessionEgress`), the
 * access the container tiers get to it, the attempts an action made, and a hint when code met a session without
 * network. The proxy starts on the session's first use and stops when the session ends. Every connection it lets
 * through the network policy is then decided by the host rules of the engine's, the tenant's and the session's policy
 * layers (`PolicyService.decideHost`), at the moment it is made: an `ask` holds it for a person (`EgressApprovals`).
 */
@Injectable()
export class SessionNetwork implements OnModuleInit, OnApplicationShutdown {
  constructor(
    private readonly egress: SessionEgress,
    private readonly sessions: SessionsService,
    private readonly policies: PolicyService,
    private readonly approvals: EgressApprovals,
    private readonly planLayers: ActivePlanLayers,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  onModuleInit(): void {
    this.sessions.onSessionEnd((sessionId) => {
      this.approvals.forget(sessionId);
      return this.egress.close(sessionId);
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.egress.closeAll();
  }

  /** The session's way out for the container tiers, or `undefined` when it has no network. */
  access(session: Session): SessionEgressAccess | undefined {
    if (session.network.allow.length === 0) return undefined;
    return {
      socketDir: this.egress.socketDirOf(session.id),
      listen: async (socketPath) => {
        await this.ready(session);
        return this.egress.listen(session.id, socketPath);
      },
    };
  }

  /** Starts the session's proxy (when it has network), so its socket is there before a sandbox looks for it. */
  async ready(session: Session): Promise<void> {
    await this.egress.open(session.id, this.policyOf(session), this.gateOf(session));
  }

  /**
   * The policy layers' say on each connection of the session. The tenant's layer is read at each connection (an
   * admin's change applies to the next one); so are the plan layers of the session's steps in flight then
   * (`ActivePlanLayers`): the strictest verdict of all of them holds.
   */
  private gateOf(session: Session): EgressGate {
    return async (host, port, signal) => {
      const verdict = this.verdictOf(session, host);
      switch (verdict.effect) {
        case 'allow':
          return undefined;
        case 'deny':
          return verdict.message;
        case 'ask':
          return this.approvals.decide(session, host, port, verdict, signal);
      }
    };
  }

  /** The strictest of the host decisions under each plan layer in force in the session (or none). */
  private verdictOf(session: Session, host: string): PolicyVerdict {
    const plans = this.planLayers.of(session.id);
    if (plans.length === 0) return this.policies.decideHost(session, host);
    const verdicts = plans.map((plan) => this.policies.decideHost(session, host, plan));
    return (
      verdicts.find((v) => v.effect === 'deny') ?? verdicts.find((v) => v.effect === 'ask') ?? verdicts[0]
    );
  }

  /** What the session's sandboxes asked of the proxy since `sinceMs`, for the action that ran then. */
  async attempts(session: Session, sinceMs: number): Promise<EgressRecord[] | undefined> {
    if (session.network.allow.length === 0) return undefined;
    const attempts = await this.egress.attempts(session.id, sinceMs);
    return attempts.map((a) => ({
      host: a.host,
      port: a.port,
      allowed: a.allowed,
      ...(a.reason !== undefined && { reason: a.reason }),
      bytesIn: a.bytesIn,
      bytesOut: a.bytesOut,
    }));
  }

  /** For failed code whose output says it found no network, in a session that has none: how to get some. */
  hints(
    session: Session,
    outcome: { status: string; stdout?: string; stderr?: string },
  ): string[] | undefined {
    if (session.network.allow.length > 0 || outcome.status === 'succeeded') return undefined;
    if (!NO_NETWORK.test(`${outcome.stderr ?? ''}\n${outcome.stdout ?? ''}`)) return undefined;
    const bound = this.config.network.bound;
    return [
      'this session has no network (the default). Create the session with {"network":{"allow":["pypi.org"]}} ' +
        `to reach those hosts from the pooled and one-off tiers (this engine allows: ${bound.isEmpty ? 'nothing; an operator sets SWITCHYARD_EGRESS_ALLOWED' : bound.allow.join(', ')})`,
    ];
  }

  private policyOf(session: Session): EgressPolicy {
    return EgressPolicy.parse(session.network.allow, 'network.allow');
  }
}
