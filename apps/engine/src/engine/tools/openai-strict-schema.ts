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

/** How a schema's objects are read. */
interface StrictOptions {
  /**
   * Objects are closed only where the schema says so (`additionalProperties: false`): a skill's JSON Schema, whose
   * objects take keys they do not name unless told otherwise. Without it an object is closed as the engine's
   * validation classes close it (they refuse every field they do not declare).
   */
  declaredOnly: boolean;
  /**
   * Inside an `anyOf`/`oneOf` branch: an optional property cannot be made nullable there (the engine could not tell
   * which branch a `null` belongs to), so it has no strict form.
   */
  inUnion?: boolean;
}

const noForm = (path: string, what: string): Error =>
  new Error(`tool schema ${path || '(root)'}: ${what} has no OpenAI strict-mode form`);

/** The values a property may take when a schema pins it (`const` or `enum`), or undefined. */
function pinned(node: Node | undefined): unknown[] | undefined {
  if (!node) return undefined;
  if ('const' in node) return [node.const];
  return Array.isArray(node.enum) ? node.enum : undefined;
}

/** The JSON types a node says it is, or undefined when it does not say. */
function typesOf(node: Node): string[] | undefined {
  const t = node.type;
  if (typeof t === 'string') return t === 'integer' ? ['integer', 'number'] : [t];
  if (Array.isArray(t)) return t.flatMap((x) => (x === 'integer' ? ['integer', 'number'] : [String(x)]));
  return undefined;
}

/**
 * Whether no value can match two of the branches, so that `anyOf` means what `oneOf` does: each pair differs in type,
 * or they are objects that require one property pinned to values the other cannot take (a discriminator).
 */
function disjoint(branches: Node[]): boolean {
  const apart = (a: Node, b: Node): boolean => {
    const ta = typesOf(a);
    const tb = typesOf(b);
    if (ta && tb && !ta.some((t) => tb.includes(t))) return true;
    if (a.type !== 'object' || b.type !== 'object') return false;
    const required = new Set((a.required ?? []) as string[]);
    const pa = (a.properties ?? {}) as Record<string, Node>;
    const pb = (b.properties ?? {}) as Record<string, Node>;
    return ((b.required ?? []) as string[]).some((name) => {
      if (!required.has(name)) return false;
      const va = pinned(pa[name]);
      const vb = pinned(pb[name]);
      return (
        va !== undefined &&
        vb !== undefined &&
        !va.some((v) => vb.some((w) => JSON.stringify(v) === JSON.stringify(w)))
      );
    });
  };
  return branches.every((a, i) => branches.slice(i + 1).every((b) => apart(a, b)));
}

/** `anyOf` of the branches in strict form; `oneOf` only when its branches cannot overlap. */
function strictUnion(node: Node, path: string, options: StrictOptions): Node {
  const key = Array.isArray(node.oneOf) ? 'oneOf' : 'anyOf';
  const branches = node[key] as Node[];
  for (const other of Object.keys(node)) {
    if (other !== key && other !== 'description') throw noForm(path, `keyword ${other} beside ${key}`);
  }
  if (key === 'oneOf' && !disjoint(branches)) throw noForm(path, 'a oneOf whose branches can overlap');
  return {
    anyOf: branches.map((b, i) => strictNode(b, `${path}<${i}>`, { ...options, inUnion: true })),
    ...withDescription(node.description as string | undefined),
  };
}

/** A node's shape in strict form; `path` names it in the error thrown for a keyword strict mode has no form for. */
function strictNode(node: Node, path: string, options: StrictOptions): Node {
  if (Array.isArray(node.oneOf) || Array.isArray(node.anyOf)) return strictUnion(node, path, options);
  if (isMapSchema(node)) {
    return {
      type: 'array',
      items: strictObject(
        {
          type: 'object',
          properties: { name: { type: 'string' }, value: node.additionalProperties },
          required: ['name', 'value'],
          additionalProperties: false,
        },
        `${path}[]`,
        options,
      ),
      ...withDescription(describe(node.description, [MAP_AS_PAIRS])),
    };
  }
  if (node.type === 'object') return strictObject(node, path, options);
  const words: string[] = [];
  const out: Node = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'description') continue;
    if (key === 'items') out.items = strictNode(value as Node, `${path}[]`, options);
    else if (key === 'const') out.enum = [value];
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
function strictObject(node: Node, path: string, options: StrictOptions): Node {
  for (const key of Object.keys(node)) {
    const closable = key === 'additionalProperties' && typeof node[key] === 'boolean';
    if (!OBJECT_KEYS.has(key) && !closable) throw noForm(path, `keyword ${key}`);
  }
  if (options.declaredOnly && node.additionalProperties !== false) {
    throw noForm(path, 'an object that takes keys it does not name (no `additionalProperties: false`)');
  }
  const properties = (node.properties ?? {}) as Record<string, Node>;
  const required = new Set((node.required ?? []) as string[]);
  const out: Record<string, Node> = {};
  for (const [name, prop] of Object.entries(properties)) {
    const at = path ? `${path}.${name}` : name;
    if (required.has(name)) {
      out[name] = strictNode(prop, at, options);
      continue;
    }
    if (options.inUnion) throw noForm(at, 'an optional property inside anyOf or oneOf');
    out[name] = nullable(strictNode(prop, at, { ...options, inUnion: false }));
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
  // Already nullable (a skill's `type: [t, "null"]`): a `null` then means itself, and the engine passes it on.
  if (acceptsNull(shape)) return node;
  if (typeof shape.type === 'string' && PRIMITIVES.has(shape.type) && shape.enum === undefined) {
    return { ...shape, type: [shape.type, 'null'], ...withDescription(description as string | undefined) };
  }
  const branches =
    Array.isArray(shape.anyOf) && Object.keys(shape).length === 1 ? (shape.anyOf as Node[]) : [shape];
  return { anyOf: [...branches, { type: 'null' }], ...withDescription(description as string | undefined) };
}

/** Whether a schema admits `null` (a schema that names no type admits anything). */
export function acceptsNull(node: unknown): boolean {
  if (node === true) return true;
  if (typeof node !== 'object' || node === null) return false;
  const n = node as Node;
  if (n.type === 'null' || (Array.isArray(n.type) && n.type.includes('null'))) return true;
  if ('const' in n) return n.const === null;
  if (Array.isArray(n.enum)) return n.enum.includes(null);
  const union = (n.anyOf ?? n.oneOf) as unknown[] | undefined;
  if (Array.isArray(union)) return union.some(acceptsNull);
  return n.type === undefined && n.$ref === undefined && n.allOf === undefined && n.not === undefined;
}

/**
 * A tool's input schema as OpenAI's strict mode (`strict: true`) takes it: every object closed
 * (`additionalProperties: false`) with all its properties required, optional ones nullable, free-form maps as lists
 * of `{name, value}` pairs, and size or form constraints (lengths, bounds, patterns) said in the description. Throws
 * for a keyword with no strict form, so a new validation class cannot slip a schema OpenAI would refuse into the list.
 */
export function toOpenAiStrictSchema(
  schema: JsonSchema,
  options: { declaredOnly?: boolean } = {},
): JsonSchema {
  return strictObject(schema as unknown as Node, '', {
    declaredOnly: options.declaredOnly ?? false,
  }) as unknown as JsonSchema;
}
