/**
 * Which tools an agent may use, decided by layered rules: the engine's (SWITCHYARD_POLICY_FILE), the tenant's (set
 * with an admin key), the session's (given when it is created) and a plan's. Deny wins, and a layer only narrows
 * what the layers above it allow.
 */

export const POLICY_EFFECTS = ['allow', 'deny', 'ask'] as const;
export type PolicyEffect = (typeof POLICY_EFFECTS)[number];

/** The facts of an action a rule can match, each by an exact, glob (`*`, `?`) or `/regex/` pattern. */
export const MATCH_FIELDS = ['tool', 'type', 'op', 'language', 'tier', 'risk', 'host'] as const;
export type MatchField = (typeof MATCH_FIELDS)[number];

/** What a rule matches: every field given must match (a field the action lacks never does); `{}` matches all. */
export type PolicyMatch = Partial<Record<MatchField, string | string[]>>;

/** One rule as written. */
export interface PolicyRule {
  effect: PolicyEffect;
  match: PolicyMatch;
  /** Why the rule exists, shown to whoever it blocks or asks. */
  reason?: string;
}

export const POLICY_LAYERS = ['engine', 'tenant', 'session', 'plan'] as const;
export type PolicyLayerName = (typeof POLICY_LAYERS)[number];

/** The rules of one layer, and where they were set (shown by `GET /v1/sessions/:id/policy`). */
export interface PolicyLayer {
  layer: PolicyLayerName;
  /** Where the rules come from: a file path, an API call. */
  source: string;
  rules: PolicyRule[];
}

/**
 * What is known of an action when its policy is decided: after it was validated and routed, before it is recorded.
 * `tool` is the name of the tool that runs it (`python`, `read`, `browser_navigate`, a skill's name), or
 * `<type>_<op>` for operations no tool offers (`file_delete`).
 */
export interface PolicyFacts {
  tool: string;
  type: string;
  op?: string;
  language?: string;
  tier?: string;
  risk?: string;
  /** Hosts the action names: a browser URL's, URLs in code. */
  hosts: string[];
}

/** Where a decision came from: the rule (its index in its layer) and the layer. */
export interface RuleRef {
  layer: PolicyLayerName;
  index: number;
  rule: PolicyRule;
}

/**
 * The decision on one action. `deny` and `ask` name the rule (or, for `deny`, the layer whose allow rules none
 * matched: `rule` is then absent).
 */
export type PolicyVerdict =
  | { effect: 'allow' }
  | { effect: 'deny'; layer: PolicyLayerName; source: string; rule?: RuleRef; message: string }
  | { effect: 'ask'; layer: PolicyLayerName; source: string; rule: RuleRef; message: string };
