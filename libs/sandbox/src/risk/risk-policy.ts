import type { Language, RiskAssessment, RiskLevel } from '@switchyard/common';
import { SandboxConfigError } from '../core/sandbox.errors';
import type { RiskOptions } from '../core/sandbox.options';
import type { RiskThresholds } from '../core/sandbox.types';
import { DEFAULT_RISK_RULES, type RiskRule } from './risk-rules';

export const DEFAULT_RISK_THRESHOLDS: Readonly<RiskThresholds> = Object.freeze({
  medium: 20,
  high: 50,
  critical: 80,
});

const MAX_MATCH_LABEL = 60;

/**
 * Code at least this long is worth scoring ahead (`assessAhead`): every rule is linear, but all of them over 1 MiB
 * take 40–240 ms on a loaded 2-core machine, more than one request may hold the event loop.
 */
export const ASSESS_AHEAD_CHARS = 64 * 1024;
/** Scores kept for `assess` to find: a few requests' worth (their code is held by the requests anyway). */
const MAX_AHEAD = 16;

function label(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_MATCH_LABEL ? `${flat.slice(0, MAX_MATCH_LABEL - 1)}…` : flat;
}

/**
 * Deterministic risk scoring of submitted code: no model calls, the same code always gets the same answer.
 *
 * Every matching rule adds its weight once; the score is the sum capped at 100, so independent signals
 * compound (network + spawn is worse than either) while one severe signal (fork bomb, `rm -rf /`) is
 * critical on its own. The patterns are deliberately conservative: a match in a comment or string still counts,
 * because that is where shell commands hide (`os.system("rm -rf /")`).
 */
export class RiskPolicy {
  readonly thresholds: RiskThresholds;
  private readonly rules: readonly RiskRule[];
  /** Scores made ahead, by code then language; the oldest goes first past MAX_AHEAD. */
  private readonly ahead = new Map<string, Partial<Record<Language, RiskAssessment>>>();

  constructor(options: RiskOptions = {}, rules: readonly RiskRule[] = DEFAULT_RISK_RULES) {
    const ids = new Set(rules.map((r) => r.id));
    for (const id of [...(options.disabledRules ?? []), ...Object.keys(options.weights ?? {})]) {
      if (!ids.has(id))
        throw new SandboxConfigError('risk', `unknown rule id "${id}"; known: ${[...ids].join(', ')}`);
    }
    for (const [id, weight] of Object.entries(options.weights ?? {})) {
      if (!Number.isFinite(weight) || weight < 0 || weight > 100) {
        throw new SandboxConfigError(`risk.weights.${id}`, 'must be a number from 0 to 100');
      }
    }
    const t = { ...DEFAULT_RISK_THRESHOLDS, ...options.thresholds };
    if (!(0 < t.medium && t.medium <= t.high && t.high <= t.critical && t.critical <= 100)) {
      throw new SandboxConfigError('risk.thresholds', 'need 0 < medium <= high <= critical <= 100');
    }
    this.thresholds = t;
    const disabled = new Set(options.disabledRules ?? []);
    this.rules = rules
      .filter((r) => !disabled.has(r.id))
      .map((r) => ({ ...r, weight: options.weights?.[r.id] ?? r.weight }));
  }

  /** Ids of the rules in force, for documentation and health output. */
  ruleIds(): string[] {
    return this.rules.map((r) => r.id);
  }

  assess(language: Language, code: string): RiskAssessment {
    const ahead = this.ahead.get(code)?.[language];
    if (ahead) return ahead;
    const hits: (string | undefined)[] = [];
    for (const rule of this.rules) hits.push(this.match(rule, language, code));
    return this.total(hits);
  }

  /**
   * Scores long code a rule at a time, letting the event loop turn between rules, and keeps the score for the
   * `assess` that routing makes next (synchronously) for the same code. Short code is left to `assess`.
   */
  async assessAhead(language: Language, code: string): Promise<void> {
    if (code.length < ASSESS_AHEAD_CHARS || this.ahead.get(code)?.[language]) return;
    const hits: (string | undefined)[] = [];
    for (const rule of this.rules) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      hits.push(this.match(rule, language, code));
    }
    const byLanguage = this.ahead.get(code) ?? {};
    byLanguage[language] = this.total(hits);
    this.ahead.delete(code);
    this.ahead.set(code, byLanguage);
    if (this.ahead.size > MAX_AHEAD) this.ahead.delete(this.ahead.keys().next().value!);
  }

  /** The assessment of the rules' hits, in rule order: each matching rule adds its weight once. */
  private total(hits: (string | undefined)[]): RiskAssessment {
    let score = 0;
    const reasons: string[] = [];
    this.rules.forEach((rule, i) => {
      const hit = hits[i];
      if (hit === undefined) return;
      score += rule.weight;
      reasons.push(`${rule.id}: ${label(hit)}`);
    });
    score = Math.min(100, score);
    return { score, level: this.level(score), reasons };
  }

  level(score: number): RiskLevel {
    const t = this.thresholds;
    if (score >= t.critical) return 'critical';
    if (score >= t.high) return 'high';
    if (score >= t.medium) return 'medium';
    return 'low';
  }

  private match(rule: RiskRule, language: Language, code: string): string | undefined {
    const patterns = [...(rule.patterns?.[language] ?? []), ...(rule.patterns?.any ?? [])];
    let hit: string | undefined;
    for (const pattern of patterns) {
      const m = pattern.exec(code);
      if (m) {
        hit = m[0];
        break;
      }
    }
    hit ??= rule.detect?.(code, language);
    if (hit === undefined) return undefined;
    const unless = rule.unless?.[language];
    if (unless?.test(code) || rule.except?.(code, language)) return undefined;
    return hit;
  }
}
