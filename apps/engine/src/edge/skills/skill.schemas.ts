import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { SKILL_NAME } from '../../state/skills/skill.types';
import { MAX_SKILL_TIMEOUT_MS } from '../../engine/skills/skill-definition';
import { object, ref, TIMESTAMP } from '../http/common.schemas';

/** Schemas of skills: the body that adds one, a skill as the API shows it, and a skill action's output. */

const SKILL_FIELDS = {
  name: { type: 'string', pattern: SKILL_NAME.source, description: 'Its tool name (not a built-in tool’s)' },
  description: { type: 'string', minLength: 1, maxLength: 2000, description: 'What it does, for a model' },
  inputSchema: {
    type: 'object',
    required: ['type'],
    properties: { type: { type: 'string', enum: ['object'] } },
    additionalProperties: true,
    description: 'JSON Schema of its input, an object (`"type": "object"`): checked before the body runs',
  },
  outputSchema: {
    type: 'object',
    additionalProperties: true,
    description: 'JSON Schema of what `main` returns: checked after it returns',
  },
  language: { type: 'string', enum: ['python', 'node'] },
  code: {
    type: 'string',
    minLength: 1,
    pattern: '^[^\\u0000]+$',
    description:
      'The body: defines `main(input, ctx)` (node: a function `main`, or `module.exports`); no NUL',
  },
  timeoutMs: {
    type: 'integer',
    minimum: 100,
    maximum: MAX_SKILL_TIMEOUT_MS,
    description: 'Its time limit in milliseconds (the tier’s maximum still applies)',
  },
} satisfies Record<string, SchemaObject>;

const REQUIRED = ['name', 'description', 'inputSchema', 'outputSchema', 'language', 'code'];

/** The body of POST /v1/skills. */
export const SKILL_BODY_SCHEMA: SchemaObject = {
  ...object(REQUIRED, SKILL_FIELDS, 'A skill to add for the caller’s tenant'),
  additionalProperties: false,
};

const SKILL_SCHEMA: SchemaObject = object(
  [...REQUIRED, 'source'],
  {
    ...SKILL_FIELDS,
    source: {
      type: 'string',
      enum: ['engine', 'tenant'],
      description: 'The engine’s (every tenant’s) or the caller’s tenant’s',
    },
    createdAt: TIMESTAMP,
  },
  'A skill',
);

const SKILL_LIST_SCHEMA: SchemaObject = object(['skills'], {
  skills: { type: 'array', items: ref('Skill') },
});

const SKILL_OUTPUT_SCHEMA: SchemaObject = object(
  ['skill'],
  {
    skill: { type: 'string' },
    value: {
      description: 'What its `main` returned, as its outputSchema says (absent: it returned nothing)',
    },
  },
  '`skill` actions: what the skill returned (also on a `failed` one whose output broke its outputSchema)',
);

export const SKILL_SCHEMAS = {
  Skill: SKILL_SCHEMA,
  SkillList: SKILL_LIST_SCHEMA,
  SkillOutput: SKILL_OUTPUT_SCHEMA,
} satisfies Record<string, SchemaObject>;
