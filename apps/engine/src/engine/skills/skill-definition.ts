import { InvalidInputError, SwitchyardError } from '@switchyard/common';
import { SKILL_NAME, type SkillDefinition } from '../../state/skills/skill.types';
import { compileSchema } from './skill-schemas';

/** A built-in tool has that name: a skill needs one of its own. */
export class SkillNameTakenError extends SwitchyardError {
  readonly code = 'SKILL_NAME_TAKEN';
  readonly kind = 'conflict' as const;

  constructor(name: string, field: string) {
    super(`${name} is a built-in tool's name; a skill needs a name of its own`, { field, name });
  }
}

const MAX_DESCRIPTION = 2000;
const MAX_CODE_BYTES = 256 * 1024;
const MAX_SCHEMA_BYTES = 64 * 1024;
/**
 * The longest time limit a skill may name: the longest a timer can be (2^31 - 1 ms, about 24.8 days). The tier's
 * maximum caps it when it runs; beyond this, a number is not even a timer's (and past 2^53 not an exact integer).
 */
export const MAX_SKILL_TIMEOUT_MS = 2_147_483_647;

const KEYS = new Set(['name', 'description', 'inputSchema', 'outputSchema', 'language', 'code', 'timeoutMs']);

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function schema(value: unknown, field: string, objectOnly: boolean): Record<string, unknown> {
  if (!isRecord(value)) throw new InvalidInputError(field, `${field} must be a JSON Schema object`);
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_SCHEMA_BYTES) {
    throw new InvalidInputError(field, `${field} must be at most ${MAX_SCHEMA_BYTES / 1024} KiB as JSON`);
  }
  if (objectOnly && value.type !== 'object') {
    throw new InvalidInputError(
      field,
      `${field} must describe an object ("type": "object"): tools take objects`,
    );
  }
  const compiled = compileSchema(value);
  if (typeof compiled === 'string')
    throw new InvalidInputError(field, `${field} is not a valid JSON Schema: ${compiled}`);
  return value;
}

/**
 * Reads a skill as the API takes it (and as a skill directory gives it: `skill.json` plus its body), naming the
 * field at fault (`prefix.inputSchema`). `reserved` are names it may not take (built-in tools).
 */
export function readSkill(value: unknown, reserved: ReadonlySet<string>, prefix = ''): SkillDefinition {
  const at = (f: string) => (prefix ? `${prefix}.${f}` : f);
  if (!isRecord(value)) throw new InvalidInputError(prefix || 'body', 'a skill is a JSON object');
  const unknown = Object.keys(value).find((k) => !KEYS.has(k));
  if (unknown) throw new InvalidInputError(at(unknown), 'unknown field');
  const { name, description, language, code, timeoutMs } = value;
  if (typeof name !== 'string' || !SKILL_NAME.test(name)) {
    throw new InvalidInputError(
      at('name'),
      'name must be lowercase letters, digits, - and _ (at most 63), a letter first',
    );
  }
  if (reserved.has(name)) throw new SkillNameTakenError(name, at('name'));
  if (typeof description !== 'string' || description.length === 0 || description.length > MAX_DESCRIPTION) {
    throw new InvalidInputError(
      at('description'),
      `description is 1 to ${MAX_DESCRIPTION} characters: what the skill does, for a model`,
    );
  }
  if (language !== 'python' && language !== 'node') {
    throw new InvalidInputError(at('language'), 'language is python or node');
  }
  if (
    typeof code !== 'string' ||
    code.length === 0 ||
    Buffer.byteLength(code) > MAX_CODE_BYTES ||
    code.includes('\0')
  ) {
    throw new InvalidInputError(
      at('code'),
      `code is the body (1 byte to ${MAX_CODE_BYTES / 1024} KiB, no NUL) defining main(input, ctx)`,
    );
  }
  if (
    timeoutMs !== undefined &&
    (typeof timeoutMs !== 'number' ||
      !Number.isInteger(timeoutMs) ||
      timeoutMs < 100 ||
      timeoutMs > MAX_SKILL_TIMEOUT_MS)
  ) {
    throw new InvalidInputError(
      at('timeoutMs'),
      `timeoutMs is an integer from 100 to ${MAX_SKILL_TIMEOUT_MS} (the tier maximum still applies)`,
    );
  }
  return {
    name,
    description,
    inputSchema: schema(value.inputSchema, at('inputSchema'), true),
    outputSchema: schema(value.outputSchema, at('outputSchema'), false),
    language,
    code,
    ...(typeof timeoutMs === 'number' && { timeoutMs }),
  };
}
