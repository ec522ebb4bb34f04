import { InvalidInputError } from '@switchyard/common';

/** A compiled pattern: does a value match it. */
export type Matcher = (value: string) => boolean;

const MAX_PATTERN_CHARS = 200;
/** Facts are short (names, levels, hosts); a regex never sees more than this. */
const MAX_VALUE_CHARS = 512;

/**
 * A quantified group that itself holds a quantifier (`(a+)+`, `(a|aa)*` is let through) or a back-reference: the
 * shapes whose matching time can explode. Policy regexes come from tenants and sessions, so they are refused.
 */
const NESTED_QUANTIFIER = /\((?:[^()\\]|\\.)*[+*?}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d+,?\d*\})/;
const BACK_REFERENCE = /\\[1-9]|\\k</;

const escapeRegex = (s: string): string => s.replace(/[.+^${}()|[\]\\]/g, '\\$&');

/**
 * Compiles one pattern: `/…/` (optionally `/…/i`) is a regular expression matched against the whole value,
 * one with `*` (any run of characters) or `?` (one character) is a glob, anything else must equal the value.
 * Throws `InvalidInputError` naming `field` for a pattern that cannot be used.
 */
export function compilePattern(pattern: string, field: string): Matcher {
  if (pattern.length === 0 || pattern.length > MAX_PATTERN_CHARS) {
    throw new InvalidInputError(field, `a pattern has 1 to ${MAX_PATTERN_CHARS} characters`);
  }
  const regex = /^\/(.+)\/(i?)$/s.exec(pattern);
  if (regex) {
    const [, source, flags] = regex;
    if (NESTED_QUANTIFIER.test(source) || BACK_REFERENCE.test(source)) {
      throw new InvalidInputError(
        field,
        `regular expression ${pattern} has a nested quantifier or a back-reference; write it without`,
      );
    }
    let re: RegExp;
    try {
      re = new RegExp(`^(?:${source})$`, flags);
    } catch (err) {
      throw new InvalidInputError(field, `invalid regular expression ${pattern}: ${(err as Error).message}`);
    }
    return (value) => value.length <= MAX_VALUE_CHARS && re.test(value);
  }
  if (/[*?]/.test(pattern)) {
    const re = new RegExp(`^${pattern.split('').map(globChar).join('')}$`, 's');
    return (value) => re.test(value);
  }
  return (value) => value === pattern;
}

function globChar(c: string): string {
  if (c === '*') return '.*';
  if (c === '?') return '.';
  return escapeRegex(c);
}

/** Any of several patterns. */
export function anyOf(matchers: Matcher[]): Matcher {
  return (value) => matchers.some((m) => m(value));
}
