import { acceptsNull, isMapSchema, MAP_AS_PAIRS, toOpenAiStrictSchema } from './openai-strict-schema';
import type { JsonSchema } from './tool-catalog';

const schema = (properties: Record<string, unknown>, required: string[] = []): JsonSchema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

describe('toOpenAiStrictSchema', () => {
  it('keeps required fields as they are and lists every field in required', () => {
    const out = toOpenAiStrictSchema(
      schema({ path: { type: 'string', description: 'A path.' }, all: { type: 'boolean' } }, ['path']),
    );
    expect(out).toEqual({
      type: 'object',
      properties: { path: { type: 'string', description: 'A path.' }, all: { type: ['boolean', 'null'] } },
      required: ['path', 'all'],
      additionalProperties: false,
    });
  });

  it('makes optional primitives nullable by type, and optional enums, arrays and objects by anyOf', () => {
    const out = toOpenAiStrictSchema(
      schema({
        n: { type: 'integer' },
        x: { type: 'number' },
        s: { type: 'string', description: 'S.' },
        e: { type: 'string', enum: ['a', 'b'], description: 'E.' },
        list: { type: 'array', items: { type: 'string' } },
        obj: { type: 'object', properties: { k: { type: 'string' } }, required: [] },
      }),
    );
    expect(out.properties).toEqual({
      n: { type: ['integer', 'null'] },
      x: { type: ['number', 'null'] },
      s: { type: ['string', 'null'], description: 'S.' },
      e: { anyOf: [{ type: 'string', enum: ['a', 'b'] }, { type: 'null' }], description: 'E.' },
      list: { anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'null' }] },
      obj: {
        anyOf: [
          {
            type: 'object',
            properties: { k: { type: ['string', 'null'] } },
            required: ['k'],
            additionalProperties: false,
          },
          { type: 'null' },
        ],
      },
    });
  });

  it('says in the description what strict mode cannot: lengths, bounds, patterns, formats, item counts, defaults', () => {
    const out = toOpenAiStrictSchema(
      schema(
        {
          a: { type: 'string', minLength: 1, maxLength: 64, description: 'A key.' },
          b: { type: 'string', minLength: 1 },
          c: { type: 'string', maxLength: 8 },
          d: { type: 'string', pattern: '^tab_[0-9]+$', format: 'uri' },
          e: { type: 'integer', minimum: 1, maximum: 3 },
          f: { type: 'integer', minimum: 0 },
          g: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
          h: { type: 'integer', maximum: 10, exclusiveMinimum: 0, multipleOf: 2 },
          i: {
            type: 'array',
            items: { type: 'string', maxLength: 5 },
            minItems: 1,
            maxItems: 100,
            uniqueItems: true,
          },
          j: { type: 'array', items: { type: 'string' }, minItems: 2 },
          k: { type: 'string', default: 'load' },
          l: { type: 'number', exclusiveMaximum: 1 },
        },
        ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'],
      ),
    );
    const described = Object.fromEntries(
      Object.entries(out.properties).map(([k, v]) => [k, (v as { description?: string }).description]),
    );
    expect(described).toEqual({
      a: 'A key. 1 to 64 characters.',
      b: 'At least 1 character.',
      c: 'At most 8 characters.',
      d: 'Must match the regular expression ^tab_[0-9]+$ Format: uri.',
      e: 'From 1 to 3.',
      f: 'At least 0.',
      g: 'At least 1.',
      h: 'At most 10. Greater than 0. A multiple of 2.',
      i: '1 to 100 items. No duplicates.',
      j: 'At least 2 items.',
      k: 'Default: "load".',
      l: 'Less than 1.',
    });
    expect((out.properties.i as { items: unknown }).items).toEqual({
      type: 'string',
      description: 'At most 5 characters.',
    });
    const keywords = JSON.stringify(out).match(
      /"(minLength|maxLength|pattern|format|minimum|maximum|default)"/,
    );
    expect(keywords).toBeNull();
  });

  it('turns a free-form map into a list of {name, value} pairs', () => {
    const env = { type: 'object', additionalProperties: { type: 'string' }, description: 'Variables.' };
    const out = toOpenAiStrictSchema(schema({ env, must: env }, ['must']));
    const pairs = {
      type: 'array',
      items: {
        type: 'object',
        properties: { name: { type: 'string' }, value: { type: 'string' } },
        required: ['name', 'value'],
        additionalProperties: false,
      },
    };
    expect(out.properties.must).toEqual({ ...pairs, description: `Variables. ${MAP_AS_PAIRS}` });
    expect(out.properties.env).toEqual({
      anyOf: [pairs, { type: 'null' }],
      description: `Variables. ${MAP_AS_PAIRS}`,
    });
  });

  it('refuses a keyword it has no strict form for, naming where it is', () => {
    expect(() =>
      toOpenAiStrictSchema(
        schema({ o: { type: 'object', properties: { p: { type: 'string', contains: {} } } } }),
      ),
    ).toThrow('tool schema o.p: keyword contains has no OpenAI strict-mode form');
    expect(() => toOpenAiStrictSchema(schema({ m: { type: 'object', patternProperties: {} } }))).toThrow(
      /keyword patternProperties/,
    );
  });

  it('leaves the source schema as it was', () => {
    const source = schema({ t: { type: 'integer', minimum: 1 }, e: { type: 'string', enum: ['x'] } }, ['t']);
    const copy = structuredClone(source);
    toOpenAiStrictSchema(source);
    expect(source).toEqual(copy);
  });
});

