import type { Session } from '../../state/sessions/session.model';
import type { PolicyRule } from '../../state/policies/policy.types';
import { policyServiceForTests } from './policy.testing';

const session = (rules: PolicyRule[] = []): Session => ({
  id: 'ses_1',
  tenant: 'acme',
  createdAt: new Date(0),
  lastActiveAt: new Date(0),
  ttlSeconds: 600,
  metadata: {},
  maxConcurrentActions: 1,
  network: { allow: ['*'] },
  policy: { rules },
});

/** `PolicyService.decideHost`: a connection judged by the host rules of every layer, at connect time. */
describe('PolicyService.decideHost', () => {
  it("applies a tenant's host deny to the connection, naming the layer and the rule", () => {
    const policies = policyServiceForTests([], {
      acme: [{ effect: 'deny', match: { host: 'allowed.test' }, reason: 'not this one' }],
    });
    const verdict = policies.decideHost(session(), 'allowed.test');
    expect(verdict).toMatchObject({ effect: 'deny', layer: 'tenant', rule: { index: 0 } });
    expect(verdict.effect === 'deny' && verdict.message).toContain('egress to allowed.test is blocked');
    expect(verdict.effect === 'deny' && verdict.message).toContain('not this one');
    expect(policies.decideHost(session(), 'pypi.test')).toEqual({ effect: 'allow' });
  });

  it('takes every layer: engine, tenant, session and a plan', () => {
    const policies = policyServiceForTests([{ effect: 'deny', match: { host: '*.evil.test' } }], {
      acme: [{ effect: 'ask', match: { host: 'ask.test' } }],
    });
    const s = session([{ effect: 'deny', match: { host: 'session.test' } }]);
    expect(policies.decideHost(s, 'a.evil.test')).toMatchObject({ effect: 'deny', layer: 'engine' });
    expect(policies.decideHost(s, 'ask.test')).toMatchObject({ effect: 'ask', layer: 'tenant' });
    expect(policies.decideHost(s, 'session.test')).toMatchObject({ effect: 'deny', layer: 'session' });
    const plan = {
      layer: 'plan' as const,
      source: 'plan p',
      rules: [{ effect: 'deny' as const, match: { host: 'plan.test' } }],
    };
    expect(policies.decideHost(s, 'plan.test', plan)).toMatchObject({ effect: 'deny', layer: 'plan' });
    expect(policies.decideHost(s, 'plan.test')).toEqual({ effect: 'allow' });
  });

  it('judges a rule by its host patterns alone; rules naming no host concern actions, not connections', () => {
    const policies = policyServiceForTests([], {
      acme: [
        // Scoped to python, but a connection cannot be tied to python: the host part applies (the safe side).
        { effect: 'deny', match: { host: 'scoped.test', language: 'python' } },
        // A deny of every bash action is for bash actions when submitted, not for connections.
        { effect: 'deny', match: { language: 'bash' } },
      ],
    });
    expect(policies.decideHost(session(), 'scoped.test')).toMatchObject({
      effect: 'deny',
      rule: { index: 0 },
    });
    expect(policies.decideHost(session(), 'other.test')).toEqual({ effect: 'allow' });
  });

  it('restricts hosts by a layer whose allow rules all name hosts, not by one that allows actions whatever they reach', () => {
    const hostsOnly = policyServiceForTests([], {
      acme: [{ effect: 'allow', match: { host: ['pypi.test', '*.pythonhosted.test'] } }],
    });
    expect(hostsOnly.decideHost(session(), 'files.pythonhosted.test')).toEqual({ effect: 'allow' });
    expect(hostsOnly.decideHost(session(), 'other.test')).toMatchObject({ effect: 'deny', layer: 'tenant' });
    const anyHost = policyServiceForTests([], {
      acme: [
        { effect: 'allow', match: { host: 'pypi.test' } },
        { effect: 'allow', match: { tool: 'python' } },
      ],
    });
    expect(anyHost.decideHost(session(), 'other.test')).toEqual({ effect: 'allow' });
  });
});
