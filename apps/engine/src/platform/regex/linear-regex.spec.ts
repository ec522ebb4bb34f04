import * as fc from 'fast-check';
import { RE2JS } from 're2js';
import { compileLinearRegex, LinearRegexError, programSize } from './linear-regex';

const compile = (source: string, maxSize = 2000) => compileLinearRegex(source, { maxSize });

/** Milliseconds `fn` takes. */
const timed = (fn: () => unknown): number => {
  const start = performance.now();
  fn();
  return performance.now() - start;
};

describe('compileLinearRegex', () => {
  it('matches as JavaScript does for the syntax both share, including JavaScript-only escapes', () => {
    expect(compile('^[a-z]+\\d{2}$').test('abc12')).toBe(true);
    expect(compile('^[a-z]+\\d{2}$').test('abc123')).toBe(false);
    expect(compile('\\u0041').test('xAx')).toBe(true);
    expect(compile('^(?<word>\\w+)$').test('hello')).toBe(true);
    expect(compileLinearRegex('^abc$', { maxSize: 100, ignoreCase: true }).test('ABC')).toBe(true);
    expect(compile('^a.b$').test('a\nb')).toBe(false);
    expect(compileLinearRegex('^a.b$', { maxSize: 100, dotAll: true }).test('a\nb')).toBe(true);
  });

  it('runs the patterns that freeze a backtracking engine in linear time', () => {
    // Each of these takes V8 seconds to years on these inputs.
    const cases: Array<[string, string]> = [
      ['^(a+)+$', `${'a'.repeat(100_000)}!`],
      ['^(a|a)*b$', 'a'.repeat(100_000)],
      ['^(a|aa)*c$', 'a'.repeat(100_000)],
      ['(x+x+)+y', 'x'.repeat(100_000)],
      ['^(\\w+\\s?)*$', `${'word '.repeat(20_000)}!`],
    ];
    for (const [source, input] of cases) {
      const re = compile(source);
      expect(timed(() => expect(re.test(input)).toBe(false))).toBeLessThan(500);
    }
  });

  it('refuses back-references and lookarounds, which no linear-time engine runs, and broken patterns', () => {
    for (const source of [
      '(a)\\1',
      '(?<n>a)\\k<n>',
      '(?=a)',
      '(?!a)b',
      '(?<=a)b',
      '(?<!a)b',
      '[',
      '(a',
      'a{2,1}',
    ]) {
      expect(() => compile(source)).toThrow(LinearRegexError);
    }
  });

  it('refuses a pattern whose program would exceed the bound, before compiling it', () => {
    // 20 of these compile to ~40 000 instructions: most of a second of RE2 compilation.
    const huge = '[a-z]{1,1000}'.repeat(20);
    let thrown: unknown;
    expect(
      timed(() => {
        try {
          compile(huge);
        } catch (err) {
          thrown = err;
        }
      }),
    ).toBeLessThan(50);
    expect(thrown).toBeInstanceOf(LinearRegexError);
    expect((thrown as LinearRegexError).size).toBeGreaterThan(2000);
    expect((thrown as LinearRegexError).message).toContain('over the limit of 2000');
    expect(() => compileLinearRegex('a{100}', { maxSize: 50 })).toThrow(/about 10\d steps/);
    expect(compileLinearRegex('a{10}', { maxSize: 50 }).test('aaaaaaaaaa')).toBe(true);
  });
});

describe('programSize', () => {
  it('estimates at least what RE2 compiles, give or take its few instructions of overhead', () => {
    const atom = fc.constantFrom('a', '.', '\\d', '[a-z]', '[^x]', '\\p{L}', '\\x{41}', '\\Qa.b\\E', '(?i)');
    const quantifier = fc.constantFrom('', '*', '+', '?', '{3}', '{2,}', '{1,20}', '*?', '{0,5}?');
    const regex: fc.Arbitrary<string> = fc.letrec<{ re: string }>((tie) => ({
      re: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.tuple(atom, quantifier).map(([a, q]) => (a === '(?i)' ? a : a + q)),
        fc.array(tie('re'), { minLength: 1, maxLength: 4 }).map((parts) => parts.join('')),
        fc.array(tie('re'), { minLength: 2, maxLength: 3 }).map((parts) => parts.join('|')),
        fc
          .tuple(tie('re'), fc.constantFrom('(', '(?:', '(?P<g>'), quantifier)
          .map(([r, open, q]) => (open === '(?P<g>' ? `(?:${r})${q}` : `${open}${r})${q}`)),
      ),
    })).re;
    fc.assert(
      fc.property(regex, (source) => {
        let actual: number;
        try {
          actual = RE2JS.compile(source).re2Input.prog.inst.length;
        } catch {
          return; // RE2 refuses it (say, a repetition over 1000 in all): nothing to estimate
        }
        expect(programSize(source) + 3).toBeGreaterThanOrEqual(actual);
      }),
      { numRuns: 300, seed: 27 },
    );
  });

  it('follows classes, escapes and literal runs, and never throws on broken syntax', () => {
    expect(programSize('[]a]{5}')).toBe(programSize('b{5}'));
    expect(programSize('[(]{5}')).toBe(programSize('b{5}'));
    expect(programSize('\\({5}')).toBe(programSize('b{5}'));
    expect(programSize('\\Q(((\\E')).toBe(3);
    for (const broken of ['(', ')', '[', '\\', '{', 'a{', '(?', '\\p{', '\\Q']) {
      expect(() => programSize(broken)).not.toThrow();
    }
  });
});
