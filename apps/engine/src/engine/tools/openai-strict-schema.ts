import type { JsonSchema } from './tool-catalog';

/** A JSON Schema node, as class-validator-jsonschema writes them. */
type Node = Record<string, unknown>;

/**
 * Keywords OpenAI's strict mode takes as they are. Everything a strict schema may say about a value's shape; what
 * it says about its size or form is left to the description (below).
 */
const KEPT = new Set([
  'type',
  'description',
  'enum',
  'items',
  'properties',
  'required',
  'additionalProperties',
]);

/** A keyword's value as text in a description. */
const say = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** A maximum worth telling a model: the largest safe integer only says "any integer". */
const bound = (v: unknown): unknown => (v === Number.MAX_SAFE_INTEGER ? undefined : v);

/** "a to b <unit>", "at least a <unit>" or "at most b <unit>" (a range is said once, by its upper keyword). */
const range = (min: unknown, max: unknown, unit: string): string | undefined => {
  const plural = (n: unknown): string => (unit && n !== 1 ? `${unit}s` : unit);
  const tail = (n: unknown): string => (unit ? ` ${plural(n)}` : '');
  if (min !== undefined && max !== undefined)
    return `${unit ? '' : 'From '}${say(min)} to ${say(max)}${tail(max)}.`;
  if (min !== undefined) return `At least ${say(min)}${tail(min)}.`;
  if (max !== undefined) return `At most ${say(max)}${tail(max)}.`;
  return undefined;
};

/**
 * Keywords strict mode refuses (or not every strict model honours), told to the model in words instead: the engine
 * still enforces them when the call runs, and answers an `is_error` result naming the field.
 */
const IN_WORDS: Record<string, (v: unknown, node: Node) => string | undefined> = {
  minLength: (v, n) => (n.maxLength === undefined ? range(v, undefined, 'character') : undefined),
  maxLength: (v, n) => range(n.minLength, v, 'character'),
  pattern: (v) => `Must match the regular expression ${say(v)}`,
  format: (v) => `Format: ${say(v)}.`,
  minimum: (v, n) => (bound(n.maximum) === undefined ? range(v, undefined, '') : undefined),
  maximum: (v, n) => (bound(v) === undefined ? undefined : range(n.minimum, v, '')),
  exclusiveMinimum: (v) => `Greater than ${say(v)}.`,
  exclusiveMaximum: (v) => `Less than ${say(v)}.`,
  multipleOf: (v) => `A multiple of ${say(v)}.`,
  minItems: (v, n) => (n.maxItems === undefined ? range(v, undefined, 'item') : undefined),
  maxItems: (v, n) => range(n.minItems, v, 'item'),
  uniqueItems: (v) => (v === true ? 'No duplicates.' : undefined),
  default: (v) => `Default: ${JSON.stringify(v)}.`,
};

/** What an object may say in strict form; its other fields are refused (the validation classes whitelist). */
const OBJECT_KEYS = new Set(['type', 'properties', 'required', 'description']);

const PRIMITIVES = new Set(['string', 'integer', 'number', 'boolean']);

/** A free-form map (`env`): an object whose values follow one schema, with no named properties. */
export function isMapSchema(node: unknown): boolean {
  const n = node as Node | null;
  return (
    typeof n === 'object' &&
    n !== null &&
    n.type === 'object' &&
    n.properties === undefined &&
    typeof n.additionalProperties === 'object' &&
    n.additionalProperties !== null
  );
}

/** How a map is given in a strict schema (strict objects cannot have free-form keys). */
export const MAP_AS_PAIRS = 'Given as a list of {name, value} pairs.';

/** `text`, then `more` (sentences), as one description. */
function describe(text: unknown, more: string[]): string | undefined {
  const parts = [typeof text === 'string' && text ? text : undefined, ...more].filter(Boolean) as string[];
  return parts.length > 0 ? parts.join(' ') : undefined;
}

const withDescription = (description: string | undefined): Node => (description ? { description } : {});

/** A node's shape in strict form; `path` names it in the error thrown for a keyword strict mode has no form for. */
function strictNode(node: Node, path: string): Node {
  if (isMapSchema(node)) {
    return {
      type: 'array',
      items: strictObject(
        {
          type: 'object',
          properties: { name: { type: 'string' }, value: node.additionalProperties },
          required: ['name', 'value'],
        },
        `${path}[]`,
      ),
      ...withDescription(describe(node.description, [MAP_AS_PAIRS])),
    };
  }
  if (node.type === 'object') return strictObject(node, path);
  const words: string[] = [];
  const out: Node = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'description') continue;
    if (key === 'items') out.items = strictNode(value as Node, `${path}[]`);
    else if (KEPT.has(key)) out[key] = value;
    else if (key in IN_WORDS) {
      const said = IN_WORDS[key](value, node);
      if (said) words.push(said);
    } else throw new Error(`tool schema ${path}: keyword ${key} has no OpenAI strict-mode form`);
  }
  return { ...out, ...withDescription(describe(node.description, words)) };
}

/**
 * An object in strict form: every property listed in `required`, the optional ones nullable (a strict model sends
 * `null` for a field it leaves out, and the engine reads `null` as absent), no other properties.
 */
function strictObject(node: Node, path: string): Node {
  for (const key of Object.keys(node)) {
    const closable = key === 'additionalProperties' && typeof node[key] === 'boolean';
    if (!OBJECT_KEYS.has(key) && !closable) {
      throw new Error(`tool schema ${path || '(root)'}: keyword ${key} has no OpenAI strict-mode form`);
    }
  }
  const properties = (node.properties ?? {}) as Record<string, Node>;
  const required = new Set((node.required ?? []) as string[]);
  const out: Record<string, Node> = {};
  for (const [name, prop] of Object.entries(properties)) {
    const at = path ? `${path}.${name}` : name;
    out[name] = required.has(name) ? strictNode(prop, at) : nullable(strictNode(prop, at));
  }
  return {
    type: 'object',
    properties: out,
    required: Object.keys(out),
    additionalProperties: false,
    ...withDescription(node.description as string | undefined),
  };
}

/** `type: [t, "null"]` for a plain primitive; `anyOf` with `{type: "null"}` for enums, arrays and objects. */
function nullable(node: Node): Node {
  const { description, ...shape } = node;
  if (typeof shape.type === 'string' && PRIMITIVES.has(shape.type) && shape.enum === undefined) {
    return { ...shape, type: [shape.type, 'null'], ...withDescription(description as string | undefined) };
  }
  return { anyOf: [shape, { type: 'null' }], ...withDescription(description as string | undefined) };
}

/**
 * A tool's input schema as OpenAI's strict mode (`strict: true`) takes it: every object closed
 * (`additionalProperties: false`) with all its properties required, optional ones nullable, free-form maps as lists
 * of `{name, value}` pairs, and size or form constraints (lengths, bounds, patterns) said in the description. Throws
 * for a keyword with no strict form, so a new validation class cannot slip a schema OpenAI would refuse into the list.
 */
export function toOpenAiStrictSchema(schema: JsonSchema): JsonSchema {
  return strictObject(schema as unknown as Node, '') as unknown as JsonSchema;
}
