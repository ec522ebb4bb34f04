import {
  alwaysMatchesTool,
  type CompiledRule,
  compileRules,
  couldMatchTool,
  ruleMatches,
} from '../../state/policies/policy-rules';
import type {
  PolicyFacts,
  PolicyLayer,
  PolicyLayerName,
  PolicyRule,
  PolicyVerdict,
  RuleRef,
} from '../../state/policies/policy.types';

/** A layer with its rules compiled. */
export interface CompiledLayer extends PolicyLayer {
  compiled: CompiledRule[];
}

export function compileLayer(layer: PolicyLayer): CompiledLayer {
  return { ...layer, compiled: compileRules(layer.rules, `${layer.layer}.rules`) };
}

/** How whoever a layer blocks can get what it blocks. */
const HOW_TO_ASK: Record<PolicyLayerName, string> = {
  engine: "The engine's policy is its operator's (SWITCHYARD_POLICY_FILE): ask them to allow it.",
  tenant:
    "Your tenant's policy is set with an admin key (PUT /v1/tenants/{tenant}/policy): ask an admin to allow it.",
  session:
    'This session\'s policy was given when it was created (POST /v1/sessions {"policy": …}): use a session whose ' +
    'policy allows it.',
  plan: 'The plan was submitted with this policy (POST …/plans {"policy": …}): submit it with one that allows it.',
};

const ruleText = (r: PolicyRule): string => JSON.stringify({ effect: r.effect, match: r.match });
const because = (r: PolicyRule): string => (r.reason ? ` (${r.reason})` : '');

/** What one layer says of an action: deny, ask, allow, or nothing (no rule of it concerns the action). */
type LayerSays =
  | { effect: 'deny' | 'ask'; rule: RuleRef }
  | { effect: 'deny'; rule?: undefined }
  | { effect: 'allow' | 'none' };

function layerSays(layer: CompiledLayer, facts: PolicyFacts): LayerSays {
  const find = (effect: PolicyRule['effect']) => {
    const index = layer.compiled.findIndex((c) => c.rule.effect === effect && ruleMatches(c, facts));
    return index < 0 ? undefined : { layer: layer.layer, index, rule: layer.compiled[index].rule };
  };
  const deny = find('deny');
  if (deny) return { effect: 'deny', rule: deny };
  const ask = find('ask');
  if (ask) return { effect: 'ask', rule: ask };
  const allows = layer.compiled.some((c) => c.rule.effect === 'allow');
  if (!allows) return { effect: 'none' };
  return find('allow') ? { effect: 'allow' } : { effect: 'deny' };
}

/**
 * The decision on an action under every layer, engine first. Deny wins over ask, ask over allow, whatever the layer:
 * so a layer can only narrow what those above it allow. A layer with allow rules allows only what one of them
 * matches. With several layers saying the same, the topmost is named.
 */
export function decide(layers: readonly CompiledLayer[], facts: PolicyFacts): PolicyVerdict {
  let ask: Extract<PolicyVerdict, { effect: 'ask' }> | undefined;
  for (const layer of layers) {
    const says = layerSays(layer, facts);
    if (says.effect === 'deny') {
      const what = says.rule
        ? `rule ${says.rule.index + 1} ${ruleText(says.rule.rule)}${because(says.rule.rule)} denies it`
        : 'none of its allow rules matches it';
      return {
        effect: 'deny',
        layer: layer.layer,
        source: layer.source,
        ...(says.rule && { rule: says.rule }),
        message: `${facts.tool} is blocked by the ${layer.layer} policy: ${what}. ${HOW_TO_ASK[layer.layer]}`,
      };
    }
    if (says.effect === 'ask' && !ask) {
      ask = {
        effect: 'ask',
        layer: layer.layer,
        source: layer.source,
        rule: says.rule,
        message:
          `${facts.tool} needs approval: the ${layer.layer} policy's rule ${says.rule.index + 1} ` +
          `${ruleText(says.rule.rule)}${because(says.rule.rule)} asks for it`,
      };
    }
  }
  return ask ?? { effect: 'allow' };
}

/** Why a tool is left out of a caller's tool list: the layer and, when one rule did it, that rule. */
export interface HiddenTool {
  tool: string;
  layer: PolicyLayerName;
  rule?: RuleRef;
}

/**
 * Whether a tool is offered at all: hidden when a deny rule matches every call of it, or when a layer has allow
 * rules none of which could match a call of it. A tool that some calls may use (a deny only for high risk, an ask)
 * stays listed: those calls are decided when made.
 */
export function hiddenBy(layers: readonly CompiledLayer[], tool: PolicyFacts): HiddenTool | undefined {
  for (const layer of layers) {
    const index = layer.compiled.findIndex((c) => c.rule.effect === 'deny' && alwaysMatchesTool(c, tool));
    if (index >= 0) {
      return {
        tool: tool.tool,
        layer: layer.layer,
        rule: { layer: layer.layer, index, rule: layer.compiled[index].rule },
      };
    }
    // An ask rule lets calls through too, once approved.
    const lets = layer.compiled.filter((c) => c.rule.effect !== 'deny');
    const hasAllow = lets.some((c) => c.rule.effect === 'allow');
    if (hasAllow && !lets.some((c) => couldMatchTool(c, tool))) {
      return { tool: tool.tool, layer: layer.layer };
    }
  }
  return undefined;
}
