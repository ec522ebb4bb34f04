import { InvalidInputError } from '@switchyard/common';
import { compileLayer, decide, hiddenBy } from './policy-evaluator';
import { compilePattern } from '../../state/policies/policy-pattern';
import { readPolicy } from '../../state/policies/policy-rules';
import type { PolicyFacts, PolicyLayerName, PolicyRule } from '../../state/policies/policy.types';

const layer = (name: PolicyLayerName, rules: PolicyRule[]) =>
  compileLayer({ layer: name, source: `${name} source`, rules });

const python = (over: Partial<PolicyFacts> = {}): PolicyFacts => ({
  tool: 'python',
  type: 'code',
  language: 'python',
  tier: 'subprocess',
  risk: 'low',
  hosts: [],
  ...over,
});
const navigate = (host: string): PolicyFacts => ({
  tool: 'browser_navigate',
  type: 'browser',
  op: 'navigate',
  tier: 'browser',
  risk: 'low',
  hosts: [host],
});

describe('policy patterns', () => {
  it('matches exactly, by glob and by whole-value regex', () => {
    expect(compilePattern('python', 'f')('python')).toBe(true);
    expect(compilePattern('python', 'f')('python3')).toBe(false);
    expect(compilePattern('browser_*', 'f')('browser_navigate')).toBe(true);
    expect(compilePattern('browser_*', 'f')('xbrowser_navigate')).toBe(false);
    expect(compilePattern('proc?ss_*', 'f')('process_start')).toBe(true);
    expect(compilePattern('/file_(delete|move)/', 'f')('file_delete')).toBe(true);
    expect(compilePattern('/file_(delete|move)/', 'f')('file_delete_x')).toBe(false);
    expect(compilePattern('/PYTHON/i', 'f')('python')).toBe(true);
    // Regex metacharacters in a glob are literal.
    expect(compilePattern('a.b*', 'f')('axb')).toBe(false);
  });

  it('refuses regexes RE2 cannot run in linear time (back-references, lookarounds), and broken ones, naming the field', () => {
    for (const bad of ['/(a)\\1/', '/(?<n>a)\\k<n>/', '/(?=a)a/', '/(?<!a)b/', '/[/', '/a{1001}/']) {
      expect(() => compilePattern(bad, 'policy.rules[0].match.tool')).toThrow(InvalidInputError);
      try {
        compilePattern(bad, 'policy.rules[0].match.tool');
      } catch (err) {
        expect((err as InvalidInputError).field).toBe('policy.rules[0].match.tool');
      }
    }
  });
});

describe('readPolicy', () => {
  it('reads rules and names the field at fault', () => {
    expect(readPolicy({ rules: [{ effect: 'deny', match: { tool: 'browser_*' } }] }, 'policy')).toEqual([
      { effect: 'deny', match: { tool: 'browser_*' } },
    ]);
    const field = (value: unknown): string => {
      try {
        readPolicy(value, 'policy');
      } catch (err) {
        return (err as InvalidInputError).field;
      }
      throw new Error('expected a refusal');
    };
    expect(field({ rules: [{ effect: 'maybe' }] })).toBe('policy.rules[0].effect');
    expect(field({ rules: [{ effect: 'deny', match: { colour: 'red' } }] })).toBe(
      'policy.rules[0].match.colour',
    );
    expect(field({ rules: [{}, { effect: 'allow', match: { tool: 3 } }] })).toBe('policy.rules[0].effect');
    expect(field({ rules: [{ effect: 'allow', match: { tool: [] } }] })).toBe('policy.rules[0].match.tool');
    expect(field({ rules: [{ effect: 'ask', match: { risk: '>=severe' } }] })).toBe(
      'policy.rules[0].match.risk',
    );
    expect(field({ rules: 'all' })).toBe('policy.rules');
    expect(field({ rules: [], extra: 1 })).toBe('policy.extra');
    expect(field({ rules: Array.from({ length: 101 }, () => ({ effect: 'allow' })) })).toBe('policy.rules');
  });
});

