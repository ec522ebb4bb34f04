/** Limits on the shape of a JSON request body, checked before anything validates or reads it. */
export const MAX_JSON_DEPTH = 64;
/**
 * The most values one body may hold (array items and object members, at any depth), and the most keys one object
 * may have. A body within the byte limit can hold millions of them, and much that reads a body (validation, copies,
 * storage) does work per value or per key, some of it more than linear: these bound every request's work.
 */
export const MAX_JSON_VALUES = 100_000;
export const MAX_OBJECT_KEYS = 10_000;

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
 * Whether JSON text nests arrays and objects deeper than `limit`, found without parsing (so a hostile body cannot
 * exhaust the stack of anything that walks it later). See jsonShapeExceeds.
 */
export const jsonDepthExceeds = (text: string, limit: number): boolean =>
  jsonShapeExceeds(text, limit, Infinity) === 'depth';

/**
 * Whether JSON text nests deeper than `maxDepth` or holds more than `maxValues` values (the root, and each array item
 * and object member at any depth), in one pass without parsing, so that a body of a million tiny values is refused
 * before anything builds them. Answers which limit it exceeds first, or undefined.
 */
export function jsonShapeExceeds(
  text: string,
  maxDepth: number,
  maxValues: number,
): 'depth' | 'values' | undefined {
  let values = 1;
  if (values > maxValues) return 'values';
  let depth = 0;
  // After `[` or `{`, the next character that is not white space opens a first item, unless it closes the container.
  let first = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    if (first && c !== 0x5d && c !== 0x7d && ++values > maxValues) return 'values';
    first = false;
    if (c === 0x22) {
      // A string is skipped to its closing quote by the engine's own search (a body's bulk is strings: code,
      // file contents), not a character at a time: a quote ends it unless an odd run of backslashes precedes it.
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && backslashesBefore(text, end, i) % 2 === 1) end = text.indexOf('"', end + 1);
      if (end === -1) return undefined; // unterminated: JSON.parse says so
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return 'depth';
      first = true;
    } else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === 0x2c && ++values > maxValues) return 'values';
  }
  return undefined;
}

/** One open array or object of the scan in `jsonWideObjectProblem`. */
interface OpenContainer {
  object: boolean;
  /** Members seen (an object's keys; an array's items, counted at each comma). */
  count: number;
  /** Object: the next string is a key. */
  expectKey: boolean;
  /** Object: where the text of its latest key starts and ends (quotes included). */
  keyStart: number;
  keyEnd: number;
}

/**
 * The first object of JSON text with more than `maxKeys` keys, found in one pass without parsing, named by its path
 * as `jsonInputProblem` names it: building such an object (JSON.parse) is the costly part of refusing it, and holds
 * the event loop for tens of milliseconds per 50 000 keys. Text that is not JSON is left to JSON.parse to refuse.
 */
export function jsonWideObjectProblem(text: string, maxKeys: number): JsonInputProblem | undefined {
  // A key takes at least 4 characters (`"":0`) and a comma: shorter text cannot hold an object too wide.
  if (text.length < maxKeys * 5) return undefined;
  const open: OpenContainer[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = open[open.length - 1];
    if (c === 0x22) {
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && backslashesBefore(text, end, i) % 2 === 1) end = text.indexOf('"', end + 1);
      if (end === -1) return undefined;
      if (top?.object && top.expectKey) {
        top.expectKey = false;
        top.keyStart = i;
        top.keyEnd = end + 1;
        if (++top.count > maxKeys) {
          const field = pathOfOpen(text, open.slice(0, -1));
          return new JsonInputProblem(
            field,
            `has more than ${maxKeys} keys; an object may have at most ${maxKeys}`,
            'TOO_MANY_KEYS',
          );
        }
      }
      i = end;
    } else if (c === 0x7b) open.push({ object: true, count: 0, expectKey: true, keyStart: 0, keyEnd: 0 });
    else if (c === 0x5b) open.push({ object: false, count: 0, expectKey: false, keyStart: 0, keyEnd: 0 });
    else if (c === 0x5d || c === 0x7d) open.pop();
    else if (c === 0x2c && top) {
      if (top.object) top.expectKey = true;
      else top.count++;
    }
  }
  return undefined;
}

