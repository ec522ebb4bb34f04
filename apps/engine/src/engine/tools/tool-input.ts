import { forbiddenKeyMessage, isForbiddenKey } from '../../platform/validation/json-input';
import { isMapSchema } from './openai-strict-schema';
import type { ToolDefinition } from './tool-catalog';

/** A tool input ready for `toAction`, or why it is not (the text of an `is_error` result). */
export type ToolInputReading = { input: Record<string, unknown> } | { error: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A map field given as `[{name, value}, …]` (the only form a strict schema can describe) as the object the action
 * takes; a map given as an object is taken as it is. Answers the problem text when the list is malformed.
 */
function pairsToMap(field: string, list: unknown[]): Record<string, unknown> | string {
  const map: Record<string, unknown> = {};
  for (const [i, pair] of list.entries()) {
    const at = `${field}[${i}]`;
    if (!isObject(pair) || typeof pair.name !== 'string' || !('value' in pair)) {
      return `${at}: must be an object {name, value} with a string name`;
    }
    const extra = Object.keys(pair).filter((k) => k !== 'name' && k !== 'value');
    if (extra.length > 0) return `${at}: unknown field${extra.length > 1 ? 's' : ''} ${extra.join(', ')}`;
    if (isForbiddenKey(pair.name)) return `${at}.name: ${forbiddenKeyMessage(pair.name)}`;
    if (Object.hasOwn(map, pair.name)) return `${at}.name: ${JSON.stringify(pair.name)} is given twice`;
    map[pair.name] = pair.value;
  }
  return map;
}

/**
 * Reads a call's input for `tool`: absent or `null` is `{}`; a field sent as `null` is absent (strict-mode models
 * send every optional field, as `null` when they leave it out); fields the tool does not take are refused by name;
 * a map field may come as a list of `{name, value}` pairs.
 */
export function readToolInput(tool: ToolDefinition, raw: unknown): ToolInputReading {
  const fail = (problem: string): ToolInputReading => ({
    error: `invalid input for ${tool.name}: ${problem}`,
  });
  if (raw === undefined || raw === null) return { input: {} };
  if (!isObject(raw)) {
    return {
      error: `input must be a JSON object with the fields of ${tool.name}: ${tool.fields.join(', ')}`,
    };
  }
  const input = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== null));
  const unknown = tool.openInput ? [] : Object.keys(input).filter((k) => !tool.fields.includes(k));
  if (unknown.length > 0) {
    return fail(
      `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; ` +
        `${tool.name} takes ${tool.fields.join(', ')}`,
    );
  }
  for (const [field, value] of Object.entries(input)) {
    if (!Array.isArray(value) || !isMapSchema(tool.inputSchema.properties[field])) continue;
    const map = pairsToMap(field, value);
    if (typeof map === 'string') return fail(map);
    input[field] = map;
  }
  return { input };
}