describe('decide', () => {
  it('allows what no rule concerns', () => {
    expect(decide([layer('engine', []), layer('session', [])], python())).toEqual({ effect: 'allow' });
  });

  it('lets deny win over ask and allow, whatever the layer, and names the rule and layer', () => {
    const verdict = decide(
      [
        layer('engine', [{ effect: 'allow', match: {} }]),
        layer('tenant', [{ effect: 'ask', match: { type: 'browser' } }]),
        layer('session', [{ effect: 'deny', match: { tool: 'browser_*' }, reason: 'no browsing here' }]),
      ],
      navigate('example.com'),
    );
    expect(verdict).toMatchObject({ effect: 'deny', layer: 'session', rule: { layer: 'session', index: 0 } });
    expect(verdict.effect === 'deny' && verdict.message).toContain(
      'browser_navigate is blocked by the session policy',
    );
    expect(verdict.effect === 'deny' && verdict.message).toContain('no browsing here');
    expect(verdict.effect === 'deny' && verdict.message).toContain('POST /v1/sessions');
  });

  it('a lower layer cannot widen: an allow below an upper deny or ask changes nothing', () => {
    const engineDeny = [layer('engine', [{ effect: 'deny', match: { tool: 'python' } }])];
    expect(
      decide([...engineDeny, layer('session', [{ effect: 'allow', match: { tool: 'python' } }])], python()),
    ).toMatchObject({ effect: 'deny', layer: 'engine' });
    const tenantAsk = [layer('tenant', [{ effect: 'ask', match: { risk: '>=medium' } }])];
    expect(
      decide([...tenantAsk, layer('session', [{ effect: 'allow', match: {} }])], python({ risk: 'high' })),
    ).toMatchObject({ effect: 'ask', layer: 'tenant' });
  });

  it('a layer with allow rules allows only what one matches', () => {
    const layers = [layer('tenant', [{ effect: 'allow', match: { type: ['code', 'file'] } }])];
    expect(decide(layers, python())).toEqual({ effect: 'allow' });
    const verdict = decide(layers, navigate('example.com'));
    expect(verdict).toMatchObject({ effect: 'deny', layer: 'tenant' });
    expect(verdict.effect === 'deny' && verdict.rule).toBeUndefined();
    expect(verdict.effect === 'deny' && verdict.message).toContain('none of its allow rules matches it');
    expect(verdict.effect === 'deny' && verdict.message).toContain('admin');
  });

  it('matches risk levels, at-least levels, tiers, languages and hosts', () => {
    const ask = (match: PolicyRule['match']) => [layer('session', [{ effect: 'ask', match }])];
    expect(decide(ask({ risk: 'high' }), python({ risk: 'high' })).effect).toBe('ask');
    expect(decide(ask({ risk: 'high' }), python({ risk: 'medium' })).effect).toBe('allow');
    expect(decide(ask({ risk: '>=medium' }), python({ risk: 'critical' })).effect).toBe('ask');
    expect(decide(ask({ risk: '>=medium' }), python({ risk: 'low' })).effect).toBe('allow');
    expect(decide(ask({ tier: 'container' }), python({ tier: 'container' })).effect).toBe('ask');
    expect(decide(ask({ language: 'bash' }), python()).effect).toBe('allow');
    expect(decide(ask({ host: '*.example.com' }), navigate('www.example.com')).effect).toBe('ask');
    expect(decide(ask({ host: '*.EXAMPLE.com' }), navigate('www.example.com')).effect).toBe('ask');
    expect(decide(ask({ host: '*.example.com' }), navigate('example.org')).effect).toBe('allow');
    // A field the action lacks never matches: a rule on `op` does not concern code.
    expect(decide(ask({ op: 'delete' }), python()).effect).toBe('allow');
  });
});

describe('hiddenBy (the tool list)', () => {
  const tools: PolicyFacts[] = [
    { tool: 'python', type: 'code', language: 'python', hosts: [] },
    { tool: 'browser_navigate', type: 'browser', op: 'navigate', hosts: [] },
    { tool: 'read', type: 'file', op: 'read', hosts: [] },
  ];
  const visible = (...layers: ReturnType<typeof layer>[]) =>
    tools.filter((t) => !hiddenBy(layers, t)).map((t) => t.tool);

  it('hides a tool every call of which is denied, keeps one only some calls of which are', () => {
    expect(visible(layer('session', [{ effect: 'deny', match: { tool: 'browser_*' } }]))).toEqual([
      'python',
      'read',
    ]);
    expect(visible(layer('session', [{ effect: 'deny', match: { tool: 'python', risk: 'high' } }]))).toEqual([
      'python',
      'browser_navigate',
      'read',
    ]);
    expect(visible(layer('session', [{ effect: 'ask', match: { type: 'browser' } }]))).toHaveLength(3);
  });

  it('hides what an allow-list layer cannot allow, but keeps what an ask rule there lets through', () => {
    expect(visible(layer('tenant', [{ effect: 'allow', match: { type: 'file' } }]))).toEqual(['read']);
    expect(
      visible(
        layer('tenant', [
          { effect: 'allow', match: { type: 'file' } },
          { effect: 'ask', match: { tool: 'python' } },
        ]),
      ),
    ).toEqual(['python', 'read']);
    expect(hiddenBy([layer('tenant', [{ effect: 'allow', match: { type: 'file' } }])], tools[0])).toEqual({
      tool: 'python',
      layer: 'tenant',
    });
  });
});
