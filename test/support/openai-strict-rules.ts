/**
 * OpenAI's strict-mode rules for a function's `parameters` (Structured Outputs, "supported schemas"), checked
 * independently of the code that writes strict schemas: the root is an object; every object lists all its properties
 * in `required` and has `additionalProperties: false`; only keywords every strict model takes appear (lengths,
 * bounds, patterns, formats, item counts and defaults do not); at most 10 levels of nesting.
 */

/** Keywords a strict schema may use. */
const ALLOWED = new Set([
  'type',
  'description',
  'enum',
  'const',
  'items',
  'properties',
  'required',
  'additionalProperties',
  'anyOf',
  '$ref',
  '$defs',
  'title',
]);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']);
const MAX_DEPTH = 10;

type Node = Record<string, unknown>;

const typesOf = (node: Node): unknown[] =>
  Array.isArray(node.type) ? node.type : node.type === undefined ? [] : [node.type];

function walk(node: unknown, path: string, depth: number, out: string[]): void {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) {
    out.push(`${path}: a schema must be an object`);
    return;
  }
  const n = node as Node;
  for (const key of Object.keys(n)) {
    if (!ALLOWED.has(key)) out.push(`${path}: keyword ${key} is not supported in strict mode`);
  }
  const types = typesOf(n);
  for (const t of types) if (!TYPES.has(t as string)) out.push(`${path}: unknown type ${String(t)}`);
  if (types.length === 0 && n.anyOf === undefined && n.enum === undefined && n.const === undefined) {
    out.push(`${path}: no type`);
  }
  if (types.includes('object') || n.properties !== undefined) {
    if (depth > MAX_DEPTH) out.push(`${path}: nested deeper than ${MAX_DEPTH} levels`);
    if (n.additionalProperties !== false) out.push(`${path}: additionalProperties must be false`);
    const props = (n.properties ?? {}) as Record<string, unknown>;
    if (typeof n.properties !== 'object' || n.properties === null) out.push(`${path}: no properties`);
    const required = Array.isArray(n.required) ? (n.required as string[]) : undefined;
    if (!required) out.push(`${path}: no required list`);
    for (const name of Object.keys(props)) {
      if (!required?.includes(name)) out.push(`${path}.${name}: not in required`);
      walk(props[name], `${path}.${name}`, depth + 1, out);
    }
    for (const name of required ?? []) {
      if (!(name in props)) out.push(`${path}: required ${name} is not a property`);
    }
  }
  if (types.includes('array') || n.items !== undefined) {
    if (n.items === undefined) out.push(`${path}: an array without items`);
    else walk(n.items, `${path}[]`, depth + 1, out);
  }
  if (n.anyOf !== undefined) {
    if (!Array.isArray(n.anyOf) || n.anyOf.length === 0) out.push(`${path}: anyOf must be a non-empty list`);
    else n.anyOf.forEach((branch, i) => walk(branch, `${path}.anyOf[${i}]`, depth, out));
  }
  if (Array.isArray(n.enum) && types.length > 0) {
    for (const v of n.enum as unknown[]) {
      const t = v === null ? 'null' : Number.isInteger(v) ? 'integer' : typeof v;
      if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) {
        out.push(`${path}: enum value ${JSON.stringify(v)} is not of its type`);
      }
    }
  }
}

/** Every way `parameters` breaks strict mode, as `<path>: <rule>` lines; empty when it keeps every rule. */
export function strictModeViolations(parameters: unknown, path = 'parameters'): string[] {
  const out: string[] = [];
  const root = parameters as Node;
  if (root?.type !== 'object') out.push(`${path}: the root must be type "object"`);
  if (root?.anyOf !== undefined) out.push(`${path}: the root must not be anyOf`);
  walk(parameters, path, 1, out);
  return out;
}