/** The path (`a[0].metadata`, `body` for the root) of the member each open container is in now. */
function pathOfOpen(text: string, containers: OpenContainer[]): string {
  let path = '';
  for (const c of containers) {
    if (!c.object) path = pathOf(path, c.count);
    else {
      let key: string;
      try {
        key = JSON.parse(text.slice(c.keyStart, c.keyEnd)) as string;
      } catch {
        key = text.slice(c.keyStart + 1, c.keyEnd - 1);
      }
      path = pathOf(path, key);
    }
  }
  return path || 'body';
}

/** How many backslashes stand right before `at`, back to (not including) `from`. */
function backslashesBefore(text: string, at: number, from: number): number {
  let n = 0;
  while (at - n - 1 > from && text.charCodeAt(at - n - 1) === 0x5c) n++;
  return n;
}

/** Whether JSON text holds more than `limit` values (see jsonShapeExceeds). */
export const jsonValuesExceed = (text: string, limit: number): boolean =>
  jsonShapeExceeds(text, Infinity, limit) === 'values';

const pathOf = (parent: string, key: string | number): string =>
  typeof key === 'number' ? `${parent}[${key}]` : parent === '' ? key : `${parent}.${key}`;

/**
 * Walks a parsed body (iteratively) and returns the first problem: more values than MAX_JSON_VALUES, an object of more
 * than MAX_OBJECT_KEYS keys, a key that reaches object internals, or a string (value or key) holding a lone UTF-16
 * surrogate, which no file name or program text can carry faithfully.
 */
export function jsonInputProblem(value: unknown): JsonInputProblem | undefined {
  // Each node knows its parent and its key; a path is spelled out only for a problem, not for every value.
  type Node = { value: unknown; parent?: Node; key?: string | number };
  const pathOfNode = (node: Node): string => {
    const keys: Array<string | number> = [];
    for (let n: Node | undefined = node; n?.parent; n = n.parent) keys.push(n.key!);
    return keys.reverse().reduce<string>((path, key) => pathOf(path, key), '') || 'body';
  };
  const stack: Node[] = [{ value }];
  let values = 0;
  while (stack.length > 0) {
    if (++values > MAX_JSON_VALUES) return tooManyValues();
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === 'string') {
      if (!v.isWellFormed()) {
        return new JsonInputProblem(pathOfNode(node), 'contains a lone UTF-16 surrogate', 'INVALID_STRING');
      }
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push({ value: v[i] as unknown, parent: node, key: i });
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      if (keys.length > MAX_OBJECT_KEYS) {
        return new JsonInputProblem(
          pathOfNode(node),
          `has ${keys.length} keys; an object may have at most ${MAX_OBJECT_KEYS}`,
          'TOO_MANY_KEYS',
        );
      }
      for (const key of keys) {
        const child: Node = { value: (v as Record<string, unknown>)[key], parent: node, key };
        if (isForbiddenKey(key)) {
          return new JsonInputProblem(pathOfNode(child), forbiddenKeyMessage(key), 'FORBIDDEN_KEY');
        }
        if (!key.isWellFormed()) {
          return new JsonInputProblem(
            pathOfNode(node),
            'a key contains a lone UTF-16 surrogate',
            'INVALID_STRING',
          );
        }
        stack.push(child);
      }
    }
  }
  return undefined;
}

/** The refusal of a body over MAX_JSON_VALUES, the same before and after parsing. */
export const tooManyValues = (): JsonInputProblem =>
  new JsonInputProblem(
    'body',
    `holds more than ${MAX_JSON_VALUES} values (array items and object members, at any depth)`,
    'TOO_MANY_VALUES',
  );
