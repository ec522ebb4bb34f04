import { InvalidInputError } from '@switchyard/common';
import { compilePattern } from './policy-pattern';

/** Milliseconds `fn` takes. */
const timed = (fn: () => unknown): number => {
  const start = performance.now();
  fn();
  return performance.now() - start;
};

describe('policy patterns run in linear time', () => {
  it('runs the issue’s /^(a|a)*b$/ and other backtracking bombs on the longest facts at once', () => {
    // Each backtracks exponentially in V8 on a run of its letter that ends in a character that cannot match.
    const bombs: Array<[string, string]> = [
      ['/^(a|a)*b$/', 'a'],
      ['/(a+)+$/', 'a'],
      ['/(a*)*c/', 'a'],
      ['/(x|y+){2,}z/', 'y'],
      ['/(a|aa)+$/i', 'A'],
    ];
    for (const [pattern, letter] of bombs) {
      const matches = compilePattern(pattern, 'policy.rules[0].match.tool');
      for (const value of [`${letter.repeat(28)}!`, `${letter.repeat(511)}!`]) {
        expect(timed(() => expect(matches(value)).toBe(false))).toBeLessThan(50);
      }
    }
    expect(compilePattern('/^(a|a)*b$/', 'f')('aaab')).toBe(true);
  });

  it('runs globs of many stars in linear time (a backtracking `.*` sequence is polynomial)', () => {
    const matches = compilePattern(`${'*a'.repeat(40)}*b`, 'policy.rules[0].match.skill');
    expect(timed(() => expect(matches('a'.repeat(5000))).toBe(false))).toBeLessThan(50);
    expect(matches(`${'a'.repeat(40)}b`)).toBe(true);
  });

  it('keeps glob characters literal and takes astral characters whole', () => {
    expect(compilePattern('a(b)*', 'f')('a(b)zz')).toBe(true);
    expect(compilePattern('a(b)*', 'f')('ab')).toBe(false);
    expect(compilePattern('x?y', 'f')('x😀y')).toBe(true);
    expect(compilePattern('a\\*', 'f')('a\\zz')).toBe(true);
  });

  it('refuses a regex whose repetitions expand past the bound, naming the field', () => {
    try {
      compilePattern('/[a-z]{1,1000}/', 'policy.rules[3].match.host');
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe('policy.rules[3].match.host');
      expect((err as Error).message).toContain('over the limit of');
    }
  });
});
