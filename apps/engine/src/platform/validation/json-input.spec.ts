import * as fc from 'fast-check';
import {
  jsonDepthExceeds,
  jsonInputProblem,
  JsonInputProblem,
  jsonValuesExceed,
  jsonWideObjectProblem,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  MAX_OBJECT_KEYS,
} from './json-input';

const nested = (depth: number, open = '[', close = ']', inner = ''): string =>
  `${open.repeat(depth)}${inner}${close.repeat(depth)}`;

/** The deepest nesting JSON.parse sees in `text`, counted on the parsed value. */
function parsedDepth(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(parsedDepth));
}

describe('jsonDepthExceeds', () => {
  it('allows nesting up to the limit and refuses one level more', () => {
    expect(jsonDepthExceeds(nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthExceeds(nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonDepthExceeds(nested(10_000), MAX_JSON_DEPTH)).toBe(true);
  });

  it('counts objects and arrays alike, mixed', () => {
    const mixed = (depth: number): string => (depth === 0 ? '1' : `{"a":[${mixed(depth - 1)}]}`);
    // Each level of `mixed` is an object and an array.
    expect(jsonDepthExceeds(mixed(32), 64)).toBe(false);
    expect(jsonDepthExceeds(mixed(33), 64)).toBe(true);
    expect(parsedDepth(JSON.parse(mixed(33)))).toBe(66);
  });

  it('measures depth, not the number of brackets: siblings do not add up', () => {
    const wide = `[${Array.from({ length: 1000 }, () => nested(3)).join(',')}]`;
    expect(jsonDepthExceeds(wide, 4)).toBe(false);
    expect(jsonDepthExceeds(wide, 3)).toBe(true);
  });

  it('ignores brackets inside strings', () => {
    const text = JSON.stringify({ code: '['.repeat(1000), more: '{'.repeat(1000), close: ']]]}}}' });
    expect(jsonDepthExceeds(text, 1)).toBe(false);
    expect(jsonDepthExceeds(`[${JSON.stringify('[[[[')}]`, 1)).toBe(false);
  });

  it('follows escapes: an escaped quote does not end a string, an escaped backslash does not escape the quote', () => {
    // "\"[[[[" stays one string: the brackets are inside it.
    expect(jsonDepthExceeds(JSON.stringify(['"[[[[']), 1)).toBe(false);
    // "\\" ends after the escaped backslash, so the brackets that follow are real.
    const afterBackslash = `["\\\\",${nested(3)}]`;
    expect(JSON.parse(afterBackslash)).toEqual(['\\', [[[]]]]);
    expect(jsonDepthExceeds(afterBackslash, 3)).toBe(true);
    expect(jsonDepthExceeds(afterBackslash, 4)).toBe(false);
    // Unicode escapes are plain characters to the scanner.
    expect(jsonDepthExceeds('["\\u005b\\u005b\\u005b"]', 1)).toBe(false);
  });

  it('agrees with the parsed depth on arbitrary bodies', () => {
    const samples = [
      '{}',
      '[]',
      '1',
      '"x"',
      '{"a":{"b":{"c":[1,2,{"d":"]]]"}]}}}',
      '[{"k\\"[":[["\\\\"]]}]',
      JSON.stringify({ steps: [{ id: 'a', action: { type: 'file', op: 'list', env: { A: '{[' } } }] }),
    ];
    for (const text of samples) {
      const depth = parsedDepth(JSON.parse(text));
      expect(jsonDepthExceeds(text, depth)).toBe(false);
      if (depth > 0) expect(jsonDepthExceeds(text, depth - 1)).toBe(true);
    }
  });

  it('agrees with the parsed depth on generated JSON, strings full of brackets, quotes and backslashes', () => {
    const tricky = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'u', '0', 'a') });
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        tricky,
        fc.jsonValue({ maxDepth: 2 }),
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(tricky, tie('node'), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), (v, limit) => {
        const text = JSON.stringify(v);
        expect(jsonDepthExceeds(text, limit)).toBe(parsedDepth(JSON.parse(text)) > limit);
      }),
      { seed: 12, numRuns: 500 },
    );
  });

  it('never throws on text that is not JSON (the parser refuses it afterwards)', () => {
    for (const text of ['', '"', '\\', '"\\', ']]]]', '}{', '[[[', '"unterminated [[[[']) {
      expect(() => jsonDepthExceeds(text, 2)).not.toThrow();
    }
    expect(jsonDepthExceeds('[[[', 2)).toBe(true);
  });
});

