/** Limits on the shape of a JSON request body, checked before anything validates or reads it. */
export const MAX_JSON_DEPTH = 64;

/** Keys that reach object internals in JavaScript: refused anywhere in a body rather than stored or copied. */
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Whether `key` is one of the keys refused anywhere in a request. */
export const isForbiddenKey = (key: string): boolean => FORBIDDEN_KEYS.has(key);

/** Why a forbidden key is refused, the same wherever it is found. */
export const forbiddenKeyMessage = (key: string): string =>
  `the key "${key}" is not allowed anywhere in a request`;

/** A body that is not acceptable JSON input, with the path of the part at fault (`body` for the whole). */
export class JsonInputProblem extends Error {
  constructor(
    readonly field: string,
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * The deepest nesting of arrays and objects in JSON text, found without parsing (so a hostile body cannot exhaust
 * the stack of anything that walks it later). Stops counting past `limit`.
 */
export function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

const pathOf = (parent: string, key: string | number): string =>
  typeof key === 'number' ? `${parent}[${key}]` : parent === '' ? key : `${parent}.${key}`;

/**
 * Walks a parsed body (iteratively) and returns the first problem: a key that reaches object internals, or a string
 * (value or key) holding a lone UTF-16 surrogate, which no file name or program text can carry faithfully.
 */
export function jsonInputProblem(value: unknown): JsonInputProblem | undefined {
  const stack: Array<{ path: string; value: unknown }> = [{ path: '', value }];
  while (stack.length > 0) {
    const { path, value: v } = stack.pop()!;
    if (typeof v === 'string') {
      if (!v.isWellFormed()) {
        return new JsonInputProblem(path || 'body', 'contains a lone UTF-16 surrogate', 'INVALID_STRING');
      }
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => stack.push({ path: pathOf(path, i), value: item }));
    } else if (v !== null && typeof v === 'object') {
      for (const [key, item] of Object.entries(v)) {
        const at = pathOf(path, key);
        if (isForbiddenKey(key)) return new JsonInputProblem(at, forbiddenKeyMessage(key), 'FORBIDDEN_KEY');
        if (!key.isWellFormed()) {
          return new JsonInputProblem(
            path || 'body',
            'a key contains a lone UTF-16 surrogate',
            'INVALID_STRING',
          );
        }
        stack.push({ path: at, value: item });
      }
    }
  }
  return undefined;
}
