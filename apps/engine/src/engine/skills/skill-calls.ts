import { SwitchyardError } from '@switchyard/common';
import type { ActionRequest } from '../../state/actions/action-request';
import { parseActionRequest } from '../actions/dto/action-body';
import { RequestValidationError } from '../../platform/validation/request-validation.error';
import { buildToolCatalog, type ToolDefinition } from '../tools/tool-catalog';
import { readToolInput } from '../tools/tool-input';
import { toolProblem } from '../tools/tool-input-errors';

const CATALOG: ReadonlyMap<string, ToolDefinition> = new Map(buildToolCatalog().map((t) => [t.name, t]));

/** Why a call cannot be made: a code the body can branch on, and a message naming the tool's field. */
export interface CallRefusal {
  code: string;
  message: string;
}

/**
 * The action a skill's `ctx.call(name, input)` asks for: a built-in tool's (its input read as a tool call's is, so
 * messages name the tool's own fields), or a skill's. `isSkill` tells whether the session's tenant has a skill of
 * that name.
 */
export function callRequest(
  name: unknown,
  input: unknown,
  isSkill: (name: string) => boolean,
): ActionRequest | CallRefusal {
  if (typeof name !== 'string' || name.length === 0) {
    return { code: 'INVALID_CALL', message: 'ctx.call needs a tool or skill name' };
  }
  const tool = CATALOG.get(name);
  if (!tool) {
    if (isSkill(name)) {
      if (input !== undefined && input !== null && (typeof input !== 'object' || Array.isArray(input))) {
        return { code: 'INVALID_INPUT', message: `the input of skill ${name} must be a JSON object` };
      }
      return { type: 'skill', name, input: (input ?? {}) as Record<string, unknown> };
    }
    return {
      code: 'UNKNOWN_TOOL',
      message: `no tool or skill named ${JSON.stringify(name)} (GET /v1/tools lists them)`,
    };
  }
  const reading = readToolInput(tool, input);
  if ('error' in reading) return { code: 'INVALID_INPUT', message: reading.error };
  try {
    return parseActionRequest(tool.toAction(reading.input));
  } catch (err) {
    if (err instanceof RequestValidationError) {
      return {
        code: 'INVALID_INPUT',
        message: `invalid input for ${tool.name}: ${err.problems.map((p) => toolProblem(tool, p.field, p.message)).join('; ')}`,
      };
    }
    if (err instanceof SwitchyardError) return { code: err.code, message: err.message };
    throw err;
  }
}
