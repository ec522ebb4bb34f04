import type { RiskAssessment } from '@switchyard/common';
import { type CompiledRule, compileRules, ruleMatches } from '../../state/policies/policy-rules';
import type { PolicyFacts } from '../../state/policies/policy.types';
import type { HookDefinition } from './hook-file';

/** An action as hooks see it (its input redacted): the body's `action`. */
export interface HookedAction {
  id: string;
  sessionId: string;
  tenant: string;
  type: string;
  /** The tool that runs it, as policies name it. */
  tool: string;
  operation: string;
  inputSummary: string;
  input: Record<string, unknown>;
  tier: string;
  risk: RiskAssessment;
  startedAt: string;
  retryOf?: string;
  calledBy?: { actionId: string; depth: number };
}

/** A hook with its `match` compiled: which actions it sees. */
export interface ArmedHook {
  hook: HookDefinition;
  sees(facts: PolicyFacts): boolean;
}

export function armHooks(hooks: HookDefinition[]): ArmedHook[] {
  return hooks.map((hook) => {
    const rule: CompiledRule | undefined = hook.match
      ? compileRules([{ effect: 'allow', match: hook.match }], `${hook.name}.match`)[0]
      : undefined;
    return { hook, sees: (facts) => !rule || ruleMatches(rule, facts) };
  });
}

/** Backoff before attempt `n + 1` (n ≥ 1): doubling from `baseMs`, at most `maxMs`, with ±20 % jitter. */
export function backoffMs(
  n: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const plain = Math.min(maxMs, baseMs * 2 ** (n - 1));
  return Math.round(plain * (0.8 + 0.4 * random()));
}
