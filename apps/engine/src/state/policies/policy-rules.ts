import { InvalidInputError, RISK_LEVELS } from '@switchyard/common';
import { anyOf, compilePattern, type Matcher } from './policy-pattern';
import {
  MATCH_FIELDS,
  type MatchField,
  POLICY_EFFECTS,
  type PolicyEffect,
  type PolicyFacts,
  type PolicyMatch,
  type PolicyRule,
} from './policy.types';

/** Rules per layer, patterns per field, characters of a reason. */
export const MAX_RULES = 100;
const MAX_PATTERNS = 32;
const MAX_REASON_CHARS = 500;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A rule ready to match: a matcher for each field it names. */
export interface CompiledRule {
  rule: PolicyRule;
  fields: Partial<Record<MatchField, Matcher>>;
}

/**
 * Reads `{rules: [...]}` (a policy as the API and the policy file take it). Throws `InvalidInputError` naming the
 * first field at fault (`policy.rules[2].match.tool`); every pattern is compiled here, so a policy that was read is
 * one that can be applied.
 */
export function readPolicy(value: unknown, field: string): PolicyRule[] {
  if (!isRecord(value)) throw new InvalidInputError(field, 'a policy is an object {"rules": [...]}');
  const unknown = Object.keys(value).filter((k) => k !== 'rules');
  if (unknown.length > 0) throw new InvalidInputError(`${field}.${unknown[0]}`, 'unknown field');
  return readRules(value.rules, `${field}.rules`);
}

export function readRules(value: unknown, field: string): PolicyRule[] {
  if (!Array.isArray(value)) throw new InvalidInputError(field, 'rules is an array of rules');
  if (value.length > MAX_RULES) throw new InvalidInputError(field, `at most ${MAX_RULES} rules per policy`);
  const rules = value.map((r, i) => readRule(r, `${field}[${i}]`));
  compileRules(rules, field);
  return rules;
}

function readRule(value: unknown, field: string): PolicyRule {
  if (!isRecord(value)) {
    throw new InvalidInputError(field, 'a rule is an object {"effect": "allow|deny|ask", "match": {...}}');
  }
  const unknown = Object.keys(value).filter((k) => !['effect', 'match', 'reason'].includes(k));
  if (unknown.length > 0) throw new InvalidInputError(`${field}.${unknown[0]}`, 'unknown field');
  const { effect, match, reason } = value;
  if (typeof effect !== 'string' || !(POLICY_EFFECTS as readonly string[]).includes(effect)) {
    throw new InvalidInputError(`${field}.effect`, `effect must be one of ${POLICY_EFFECTS.join(', ')}`);
  }
  if (reason !== undefined && reason !== null) {
    if (typeof reason !== 'string' || reason.length > MAX_REASON_CHARS) {
      throw new InvalidInputError(
        `${field}.reason`,
        `reason is a string of at most ${MAX_REASON_CHARS} characters`,
      );
    }
  }
  return {
    effect: effect as PolicyEffect,
    match: readMatch(match ?? {}, `${field}.match`),
    ...(typeof reason === 'string' && { reason }),
  };
}

function readMatch(value: unknown, field: string): PolicyMatch {
  if (!isRecord(value))
    throw new InvalidInputError(field, `match is an object of ${MATCH_FIELDS.join(', ')}`);
  const match: PolicyMatch = {};
  for (const [key, patterns] of Object.entries(value)) {
    if (!(MATCH_FIELDS as readonly string[]).includes(key)) {
      throw new InvalidInputError(
        `${field}.${key}`,
        `unknown field; a rule matches ${MATCH_FIELDS.join(', ')}`,
      );
    }
    if (patterns === null || patterns === undefined) continue;
    const list = Array.isArray(patterns) ? patterns : [patterns];
    if (list.length === 0 || list.length > MAX_PATTERNS || !list.every((p) => typeof p === 'string')) {
      throw new InvalidInputError(
        `${field}.${key}`,
        `a pattern (string) or a list of 1 to ${MAX_PATTERNS} patterns`,
      );
    }
    match[key as MatchField] = patterns as string | string[];
  }
  return match;
}

/** Compiles every rule's patterns; throws `InvalidInputError` naming the pattern's field. */
export function compileRules(rules: PolicyRule[], field: string): CompiledRule[] {
  return rules.map((rule, i) => {
    const fields: CompiledRule['fields'] = {};
    for (const key of MATCH_FIELDS) {
      const patterns = rule.match[key];
      if (patterns === undefined) continue;
      const list = Array.isArray(patterns) ? patterns : [patterns];
      const at = `${field}[${i}].match.${key}`;
      fields[key] = anyOf(list.map((p) => compileField(key, p, at)));
    }
    return { rule, fields };
  });
}

/** Risk levels also take `>=level` (that level or riskier); hosts compare lowercased. */
function compileField(key: MatchField, pattern: string, field: string): Matcher {
  if (key === 'risk') {
    const atLeast = /^>=\s*(\w+)$/.exec(pattern);
    if (atLeast) {
      const floor = RISK_LEVELS.indexOf(atLeast[1] as (typeof RISK_LEVELS)[number]);
      if (floor < 0) throw new InvalidInputError(field, `risk levels are ${RISK_LEVELS.join(', ')}`);
      return (level) => RISK_LEVELS.indexOf(level as (typeof RISK_LEVELS)[number]) >= floor;
    }
  }
  return compilePattern(key === 'host' ? pattern.toLowerCase() : pattern, field);
}

/** Every field the rule names matches the action (hosts: any of them). */
export function ruleMatches(rule: CompiledRule, facts: PolicyFacts): boolean {
  return MATCH_FIELDS.every((key) => {
    const matcher = rule.fields[key];
    if (!matcher) return true;
    if (key === 'host') return facts.hosts.some((h) => matcher(h));
    const value = facts[key];
    return value !== undefined && matcher(value);
  });
}

/** The fields of an action a tool decides by itself (what the tool list can be filtered on). */
export const TOOL_FIELDS: readonly MatchField[] = ['tool', 'type', 'op', 'language'];

/**
 * Whether the rule could match some call of a tool: its tool fields match the tool's, whatever the call's tier,
 * risk or hosts turn out to be.
 */
export function couldMatchTool(rule: CompiledRule, tool: PolicyFacts): boolean {
  return TOOL_FIELDS.every((key) => {
    const matcher = rule.fields[key];
    if (!matcher) return true;
    const value = tool[key as 'tool' | 'type' | 'op' | 'language'];
    return value !== undefined && matcher(value);
  });
}

/** The rule matches every call of the tool: it names only fields the tool decides, and they match. */
export function alwaysMatchesTool(rule: CompiledRule, tool: PolicyFacts): boolean {
  const named = Object.keys(rule.fields) as MatchField[];
  return named.every((key) => TOOL_FIELDS.includes(key)) && couldMatchTool(rule, tool);
}
