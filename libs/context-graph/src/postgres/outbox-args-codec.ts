// The arguments of an outbox entry as JSON a `jsonb` column keeps exactly. Plain JSON would lose what the graph
// stores differ on: a property set to `undefined` (kept by `toStrictEqual`, dropped by JSON), `Date`s, numbers JSON
// has no text for, and, on the jsonb side, key order (jsonb sorts keys; a session's metadata is stored as its JSON
// text, so the order is part of the record) and strings Postgres refuses in jsonb (NUL, lone UTF-16 surrogates:
// output excerpts can hold either).
//
// Encoding: strings, booleans, null and finite numbers stand for themselves; everything else is an array whose
// first element is a tag, so no encoded value is ambiguous:
//   ['a', ...items]            array                       ['o', key1, value1, key2, value2, ...]  object
//   ['u']                      undefined                   ['d', epochMs | null]                   Date
//   ['n', 'NaN' | '-0' | ...]  number JSON cannot hold     ['b', base64 of the UTF-16 code units]   jsonb-unsafe string

type Encoded = string | number | boolean | null | Encoded[];

/** Encodes a method's arguments; the result goes to Postgres as the text of a `jsonb` value. */
export function encodeArgs(args: readonly unknown[]): string {
  return JSON.stringify(encode(args, 0));
}

/** The arguments `encodeArgs` was given, from the `jsonb` value as `pg` parses it. */
export function decodeArgs(value: unknown): unknown[] {
  const args = decode(value as Encoded);
  if (!Array.isArray(args)) throw new TypeError('an outbox entry holds no argument list');
  return args;
}

function encode(value: unknown, depth: number): Encoded {
  if (depth > 100) throw new TypeError('outbox arguments nest too deeply (a cycle?)');
  switch (typeof value) {
    case 'string':
      return jsonbSafe(value) ? value : ['b', Buffer.from(value, 'utf16le').toString('base64')];
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0)
        ? value
        : ['n', Object.is(value, -0) ? '-0' : String(value)];
    case 'undefined':
      return ['u'];
    case 'object':
      if (value === null) return null;
      // Array.from, not map: a hole reads as undefined instead of staying a hole JSON turns into null.
      if (Array.isArray(value)) return ['a', ...Array.from(value, (v: unknown) => encode(v, depth + 1))];
      if (value instanceof Date) return ['d', Number.isNaN(value.getTime()) ? null : value.getTime()];
      return ['o', ...Object.entries(value).flatMap(([k, v]) => [k, encode(v, depth + 1)])];
    case 'bigint':
    case 'function':
    case 'symbol':
      // No graph record holds one, and none would survive a restart.
      throw new TypeError(`cannot keep a ${typeof value} in the outbox`);
  }
}

function decode(value: Encoded): unknown {
  if (!Array.isArray(value)) return value;
  const [tag, ...rest] = value;
  switch (tag as string) {
    case 'a':
      return rest.map(decode);
    case 'o': {
      const object: Record<string, unknown> = {};
      for (let i = 0; i < rest.length; i += 2) {
        // defineProperty: a key named __proto__ is data here, not the object's prototype.
        Object.defineProperty(object, rest[i] as string, {
          value: decode(rest[i + 1]),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return object;
    }
    case 'u':
      return undefined;
    case 'd':
      return new Date(rest[0] === null ? NaN : (rest[0] as number));
    case 'n':
      return Number(rest[0]);
    case 'b':
      return Buffer.from(rest[0] as string, 'base64').toString('utf16le');
    default:
      throw new TypeError(`unknown outbox value tag ${JSON.stringify(tag)}`);
  }
}

/** Whether Postgres keeps the string in jsonb: no NUL, and well-formed UTF-16 (no lone surrogate). */
function jsonbSafe(s: string): boolean {
  return !s.includes('\u0000') && s.isWellFormed();
}
