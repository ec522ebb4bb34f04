import { decodeArgs, encodeArgs } from './outbox-args-codec';

/** What `pg` hands back for a jsonb column: the JSON text parsed (after jsonb has sorted every object's keys). */
const roundTrip = (args: readonly unknown[]): unknown[] => decodeArgs(JSON.parse(encodeArgs(args)));

describe('outbox args codec', () => {
  it('gives back the arguments of a write exactly', () => {
    const args = [
      'session-1',
      {
        id: 'a1',
        nested: { list: [1, 'two', null, true, { deep: [] }], empty: {} },
        n: 12.5,
        big: 3 * 2 ** 32,
      },
      'deleted',
    ];
    expect(roundTrip(args)).toStrictEqual(args);
  });

  it('keeps a property set to undefined apart from an absent one, and undefined in lists and arguments', () => {
    const [decoded] = roundTrip([{ present: undefined, list: [undefined, 1] }]) as [Record<string, unknown>];
    expect(Object.keys(decoded)).toEqual(['present', 'list']);
    expect('present' in decoded).toBe(true);
    expect(decoded).toStrictEqual({ present: undefined, list: [undefined, 1] });
    expect(roundTrip([{}])).toStrictEqual([{}]);
    expect(roundTrip(['a', undefined])).toStrictEqual(['a', undefined]);
    expect(roundTrip(['a', undefined])).toHaveLength(2);
    // eslint-disable-next-line no-sparse-arrays -- a hole reads back as undefined, not as null
    expect(roundTrip([[1, , 3]])).toStrictEqual([[1, undefined, 3]]);
  });

  it('keeps Dates, invalid ones included', () => {
    const when = new Date('2025-01-01T00:00:00.123Z');
    const [decoded, invalid] = roundTrip([{ when }, new Date(NaN)]) as [{ when: Date }, Date];
    expect(decoded.when).toBeInstanceOf(Date);
    expect(decoded.when.getTime()).toBe(when.getTime());
    expect(Number.isNaN(invalid.getTime())).toBe(true);
  });

  it('keeps key order, which jsonb does not (a session’s metadata is stored as its JSON text)', () => {
    const metadata = { zeta: 1, alpha: { b: 2, a: 1 }, mid: [{ y: 1, x: 2 }] };
    const [decoded] = roundTrip([{ metadata }]) as [{ metadata: typeof metadata }];
    expect(JSON.stringify(decoded.metadata)).toBe(JSON.stringify(metadata));
  });

  it('keeps numbers JSON has no text for', () => {
    const [values] = roundTrip([[NaN, Infinity, -Infinity, -0, 0, Number.MAX_SAFE_INTEGER]]) as [number[]];
    expect(values).toStrictEqual([NaN, Infinity, -Infinity, -0, 0, Number.MAX_SAFE_INTEGER]);
    expect(Object.is(values[3], -0)).toBe(true);
  });

  it('keeps strings Postgres refuses in jsonb: NUL and lone surrogates', () => {
    const strings = ['a\u0000b', 'cut \ud83d', '\udc00 tail', 'pair 😀 ok', ''];
    const encoded = encodeArgs([strings]);
    expect(encoded).not.toContain('\\u0000');
    expect(encoded).not.toMatch(/\\ud[89a-f]/i);
    expect(roundTrip([strings])).toStrictEqual([strings]);
  });

  it('keeps strings that look like its own tags, and a key named __proto__ as data', () => {
    const tricky = { list: ['u'], pair: ['d', 1], o: ['o', 'k', 'v'] };
    expect(roundTrip([tricky])).toStrictEqual([tricky]);
    const [decoded] = roundTrip([JSON.parse('{"__proto__": {"polluted": true}}')]) as [
      Record<string, unknown>,
    ];
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(Object.keys(decoded)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses values no record holds, and entries it cannot read', () => {
    expect(() => encodeArgs([1n])).toThrow(TypeError);
    expect(() => encodeArgs([() => 1])).toThrow(TypeError);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => encodeArgs([cycle])).toThrow(TypeError);
    expect(() => decodeArgs(['x', 1])).toThrow(/unknown outbox value tag/);
    expect(() => decodeArgs('not a list')).toThrow(TypeError);
  });
});