describe('toOpenAiStrictSchema of a skill’s schema (declaredOnly)', () => {
  const skill = (s: unknown) => toOpenAiStrictSchema(s as JsonSchema, { declaredOnly: true });

  it('has no strict form for an object open to keys it does not name, at any depth', () => {
    expect(() => skill({ type: 'object' })).toThrow(/\(root\): an object that takes keys it does not name/);
    expect(() =>
      skill(schema({ inner: { type: 'object', properties: { a: { type: 'string' } } } }, ['inner'])),
    ).toThrow(/tool schema inner: an object that takes keys it does not name/);
    // The same object closed is strict.
    expect(skill(schema({ inner: schema({ a: { type: 'string' } }, ['a']) }, ['inner']))).toEqual(
      schema({ inner: schema({ a: { type: 'string' } }, ['a']) }, ['inner']),
    );
  });

  it('makes a oneOf whose branches cannot overlap an anyOf, and const a one-value enum', () => {
    const circle = schema({ kind: { const: 'circle' }, r: { type: 'number' } }, ['kind', 'r']);
    const square = schema({ kind: { type: 'string', enum: ['square'] }, side: { type: 'number' } }, [
      'kind',
      'side',
    ]);
    const out = skill(
      schema(
        { shape: { oneOf: [circle, square] }, n: { oneOf: [{ type: 'string' }, { type: 'integer' }] } },
        ['shape', 'n'],
      ),
    );
    expect(out.properties.shape).toEqual({
      anyOf: [
        schema({ kind: { enum: ['circle'] }, r: { type: 'number' } }, ['kind', 'r']),
        schema({ kind: { type: 'string', enum: ['square'] }, side: { type: 'number' } }, ['kind', 'side']),
      ],
    });
    expect(out.properties.n).toEqual({ anyOf: [{ type: 'string' }, { type: 'integer' }] });
  });

  it('has no strict form for a oneOf whose branches can overlap, or an optional field inside a branch', () => {
    expect(() => skill(schema({ n: { oneOf: [{ type: 'integer' }, { type: 'number' }] } }, ['n']))).toThrow(
      /tool schema n: a oneOf whose branches can overlap/,
    );
    const a = schema({ kind: { const: 'a' }, x: { type: 'string' } }, ['kind']);
    const b = schema({ kind: { const: 'b' } }, ['kind']);
    expect(() => skill(schema({ v: { oneOf: [a, b] } }, ['v']))).toThrow(
      /tool schema v<0>.x: an optional property inside anyOf or oneOf/,
    );
  });

  it('keeps a field that already takes null as it is, and makes other optional fields nullable', () => {
    const out = skill(
      schema({ maybe: { type: ['string', 'null'] }, deep: schema({ n: { type: 'integer' } }, []) }, []),
    );
    expect(out.properties.maybe).toEqual({ type: ['string', 'null'] });
    expect(out.properties.deep).toEqual({
      anyOf: [schema({ n: { type: ['integer', 'null'] } }, ['n']), { type: 'null' }],
    });
  });
});

describe('acceptsNull', () => {
  it('says whether a schema admits null', () => {
    expect(acceptsNull({ type: 'null' })).toBe(true);
    expect(acceptsNull({ type: ['string', 'null'] })).toBe(true);
    expect(acceptsNull({ enum: ['a', null] })).toBe(true);
    expect(acceptsNull({ anyOf: [{ type: 'string' }, { const: null }] })).toBe(true);
    expect(acceptsNull({})).toBe(true);
    expect(acceptsNull({ type: 'string' })).toBe(false);
    expect(acceptsNull({ enum: ['a'] })).toBe(false);
    expect(acceptsNull({ oneOf: [{ type: 'string' }, { type: 'integer' }] })).toBe(false);
  });
});

describe('isMapSchema', () => {
  it('is true only for an object with a value schema and no named properties', () => {
    expect(isMapSchema({ type: 'object', additionalProperties: { type: 'string' } })).toBe(true);
    expect(isMapSchema({ type: 'object', additionalProperties: false, properties: {} })).toBe(false);
    expect(isMapSchema({ type: 'object', properties: {}, additionalProperties: { type: 'string' } })).toBe(
      false,
    );
    expect(isMapSchema({ type: 'string' })).toBe(false);
    expect(isMapSchema(undefined)).toBe(false);
  });
});