describe('jsonInputProblem', () => {
  const problem = (value: unknown): JsonInputProblem => {
    const p = jsonInputProblem(value);
    if (!p) throw new Error(`expected a problem with ${JSON.stringify(value)}`);
    return p;
  };

  it('accepts ordinary bodies, non-ASCII and astral characters included', () => {
    for (const value of [
      {},
      [],
      null,
      42,
      'text',
      { type: 'code', language: 'python', code: 'print("héllo 🚀")', env: { A: '1' } },
      { metadata: { nested: [{ deep: { list: [1, 'two', null, true] } }] } },
      { 'proto-type': 1, constructors: 2, __proto: 3, Constructor: 4 },
    ]) {
      expect(jsonInputProblem(value)).toBeUndefined();
    }
  });

  it.each(['__proto__', 'constructor', 'prototype'])(
    'refuses the key %s anywhere, naming its path',
    (key) => {
      const at = (body: string, path: string) => {
        const p = problem(JSON.parse(body));
        expect(p).toBeInstanceOf(JsonInputProblem);
        expect(p.code).toBe('FORBIDDEN_KEY');
        expect(p.field).toBe(path);
        expect(p.message).toContain(`"${key}"`);
      };
      at(`{"${key}":1}`, key);
      at(`{"metadata":{"${key}":{"admin":true}}}`, `metadata.${key}`);
      at(`{"env":{"${key}":"x"}}`, `env.${key}`);
      at(`{"steps":[{"id":"a"},{"id":"b","action":{"${key}":1}}]}`, `steps[1].action.${key}`);
      at(`[{"id":"t","input":{"${key}":null}}]`, `[0].input.${key}`);
      at(`{"a":[[{"b":{"${key}":[]}}]]}`, `a[0][0].b.${key}`);
    },
  );

  it('sees __proto__ as JSON.parse makes it: an own key, not a prototype', () => {
    const parsed = JSON.parse('{"metadata":{"__proto__":{"admin":true}}}') as { metadata: object };
    expect(Object.keys(parsed.metadata)).toEqual(['__proto__']);
    expect(problem(parsed).field).toBe('metadata.__proto__');
    // The walk itself must not have polluted anything.
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('refuses a lone surrogate in a string value, naming its path', () => {
    for (const [value, path] of [
      ['a\uD800b', 'body'],
      [{ path: 'a\uD800b' }, 'path'],
      [{ path: 'a\uDC00' }, 'path'],
      [{ code: '\uDBFF' }, 'code'],
      [{ steps: [{ action: { to: 'x\uDFFFy' } }] }, 'steps[0].action.to'],
      [{ values: ['ok', '\uD83D'] }, 'values[1]'],
    ] as const) {
      const p = problem(value);
      expect(p.code).toBe('INVALID_STRING');
      expect(p.field).toBe(path);
      expect(p.message).toContain('surrogate');
    }
  });

  it('refuses a lone surrogate in a key, naming the object that holds it', () => {
    expect(problem({ ['\uD800']: 1 }).field).toBe('body');
    const p = problem({ metadata: { ok: 1, ['k\uDC00']: 1 } });
    expect(p.code).toBe('INVALID_STRING');
    expect(p.field).toBe('metadata');
    expect(p.message).toContain('key');
  });

  it('keeps surrogate pairs: they are well-formed characters', () => {
    expect(jsonInputProblem({ path: '\uD83D\uDE80.txt', ['\uD83D\uDE80']: '🚀' })).toBeUndefined();
    expect(jsonInputProblem(JSON.parse('{"path":"\\ud83d\\ude80"}'))).toBeUndefined();
    expect(problem(JSON.parse('{"path":"a\\ud800b"}')).field).toBe('path');
  });

  it('walks deep and wide values without recursion', () => {
    let deep: unknown = 'leaf\uD800';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    expect(problem(deep).code).toBe('INVALID_STRING');
    // The root, and each item with its one member: just within MAX_JSON_VALUES.
    const wide = Array.from({ length: (MAX_JSON_VALUES - 1) / 2 }, (_, i) => ({ i }));
    expect(jsonInputProblem(wide)).toBeUndefined();
  });
});

describe('jsonValuesExceed', () => {
  /** The values JSON.parse builds from `text`: the root and every array item and object member. */
  function parsedValues(value: unknown): number {
    if (typeof value !== 'object' || value === null) return 1;
    const children = Array.isArray(value) ? value : Object.values(value);
    return 1 + children.reduce((n: number, c) => n + parsedValues(c), 0);
  }

  it('counts exactly what JSON.parse builds, whatever the nesting, white space and strings', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        const n = parsedValues(JSON.parse(text));
        expect(jsonValuesExceed(text, n)).toBe(false);
        expect(jsonValuesExceed(text, n - 1)).toBe(true);
      }),
      { numRuns: 300, seed: 27 },
    );
  });

  it('does not count commas, brackets or quotes inside strings, nor empty containers as items', () => {
    expect(jsonValuesExceed(JSON.stringify({ a: ',,,[1,2],"x",{}' }), 2)).toBe(false);
    expect(jsonValuesExceed('[[],{},[ ],{ }]', 5)).toBe(false);
    expect(jsonValuesExceed('[[],{},[ ],{ }]', 4)).toBe(true);
  });

  it('refuses a body of 200 000 keys fast, before anything parses it', () => {
    const text = JSON.stringify({
      metadata: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, 1])),
    });
    const start = performance.now();
    expect(jsonValuesExceed(text, MAX_JSON_VALUES)).toBe(true);
    expect(performance.now() - start).toBeLessThan(100);
  });
});

