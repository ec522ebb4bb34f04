/**
 * fast-check arbitraries from the JSON Schemas the engine advertises for its tools (the subset they use: types,
 * `enum`/`const`, `properties`/`required`/`additionalProperties`, `items`, `anyOf`/`oneOf`, lengths, bounds,
 * patterns), and the mapping of an input to the form OpenAI's strict mode sends. Values of fields that the engine
 * takes only under rules its documentation states in words (workspace paths, variable names, regular expressions, …)
 * come from `rules`, by field name, like the Schemathesis hooks keep to them (test/support/schemathesis_hooks.py).
 */
import fc from 'fast-check';

type Schema = Record<string, unknown>;

/** Arbitraries for fields whose valid values the schemas cannot state, by field name. */
export type FieldRules = Record<string, fc.Arbitrary<unknown>>;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Text without NUL (the engine refuses it in code and names: C strings) and without lone surrogates. */
const text = (minLength = 0, maxLength = 24): fc.Arbitrary<string> =>
  fc
    .string({ unit: 'grapheme', minLength, maxLength })
    .map((s) => s.replaceAll(String.fromCharCode(0), ''))
    .filter((s) => s.length >= minLength && s.isWellFormed());

/** Small JSON values with no key that reaches object internals (refused anywhere in a body). */
export const plainJson: fc.Arbitrary<unknown> = fc
  .jsonValue({ maxDepth: 2 })
  .filter((v) => !/"(__proto__|constructor|prototype)":/.test(JSON.stringify(v)));

/** A free-form map of `value`s under names a variable could have. */
const dictionary = (value: fc.Arbitrary<unknown>): fc.Arbitrary<Record<string, unknown>> =>
  fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9_]{0,7}$/), value, { maxKeys: 3 });

function stringOf(s: Schema): fc.Arbitrary<string> {
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const max = Math.max(min, Math.min(typeof s.maxLength === 'number' ? s.maxLength : 24, min + 24));
  if (typeof s.pattern === 'string') {
    return fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length >= min && v.length <= max);
  }
  if (s.format === 'uri' || s.format === 'url')
    return fc.constantFrom('https://example.com/', 'http://example.org/a');
  return text(min, max);
}

function numberOf(s: Schema, integer: boolean): fc.Arbitrary<number> {
  const lo =
    typeof s.minimum === 'number'
      ? s.minimum
      : typeof s.exclusiveMinimum === 'number'
        ? s.exclusiveMinimum + 1
        : -1000;
  const hi =
    typeof s.maximum === 'number'
      ? s.maximum
      : typeof s.exclusiveMaximum === 'number'
        ? s.exclusiveMaximum - 1
        : 1_000_000;
  const min = Math.max(lo, -Number.MAX_SAFE_INTEGER);
  const max = Math.min(hi, Number.MAX_SAFE_INTEGER);
  return integer
    ? fc.integer({ min: Math.ceil(min), max: Math.floor(max) })
    : fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
}

function ofType(type: string, s: Schema, rules: FieldRules, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return numberOf(s, true);
    case 'number':
      return numberOf(s, false);
    case 'string':
      return stringOf(s);
    case 'array': {
      const min = typeof s.minItems === 'number' ? s.minItems : 0;
      const max = Math.max(min, Math.min(typeof s.maxItems === 'number' ? s.maxItems : 3, 3));
      const items = s.items === undefined ? plainJson : arbitraryOf(s.items, rules, undefined, depth + 1);
      return s.uniqueItems === true
        ? fc.uniqueArray(items, { minLength: min, maxLength: max, selector: (v) => JSON.stringify(v) })
        : fc.array(items, { minLength: min, maxLength: max });
    }
    case 'object':
      return objectOf(s, rules, depth);
    default:
      throw new Error(`schema-arbitrary: no arbitrary for type ${type}`);
  }
}

function objectOf(s: Schema, rules: FieldRules, depth: number): fc.Arbitrary<unknown> {
  const properties = isObject(s.properties) ? s.properties : {};
  const names = Object.keys(properties);
  const extra = s.additionalProperties;
  if (names.length === 0) {
    if (extra === false) return fc.constant({});
    // A map (values of one schema) or a free-form object.
    return dictionary(isObject(extra) ? arbitraryOf(extra, rules, undefined, depth + 1) : plainJson);
  }
  const model = Object.fromEntries(names.map((n) => [n, arbitraryOf(properties[n], rules, n, depth + 1)]));
  return fc.record(model, { requiredKeys: ((s.required ?? []) as string[]).filter((n) => n in properties) });
}

/** Values valid against `schema` (and the field rules), for a field named `field` when it is one. */
export function arbitraryOf(
  schema: unknown,
  rules: FieldRules = {},
  field?: string,
  depth = 0,
): fc.Arbitrary<unknown> {
  if (field !== undefined && rules[field] !== undefined) return rules[field];
  if (schema === true || !isObject(schema) || depth > 6) return plainJson;
  const s = schema;
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  const union = (s.anyOf ?? s.oneOf) as unknown[] | undefined;
  if (Array.isArray(union)) return fc.oneof(...union.map((b) => arbitraryOf(b, rules, field, depth + 1)));
  if (Array.isArray(s.type)) return fc.oneof(...(s.type as string[]).map((t) => ofType(t, s, rules, depth)));
  if (typeof s.type === 'string') return ofType(s.type, s, rules, depth);
  return plainJson;
}

/** A free-form map field: an object whose values follow one schema, with no named properties (`env`). */
const isMap = (s: Schema): boolean =>
  s.type === 'object' && s.properties === undefined && isObject(s.additionalProperties);

/**
 * `value` (valid against `schema`, the tool's own schema) as a strict-mode model sends it: every property of a
 * described object present, `null` for the ones left out, maps as lists of `{name, value}` pairs.
 */
export function toStrictForm(schema: unknown, value: unknown): unknown {
  if (!isObject(schema)) return value;
  if (Array.isArray(value))
    return schema.items === undefined ? value : value.map((v) => toStrictForm(schema.items, v));
  if (!isObject(value)) return value;
  if (isMap(schema)) return Object.entries(value).map(([name, v]) => ({ name, value: v }));
  const union = (schema.anyOf ?? schema.oneOf) as unknown[] | undefined;
  if (Array.isArray(union)) return value;
  const properties = isObject(schema.properties) ? schema.properties : undefined;
  if (!properties) return value;
  return Object.fromEntries(
    Object.keys(properties).map((name) => [
      name,
      name in value ? toStrictForm(properties[name], value[name]) : null,
    ]),
  );
}
