import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsIn,
  IsObject,
  IsOptional,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { MAX_RULES } from '../../../state/policies/policy-rules';
import { MATCH_FIELDS, POLICY_EFFECTS } from '../../../state/policies/policy.types';

const PATTERN = { type: 'string' as const, minLength: 1, maxLength: 200 };
// `null` is absent, as in every body.
const PATTERNS = {
  oneOf: [
    { ...PATTERN, nullable: true },
    { type: 'array' as const, minItems: 1, maxItems: 32, items: PATTERN },
  ],
};

const MATCH_DESCRIPTIONS: Record<(typeof MATCH_FIELDS)[number], string> = {
  tool: 'The tool name (`python`, `read`, `browser_navigate`, a skill), or `<type>_<op>` for ops no tool offers (`file_delete`)',
  type: 'The action type: code, file, browser, process, kernel, skill',
  op: 'The op of a file, browser, process or kernel action',
  language: 'python, node or bash (code, kernels, skill bodies)',
  tier: 'The tier it was routed to: subprocess, pooled, container, engine (files), browser',
  risk: 'The risk level: low, medium, high, critical; `>=high` for that level or riskier',
  host: 'A host the action names: a browser URL’s, a URL in code or a command (lowercase)',
};

/** One allow/deny/ask rule. */
export class PolicyRuleDto {
  @IsIn(POLICY_EFFECTS)
  @JSONSchema({ description: '`deny` wins over `ask`, `ask` over `allow`, in every layer' })
  effect!: (typeof POLICY_EFFECTS)[number];

  @IsOptional()
  @IsObject()
  @JSONSchema({
    description:
      'Every field given must match (a field the action lacks never does); `{}` or none matches every action. ' +
      'A pattern is exact, a glob (`*`, `?`) or a `/regex/` (`/regex/i`), or a list of them (any).',
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(
      MATCH_FIELDS.map((f) => [f, { ...PATTERNS, description: MATCH_DESCRIPTIONS[f] }]),
    ),
  })
  match?: Record<string, string | string[]>;

  @IsOptional()
  @IsString()
  @MaxLength(500)
  @JSONSchema({ description: 'Why the rule exists: shown to whoever it blocks or asks' })
  reason?: string;
}

/** A policy layer: allow/deny/ask rules. */
export class PolicyDto {
  @IsArray()
  @ArrayMaxSize(MAX_RULES)
  @ValidateNested({ each: true })
  @Type(() => PolicyRuleDto)
  @JSONSchema({
    description:
      'Rules of this layer. Deny wins; `ask` makes the action wait for approval; a layer with allow rules allows only ' +
      'what one of them matches. A layer can only narrow what the layers above it (engine → tenant → session → ' +
      'plan) allow.',
  })
  rules!: PolicyRuleDto[];
}
