import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';

/** JSON Schema checks of skills' inputs and outputs: one compiler, each schema compiled once. */
const ajv = new Ajv({ allErrors: false, strict: false, validateFormats: false });
const compiled = new WeakMap<object, ValidateFunction>();

/** Compiles a schema, or answers why it cannot be (an invalid schema). */
export function compileSchema(schema: object): ValidateFunction | string {
  try {
    let fn = compiled.get(schema);
    if (!fn) compiled.set(schema, (fn = ajv.compile(schema)));
    return fn;
  } catch (err) {
    return (err as Error).message;
  }
}

/** `/a/0/b` as `<root>.a[0].b`: how the API names a place in a body. */
function pathOf(root: string, error: ErrorObject): string {
  let out = root;
  for (const part of error.instancePath.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(key) ? `[${key}]` : `.${key}`;
  }
  // A missing property is named by the property, not by the object it is missing from.
  if (error.keyword === 'required')
    out += `.${(error.params as { missingProperty: string }).missingProperty}`;
  if (error.keyword === 'additionalProperties') {
    out += `.${(error.params as { additionalProperty: string }).additionalProperty}`;
  }
  return out;
}

/** A value's first violation of a schema: where (`input.items[2].name`) and what, with the schema path. */
export interface SchemaViolation {
  path: string;
  message: string;
  schemaPath: string;
}

/** Checks `value` against `schema`; the first violation, or `undefined` when it conforms. */
export function violation(schema: object, value: unknown, root: string): SchemaViolation | undefined {
  const fn = compileSchema(schema);
  if (typeof fn === 'string') return { path: root, message: `the schema is invalid: ${fn}`, schemaPath: '#' };
  if (fn(value)) return undefined;
  const error = fn.errors![0];
  const what =
    error.keyword === 'required'
      ? 'is required'
      : error.keyword === 'additionalProperties'
        ? 'is not allowed here'
        : (error.message ?? 'is invalid');
  return { path: pathOf(root, error), message: what, schemaPath: error.schemaPath };
}
