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

/**
 * The first object of JSON text with more than `maxKeys` keys, found in one pass without parsing, named by its path
 * as `jsonInputProblem` names it: building such an object (JSON.parse) is the costly part of refusing it, and holds
 * the event loop for tens of milliseconds per 50 000 keys. Text that is not JSON is left to JSON.parse to refuse.
 *
 * The open containers are kept in arrays indexed by depth, reused as the scan goes in and out, so that a body of
 * many small objects costs no allocation per object.
 */
export function jsonWideObjectProblem(text: string, maxKeys: number): JsonInputProblem | undefined {
  // A key takes at least 4 characters (`"":0`) and a comma: shorter text cannot hold an object too wide.
  if (text.length < maxKeys * 5) return undefined;
  const open: OpenContainers = { object: [], count: [], expectKey: [], keyStart: [], keyEnd: [] };
  /** The number of open containers; the innermost is at `depth - 1`. */
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = depth - 1;
    if (c === 0x22) {
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && backslashesBefore(text, end, i) % 2 === 1) end = text.indexOf('"', end + 1);
      if (end === -1) return undefined;
      if (top >= 0 && open.object[top] && open.expectKey[top]) {
        open.expectKey[top] = false;
        open.keyStart[top] = i;
        open.keyEnd[top] = end + 1;
        if (++open.count[top] > maxKeys) {
          return new JsonInputProblem(
            pathOfOpen(text, open, top),
            `has more than ${maxKeys} keys; an object may have at most ${maxKeys}`,
            'TOO_MANY_KEYS',
          );
        }
      }
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      open.object[depth] = c === 0x7b;
      open.count[depth] = 0;
      open.expectKey[depth] = c === 0x7b;
      depth++;
    } else if (c === 0x5d || c === 0x7d) {
      if (depth > 0) depth--;
    } else if (c === 0x2c && top >= 0) {
      if (open.object[top]) open.expectKey[top] = true;
      else open.count[top]++;
    }
  }
  return undefined;
}

/**
 * The open arrays and objects of the scan in `jsonWideObjectProblem`, one entry per depth: whether it is an object;
 * its members seen (an object's keys; an array's items, counted at each comma); whether an object's next string is a
 * key; where the text of an object's latest key starts and ends (quotes included).
 */
interface OpenContainers {
  object: boolean[];
  count: number[];
  expectKey: boolean[];
  keyStart: number[];
  keyEnd: number[];
}

/** The path (`a[0].metadata`, `body` for the root) of the member each of the first `depth` open containers is in now. */
function pathOfOpen(text: string, open: OpenContainers, depth: number): string {
  let path = '';
  for (let d = 0; d < depth; d++) {
    if (!open.object[d]) path = pathOf(path, open.count[d]);
    else {
      let key: string;
      try {
        key = JSON.parse(text.slice(open.keyStart[d], open.keyEnd[d])) as string;
      } catch {
        key = text.slice(open.keyStart[d] + 1, open.keyEnd[d] - 1);
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
  // Nearly every body is sound: one walk that allocates nothing per value says so, and only a body at fault is
  // walked again, keeping the path to each value, to name the part at fault. (The walk that keeps paths costs a node
  // per value: tens of milliseconds of the loop for a body of 50 000 empty objects.)
  return jsonInputSound(value) ? undefined : locateJsonInputProblem(value);
}

/**
 * `Array.isArray`, looked up once: a global's lookup inside a per-value loop is cheap in Node's own realm but costs
 * several times the walk in a `vm` context (Jest runs the engine in one for the end-to-end tests).
 */
const isArray = Array.isArray;

/** Whether a parsed body has none of the problems `jsonInputProblem` names: the same checks, without paths. */
function jsonInputSound(value: unknown): boolean {
  const stack: unknown[] = [value];
  let values = 0;
  while (stack.length > 0) {
    if (++values > MAX_JSON_VALUES) return false;
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!v.isWellFormed()) return false;
    } else if (isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push(v[i]);
    } else if (v !== null && typeof v === 'object') {
      let keys = 0;
      // A parsed body's objects are plain: `for…in` visits exactly their own keys, without an array of them.
      for (const key in v) {
        if (++keys > MAX_OBJECT_KEYS || FORBIDDEN_KEYS.has(key) || !key.isWellFormed()) return false;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return true;
}

/** The first problem of a parsed body `jsonInputSound` found at fault, named by its path. */
function locateJsonInputProblem(value: unknown): JsonInputProblem | undefined {
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

/**
 * Parses JSON text a tenant sent (a request body, a WebSocket frame, a model's tool-call `arguments`) within the
 * limits above, each checked before the step it protects: depth and the number of values on the text, then objects
 * too wide, then the parse, then keys and strings on the parsed value. A problem is thrown as a `JsonInputProblem`
 * naming the part at fault.
 */
export function parseBoundedJson(text: string): unknown {
  const exceeds = jsonShapeExceeds(text, MAX_JSON_DEPTH, MAX_JSON_VALUES);
  if (exceeds === 'depth') {
    throw new JsonInputProblem(
      'body',
      `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`,
      'TOO_DEEP',
    );
  }
  if (exceeds === 'values') throw tooManyValues();
  const wide = jsonWideObjectProblem(text, MAX_OBJECT_KEYS);
  if (wide) throw wide;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new JsonInputProblem('body', `is malformed JSON: ${(err as Error).message}`, 'MALFORMED_JSON');
  }
  const problem = jsonInputProblem(value);
  if (problem) throw problem;
  return value;
}

/** The refusal of a body over MAX_JSON_VALUES, the same before and after parsing. */
export const tooManyValues = (): JsonInputProblem =>
  new JsonInputProblem(
    'body',
    `holds more than ${MAX_JSON_VALUES} values (array items and object members, at any depth)`,
    'TOO_MANY_VALUES',
  );
