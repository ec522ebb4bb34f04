import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock, ForbiddenError } from '@switchyard/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ENGINE_POLICY, type EnginePolicy } from './engine-policy';
import type { Principal } from '../../platform/auth/principal';
import type { Session } from '../../state/sessions/session.model';
import { compileLayer, type CompiledLayer, decide, type HiddenTool, hiddenBy } from './policy-evaluator';
import { type CompiledRule, readPolicy } from '../../state/policies/policy-rules';
import type { PolicyFacts, PolicyLayer, PolicyRule, PolicyVerdict } from '../../state/policies/policy.types';
import { type TenantPolicy, TenantPolicyStore } from '../../state/policies/tenant-policy.store';

/** The policy that applies to a session: each layer with where it came from, and the tools it hides. */
export interface EffectivePolicy {
  layers: PolicyLayer[];
  /** Who decides the session's approvals: admin keys only, or its tenant's key too. */
  approvers: EngineConfig['policy']['approvers'];
  approvalTimeoutMs: number;
}

/**
 * The policy layers of every action: the engine's (SWITCHYARD_POLICY_FILE), its tenant's, its session's and, for a
 * plan's steps, the plan's. Layers are compiled once each (sessions and plans keep their own).
 */
@Injectable()
export class PolicyService {
  private readonly engineLayer: CompiledLayer;
  private readonly tenantLayers = new WeakMap<TenantPolicy, CompiledLayer>();
  private readonly sessionLayers = new WeakMap<Session, CompiledLayer>();
  private readonly planLayers = new WeakMap<PolicyLayer, CompiledLayer>();
  private readonly hostLayers = new WeakMap<CompiledLayer, CompiledLayer>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly tenants: TenantPolicyStore,
    @Inject(ENGINE_POLICY) engine: EnginePolicy,
  ) {
    const { file, rules } = engine;
    this.engineLayer = compileLayer({
      layer: 'engine',
      source: file ? `SWITCHYARD_POLICY_FILE (${file})` : 'none (SWITCHYARD_POLICY_FILE unset)',
      rules,
    });
  }

  /** The decision on an action of `session` (a plan's step: with the plan's layer). */
  decide(session: Session, facts: PolicyFacts, plan?: PolicyLayer): PolicyVerdict {
    return decide(this.layersOf(session.tenant, session, plan), facts);
  }

  /**
   * The decision on a connection one of the session's sandboxes opens to `host` (canonical: see the egress proxy),
   * by the host rules of every layer, evaluated when the connection is made rather than only on the hosts an
   * action's text names (which code can hide: `h=allowed; curl http://$h.test/`). See `hostRulesOf`.
   */
  decideHost(session: Session, host: string, plan?: PolicyLayer): PolicyVerdict {
    const layers = this.layersOf(session.tenant, session, plan).map((layer) => {
      let compiled = this.hostLayers.get(layer);
      if (!compiled) this.hostLayers.set(layer, (compiled = hostRulesOf(layer)));
      return compiled;
    });
    return decide(layers, { tool: `egress to ${host}`, type: 'egress', hosts: [host] });
  }

  /** Why each hidden tool is hidden for a tenant, or for one of its sessions; tools not named are offered. */
  hidden(tenant: string, tools: PolicyFacts[], session?: Session): HiddenTool[] {
    const layers = this.layersOf(tenant, session);
    return tools.map((t) => hiddenBy(layers, t)).filter((h): h is HiddenTool => h !== undefined);
  }

  effective(session: Session): EffectivePolicy {
    return {
      layers: this.layersOf(session.tenant, session).map(({ layer, source, rules }) => ({
        layer,
        source,
        rules,
      })),
      approvers: this.config.policy.approvers,
      approvalTimeoutMs: this.config.policy.approvalTimeoutMs,
    };
  }

  /** A tenant's own layer, as set; `undefined` when none is. Admins read any tenant's, a tenant its own. */
  tenantPolicy(caller: Principal, tenant: string): TenantPolicy | undefined {
    this.mayRead(caller, tenant);
    return this.tenants.get(tenant);
  }

  /** Sets a tenant's layer (admins only). Throws `InvalidInputError` naming the rule at fault. */
  async setTenantPolicy(caller: Principal, tenant: string, body: unknown): Promise<TenantPolicy> {
    this.mustAdminister(caller);
    const policy: TenantPolicy = {
      tenant,
      rules: readPolicy(body, 'body'),
      updatedAt: this.clock.now().toISOString(),
      updatedBy: caller.id,
    };
    await this.tenants.put(policy);
    return policy;
  }

  /** Removes a tenant's layer (admins only); true when there was one. */
  async deleteTenantPolicy(caller: Principal, tenant: string): Promise<boolean> {
    this.mustAdminister(caller);
    return this.tenants.delete(tenant);
  }

  /** Reads a session's or a plan's rules (`field` names where they were sent). */
  read(value: unknown, field: string): PolicyRule[] {
    return readPolicy(value, field);
  }

  private layersOf(tenant: string, session?: Session, plan?: PolicyLayer): CompiledLayer[] {
    const layers = [this.engineLayer, this.tenantLayer(tenant)];
    if (session) layers.push(this.sessionLayer(session));
    if (plan) {
      let compiled = this.planLayers.get(plan);
      if (!compiled) this.planLayers.set(plan, (compiled = compileLayer(plan)));
      layers.push(compiled);
    }
    return layers;
  }

  private tenantLayer(tenant: string): CompiledLayer {
    const policy = this.tenants.get(tenant);
    if (!policy) return { layer: 'tenant', source: 'none (no tenant policy set)', rules: [], compiled: [] };
    let compiled = this.tenantLayers.get(policy);
    if (!compiled) {
      compiled = compileLayer({
        layer: 'tenant',
        source: `PUT /v1/tenants/${tenant}/policy by ${policy.updatedBy} at ${policy.updatedAt}`,
        rules: policy.rules,
      });
      this.tenantLayers.set(policy, compiled);
    }
    return compiled;
  }

  private sessionLayer(session: Session): CompiledLayer {
    let compiled = this.sessionLayers.get(session);
    if (!compiled) {
      const rules = session.policy?.rules ?? [];
      compiled = compileLayer({
        layer: 'session',
        source:
          rules.length > 0 ? `POST /v1/sessions (session ${session.id})` : 'none (the session set no policy)',
        rules,
      });
      this.sessionLayers.set(session, compiled);
    }
    return compiled;
  }

  private mustAdminister(caller: Principal): void {
    if (!caller.admin) {
      throw new ForbiddenError(
        'only an admin key (SWITCHYARD_ADMIN_KEYS) may set or remove a tenant policy',
        'ADMIN_ONLY',
      );
    }
  }

  private mayRead(caller: Principal, tenant: string): void {
    if (!caller.admin && caller.tenant !== tenant) {
      throw new ForbiddenError(
        `a key may read its own tenant's policy (${caller.tenant}) only; admins read any`,
        'ADMIN_ONLY',
      );
    }
  }
}

const never = (): boolean => false;
const always = (): boolean => true;

/**
 * A layer as a connection is judged by it. A connection carries its host and nothing else (it cannot be tied to one
 * action: a session's background processes and kernels share the proxy), so each rule is kept at its place (its
 * number in messages) but matches by its host patterns alone:
 * - a rule that names `host` matches the connection when one of its host patterns does, whatever else it names (a
 *   deny or ask scoped to, say, python code applies to every connection to that host: the safe side);
 * - a deny or ask rule that names no host concerns actions, decided when they are submitted: it never matches here;
 * - an allow rule that names no host lets actions through whatever they connect to: it matches every connection, so
 *   a layer restricts hosts only when all its allow rules name hosts.
 */
function hostRulesOf(layer: CompiledLayer): CompiledLayer {
  const compiled = layer.compiled.map((c): CompiledRule => {
    const host = c.fields.host;
    if (host) return { rule: c.rule, fields: { host } };
    return { rule: c.rule, fields: { host: c.rule.effect === 'allow' ? always : never } };
  });
  return { ...layer, compiled };
}
