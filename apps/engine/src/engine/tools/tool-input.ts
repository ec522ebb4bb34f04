import { forbiddenKeyMessage, isForbiddenKey } from '../../platform/validation/json-input';
import { acceptsNull, isMapSchema } from './openai-strict-schema';
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
  const input =
    tool.kind === 'skill'
      ? (withoutAbsentNulls(tool.inputSchema, raw) as Record<string, unknown>)
      : Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== null));
  const unknown = tool.openInput ? [] : Object.keys(input).filter((k) => !tool.fields.includes(k));
  if (unknown.length > 0) {
    return fail(
      `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; ` +
        `${tool.name} takes ${tool.fields.join(', ')}`,
    );
  }
  for (const [field, value] of Object.entries(input)) {
    if (!Array.isArray(value) || !isMapSchema(tool.inputSchema.properties?.[field])) continue;
    const map = pairsToMap(field, value);
    if (typeof map === 'string') return fail(map);
    input[field] = map;
  }
  return { input };
}

/**
 * A skill's input with the `null`s a strict-mode model sends for left-out fields removed, at any depth its schema
 * describes (properties of objects, items of arrays), where that field's schema does not admit `null` itself; a `null`
 * the schema admits is the caller's value and stays. Inside `anyOf`/`oneOf` nothing is removed: strict mode gives
 * those no optional fields (see openai-strict-schema.ts).
 */
export function withoutAbsentNulls(schema: unknown, value: unknown): unknown {
  if (typeof schema !== 'object' || schema === null) return value;
  const s = schema as Record<string, unknown>;
  if (Array.isArray(value)) {
    return s.items === undefined ? value : value.map((item) => withoutAbsentNulls(s.items, item));
  }
  if (!isObject(value)) return value;
  const properties = isObject(s.properties) ? s.properties : {};
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const prop = Object.hasOwn(properties, key) ? properties[key] : undefined;
    if (v === null && prop !== undefined && !acceptsNull(prop)) continue;
    out[key] = prop === undefined ? v : withoutAbsentNulls(prop, v);
  }
  return out;
}
