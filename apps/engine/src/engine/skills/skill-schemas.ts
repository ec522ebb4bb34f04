import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import * as vm from 'node:vm';
import { compileLinearRegex, LinearRegexError, type LinearRegex } from '../../platform/regex/linear-regex';

/**
 * The most RE2 instructions all the patterns of one schema may compile to (`pattern`, `patternProperties`,
 * `propertyNames`). Compiling costs tens of microseconds per instruction and a match up to about this much per
 * character, so a schema of 64 KiB cannot hold patterns that take the engine seconds to compile or to run.
 */
export const MAX_SCHEMA_PATTERN_SIZE = 2000;
/**
 * How long one check of a value against a schema may run. Patterns are linear, but other keywords are not:
 * `uniqueItems` over objects compares every pair, nested `anyOf`s retry the same value down every branch. The check
 * runs under this deadline (V8 interrupts it), so no schema and no value can hold the event loop for longer.
 */
export const SCHEMA_CHECK_TIMEOUT_MS = 50;

/** The patterns' budget left in the schema being compiled (patterns are compiled while Ajv compiles the schema). */
let budget = MAX_SCHEMA_PATTERN_SIZE;

/**
 * Ajv's regex engine: RE2, in linear time. A pattern RE2 cannot run (back-references, lookarounds) or that would
 * exceed the schema's budget makes the schema invalid, which registration reports naming the schema's field.
 */
const regExp = Object.assign(
  (pattern: string): LinearRegex & { toString(): string } => {
    try {
      // JSON Schema patterns are unanchored searches, as RE2's `test` is.
      const re = compileLinearRegex(pattern, { maxSize: budget });
      budget -= re.size;
      // Ajv keeps one compiled pattern per `toString()`, as it would a RegExp's `/source/u`.
      return { test: (value: string) => re.test(value), size: re.size, toString: () => `/${pattern}/u` };
    } catch (err) {
      if (!(err instanceof LinearRegexError)) throw err;
      const why =
        err.size !== undefined && err.size <= MAX_SCHEMA_PATTERN_SIZE
          ? `expands to about ${err.size} steps: all the patterns of a schema may expand to ` +
            `${MAX_SCHEMA_PATTERN_SIZE} together, and ${budget} are left`
          : err.message;
      throw new Error(`pattern ${JSON.stringify(pattern.slice(0, 100))} ${why}`);
    }
  },
  // Only read when Ajv generates standalone code, which the engine never does.
  { code: 'new RegExp' },
);

/** JSON Schema checks of skills' inputs and outputs: one compiler, each schema compiled once. */
const ajv = new Ajv({ allErrors: false, strict: false, validateFormats: false, code: { regExp } });
const compiled = new WeakMap<object, ValidateFunction>();

/** Compiles a schema, or answers why it cannot be (an invalid schema). */
export function compileSchema(schema: object): ValidateFunction | string {
  try {
    let fn = compiled.get(schema);
    if (!fn) {
      budget = MAX_SCHEMA_PATTERN_SIZE;
      compiled.set(schema, (fn = ajv.compile(schema)));
    }
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

const context = vm.createContext({});
/** Checks that have run once (their code compiled, their automata built). */
const warm = new WeakSet<(value: unknown) => boolean>();
const CHECK = new vm.Script('check(value)');

/** How many times a check that ran out of time without using the CPU for it is tried again. */
const HELD_UP_RETRIES = 2;

/** The CPU time this thread has used, in milliseconds. */
const threadCpuMs = (): number => {
  const { user, system } = process.threadCpuUsage();
  return (user + system) / 1000;
};

/**
 * Runs a compiled check under SCHEMA_CHECK_TIMEOUT_MS; undefined when it ran out of time. The deadline is wall time,
 * so a check can also run out of it without costing anything: a garbage collection, or a machine busy with other
 * processes, held the thread. A check that used less than half its budget on the CPU was held up, not costly, and is
 * tried again (twice at most); so is a schema's first check, which also compiles its code and builds its patterns'
 * automata. A check refused for its cost is dropped from both caches: an interrupted check may leave a half-built
 * state in its patterns' lazy automata.
 */
export function checkWithin(
  schema: object,
  fn: (value: unknown) => boolean,
  value: unknown,
  timeoutMs = SCHEMA_CHECK_TIMEOUT_MS,
): boolean | undefined {
  let heldUp = 0;
  for (;;) {
    Object.assign(context, { check: fn, value });
    const cpu = threadCpuMs();
    try {
      const ok = CHECK.runInContext(context, { timeout: timeoutMs }) as boolean;
      warm.add(fn);
      return ok;
    } catch (err) {
      if ((err as { code?: string }).code !== 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw err;
      const first = !warm.has(fn);
      warm.add(fn);
      if (first) continue;
      if (threadCpuMs() - cpu < timeoutMs / 2 && heldUp++ < HELD_UP_RETRIES) continue;
      compiled.delete(schema);
      ajv.removeSchema(schema);
      return undefined;
    } finally {
      Object.assign(context, { check: undefined, value: undefined });
    }
  }
}

/** Checks `value` against `schema`; the first violation, or `undefined` when it conforms. */
export function violation(schema: object, value: unknown, root: string): SchemaViolation | undefined {
  const fn = compileSchema(schema);
  if (typeof fn === 'string') return { path: root, message: `the schema is invalid: ${fn}`, schemaPath: '#' };
  const ok = checkWithin(schema, fn, value);
  if (ok === undefined) {
    return {
      path: root,
      message: `could not be checked against the schema within ${SCHEMA_CHECK_TIMEOUT_MS} ms (too large for it, or the schema is too costly)`,
      schemaPath: '#',
    };
  }
  if (ok) return undefined;
  const error = fn.errors![0];
  const what =
    error.keyword === 'required'
      ? 'is required'
      : error.keyword === 'additionalProperties'
        ? 'is not allowed here'
        : (error.message ?? 'is invalid');
  return { path: pathOf(root, error), message: what, schemaPath: error.schemaPath };
}