describe('jsonInputProblem: bounds', () => {
  it('refuses an object of more than MAX_OBJECT_KEYS keys, naming it', () => {
    const wide = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 1]));
    expect(jsonInputProblem({ metadata: wide(MAX_OBJECT_KEYS) })).toBeUndefined();
    const problem = jsonInputProblem({ a: [{ metadata: wide(MAX_OBJECT_KEYS + 1) }] });
    expect(problem).toMatchObject({ field: 'a[0].metadata', code: 'TOO_MANY_KEYS' });
    expect(problem!.message).toContain(`at most ${MAX_OBJECT_KEYS}`);
  });

  it('refuses more than MAX_JSON_VALUES values (a parsed value from elsewhere than a body, say tool arguments)', () => {
    const many = Array.from({ length: 10 }, () => Array.from({ length: MAX_JSON_VALUES / 10 }, () => 0));
    expect(jsonInputProblem(many)).toMatchObject({ field: 'body', code: 'TOO_MANY_VALUES' });
    expect(jsonInputProblem(many.slice(1))).toBeUndefined();
  });
});

describe('jsonWideObjectProblem: an object too wide, found before parsing', () => {
  const members = (n: number, prefix = 'k') =>
    Array.from({ length: n }, (_, i) => `"${prefix}${i}":1`).join(',');
  const wide = (n: number) => `{${members(n)}}`;
  /** What the check after parsing says of the same text. */
  const afterParsing = (text: string) => jsonInputProblem(JSON.parse(text));

  it.each([
    ['the root', wide(MAX_OBJECT_KEYS + 1), 'body'],
    ['a member', `{"metadata":${wide(MAX_OBJECT_KEYS + 1)}}`, 'metadata'],
    [
      'in an array, after other items',
      `{"a":[1,"x,y",{"b":2},{"metadata":${wide(MAX_OBJECT_KEYS + 1)}}]}`,
      'a[3].metadata',
    ],
    ['under a key with escapes', `{"we\\"ird\\\\":${wide(MAX_OBJECT_KEYS + 1)}}`, 'we"ird\\'],
    ['after a sibling object', `{"first":{"x":1},"second":${wide(MAX_OBJECT_KEYS + 1)}}`, 'second'],
  ])('names %s as the check after parsing does', (_what, text, field) => {
    const problem = jsonWideObjectProblem(text, MAX_OBJECT_KEYS);
    expect(problem).toMatchObject({ field, code: 'TOO_MANY_KEYS' });
    expect(problem!.message).toBe(
      `has more than ${MAX_OBJECT_KEYS} keys; an object may have at most ${MAX_OBJECT_KEYS}`,
    );
    expect(afterParsing(text)).toMatchObject({ field, code: 'TOO_MANY_KEYS' });
  });

  it('counts each object on its own, and keys only: commas and colons in strings, and values, do not count', () => {
    const half = MAX_OBJECT_KEYS / 2 + 1;
    const texts = [
      wide(MAX_OBJECT_KEYS),
      `{"a":${wide(half)},"b":${wide(half)}}`,
      `{"s":"${'"k":1,'.replace(/"/g, '\\"').repeat(MAX_OBJECT_KEYS + 1)}"}`,
      `[${Array.from({ length: MAX_OBJECT_KEYS + 1 }, () => '{"k":1}').join(',')}]`,
      `{"a":[${Array.from({ length: MAX_OBJECT_KEYS + 1 }, (_, i) => i).join(',')}]}`,
    ];
    for (const text of texts) {
      expect(jsonWideObjectProblem(text, MAX_OBJECT_KEYS)).toBeUndefined();
      expect(afterParsing(text)).toBeUndefined();
    }
  });

  it('leaves text that is not JSON to JSON.parse', () => {
    expect(
      jsonWideObjectProblem(`{"a":"${'x'.repeat(MAX_OBJECT_KEYS * 5)}`, MAX_OBJECT_KEYS),
    ).toBeUndefined();
    expect(
      jsonWideObjectProblem(`]]]}}${wide(3)}`.padEnd(MAX_OBJECT_KEYS * 5), MAX_OBJECT_KEYS),
    ).toBeUndefined();
  });

  it('stops at the first key over the bound: what follows is never read', () => {
    const text = `{"metadata":{${members(MAX_OBJECT_KEYS + 1)},${'"unterminated'.repeat(1000)}`;
    expect(jsonWideObjectProblem(text, MAX_OBJECT_KEYS)?.field).toBe('metadata');
  });
});
