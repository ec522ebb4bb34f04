import { InvalidInputError } from '@switchyard/common';
import { RE2JS } from 're2js';
import { compileLinearRegex, type LinearRegex, LinearRegexError } from '../../platform/regex/linear-regex';

/** A compiled pattern: does a value match it. */
export type Matcher = (value: string) => boolean;

const MAX_PATTERN_CHARS = 200;
/** Facts are short (names, levels, hosts); a regex never sees more than this. */
const MAX_VALUE_CHARS = 512;
/**
 * The largest compiled program a policy pattern may have, in RE2 instructions. A match costs at most about this much
 * per character of a (≤ 512-character) fact, and a policy of 100 rules is evaluated for every action.
 */
const MAX_PROGRAM_SIZE = 300;

/** A glob character as RE2 syntax: `*` any run, `?` one character, anything else literally. */
const globChar = (c: string): string => (c === '*' ? '.*' : c === '?' ? '.' : RE2JS.quote(c));

/**
 * Compiles one pattern: `/…/` (optionally `/…/i`) is a regular expression matched against the whole value,
 * one with `*` (any run of characters) or `?` (one character) is a glob, anything else must equal the value.
 * Regexes and globs run on RE2 (linear time in the value: `/^(a|a)*b$/` or `*a*a*a*b` cannot block the engine).
 * Throws `InvalidInputError` naming `field` for a pattern that cannot be used.
 */
export function compilePattern(pattern: string, field: string): Matcher {
  if (pattern.length === 0 || pattern.length > MAX_PATTERN_CHARS) {
    throw new InvalidInputError(field, `a pattern has 1 to ${MAX_PATTERN_CHARS} characters`);
  }
  const regex = /^\/(.+)\/(i?)$/s.exec(pattern);
  if (regex) {
    const [, source, flags] = regex;
    let re: LinearRegex;
    try {
      re = compileLinearRegex(`^(?:${source})$`, { ignoreCase: flags === 'i', maxSize: MAX_PROGRAM_SIZE });
    } catch (err) {
      if (!(err instanceof LinearRegexError)) throw err;
      throw new InvalidInputError(field, `regular expression ${pattern} ${err.message}`);
    }
    return (value) => value.length <= MAX_VALUE_CHARS && re.test(value);
  }
  if (/[*?]/.test(pattern)) {
    // Built from quoted characters, so it always compiles; its size is one or two per character of the pattern.
    const re = RE2JS.compile(`^${Array.from(pattern).map(globChar).join('')}$`, RE2JS.DOTALL);
    return (value) => re.test(value);
  }
  return (value) => value === pattern;
}

/** Any of several patterns. */
export function anyOf(matchers: Matcher[]): Matcher {
  return (value) => matchers.some((m) => m(value));
}
