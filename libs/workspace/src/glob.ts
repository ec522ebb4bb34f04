import { FileOpError } from './workspace.errors';

/**
 * A small glob matcher (no dependency): `*`, `?`, `**` (whole segment: zero or more directories),
 * `{a,b}` (nestable), `[abc]`, `[a-z]`, `[!x]`/`[^x]` and `\` escapes. Matching is linear-ish by
 * construction (a two-pointer wildcard match per segment, memoized over segments), so a hostile pattern
 * cannot backtrack catastrophically the way a glob compiled to a RegExp can. Dotfiles are matched like
 * any other name: agents expect `**\/*.py` to find `.venv/x.py` too, and hiding files would surprise more.
 */

const MAX_PATTERN_LENGTH = 1000;
const MAX_ALTERNATIVES = 256;

type Token = { kind: 'star' } | { kind: 'any' } | { kind: 'char'; ch: string } | ClassToken;
interface ClassToken {
  kind: 'class';
  negated: boolean;
  ranges: [string, string][];
}
type Segment = 'globstar' | Token[];

export type GlobMatcher = (relPath: string) => boolean;

export function compileGlob(pattern: unknown, field: string): GlobMatcher {
  if (typeof pattern !== 'string' || pattern === '') invalid(field, `${field} must be a non-empty glob`);
  if (pattern.length > MAX_PATTERN_LENGTH)
    invalid(field, `${field} is longer than ${MAX_PATTERN_LENGTH} characters`);
  if (pattern.includes('\0')) invalid(field, `${field} contains a NUL byte`);
  const alternatives = expandBraces(pattern, field).map((p) => parsePattern(p, field));
  return (relPath) => {
    const segs = relPath.split('/').filter((s) => s !== '');
    return alternatives.some((alt) => matchSegments(alt, segs));
  };
}

function invalid(field: string, message: string): never {
  throw new FileOpError('INVALID_PATTERN', message, { field });
}

/** `a{b,c{d,e}}` → `ab`, `acd`, `ace`. Escapes are kept for the parser. */
function expandBraces(pattern: string, field: string): string[] {
  const open = findUnescaped(pattern, '{', 0);
  if (open === -1) {
    if (findUnescaped(pattern, '}', 0) !== -1) invalid(field, `${field} has an unmatched }`);
    return [pattern];
  }
  // Find the matching close brace and the top-level commas between.
  const commas: number[] = [];
  let depth = 0;
  let close = -1;
  for (let i = open; i < pattern.length && close === -1; i++) {
    const c = pattern[i];
    if (c === '\\') i++;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) close = i;
    else if (c === ',' && depth === 1) commas.push(i);
  }
  if (close === -1) invalid(field, `${field} has an unmatched {`);
  const head = pattern.slice(0, open);
  const bounds = [open, ...commas, close];
  const out: string[] = [];
  for (let k = 0; k < bounds.length - 1; k++) {
    const option = pattern.slice(bounds[k] + 1, bounds[k + 1]);
    for (const tail of expandBraces(option + pattern.slice(close + 1), field)) {
      out.push(head + tail);
      if (out.length > MAX_ALTERNATIVES)
        invalid(field, `${field} expands to over ${MAX_ALTERNATIVES} alternatives`);
    }
  }
  return out;
}

function findUnescaped(s: string, ch: string, from: number): number {
  for (let i = from; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === ch) return i;
  }
  return -1;
}

function parsePattern(pattern: string, field: string): Segment[] {
  return pattern
    .split('/')
    .filter((s) => s !== '' && s !== '.')
    .map((s) => (s === '**' ? 'globstar' : parseSegment(s, field)));
}

function parseSegment(seg: string, field: string): Token[] {
  const chars = Array.from(seg);
  const tokens: Token[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (c === '*') {
      // `**` inside a segment (`a**b`) is just a star; consecutive stars collapse.
      if (tokens.at(-1)?.kind !== 'star') tokens.push({ kind: 'star' });
    } else if (c === '?') tokens.push({ kind: 'any' });
    else if (c === '\\') {
      if (i + 1 >= chars.length) invalid(field, `${field} ends with a lone backslash`);
      tokens.push({ kind: 'char', ch: chars[++i] });
    } else if (c === '[') {
      const [token, next] = parseClass(chars, i, field);
      tokens.push(token);
      i = next;
    } else tokens.push({ kind: 'char', ch: c });
  }
  return tokens;
}

/** Parses `[...]` starting at `chars[start]`; returns the token and the index of its `]`. */
function parseClass(chars: string[], start: number, field: string): [ClassToken, number] {
  let i = start + 1;
  const negated = chars[i] === '!' || chars[i] === '^';
  if (negated) i++;
  const ranges: [string, string][] = [];
  for (let first = true; i < chars.length; first = false, i++) {
    let c = chars[i];
    if (c === ']' && !first) return [{ kind: 'class', negated, ranges }, i];
    if (c === '\\' && i + 1 < chars.length) c = chars[++i];
    if (chars[i + 1] === '-' && i + 2 < chars.length && chars[i + 2] !== ']') {
      let hi = chars[i + 2];
      i += 2;
      if (hi === '\\' && i + 1 < chars.length) hi = chars[++i];
      if (hi < c) invalid(field, `${field} has a reversed range ${c}-${hi}`);
      ranges.push([c, hi]);
    } else ranges.push([c, c]);
  }
  return invalid(field, `${field} has an unclosed [`);
}

function matchToken(t: Token, ch: string): boolean {
  switch (t.kind) {
    case 'any':
      return true;
    case 'char':
      return t.ch === ch;
    case 'class':
      return t.ranges.some(([lo, hi]) => ch >= lo && ch <= hi) !== t.negated;
    case 'star':
      return false;
  }
}

/** Classic wildcard match with backtracking to the last star only: O(len(tokens) × len(name)). */
function matchSegment(tokens: Token[], name: string): boolean {
  const s = Array.from(name);
  let ti = 0;
  let si = 0;
  let starTi = -1;
  let starSi = 0;
  while (si < s.length) {
    const t = tokens[ti];
    if (t && t.kind === 'star') {
      starTi = ti++;
      starSi = si;
    } else if (t && matchToken(t, s[si])) {
      ti++;
      si++;
    } else if (starTi >= 0) {
      ti = starTi + 1;
      si = ++starSi;
    } else return false;
  }
  while (tokens[ti]?.kind === 'star') ti++;
  return ti === tokens.length;
}

/** Segment-level match with `**`, memoized so `**\/**\/**` stays polynomial. */
function matchSegments(pattern: Segment[], segs: string[]): boolean {
  const seen = new Set<number>();
  const width = segs.length + 1;
  const go = (pi: number, si: number): boolean => {
    if (pi === pattern.length) return si === segs.length;
    const key = pi * width + si;
    if (seen.has(key)) return false;
    seen.add(key);
    const p = pattern[pi];
    if (p === 'globstar') return go(pi + 1, si) || (si < segs.length && go(pi, si + 1));
    return si < segs.length && matchSegment(p, segs[si]) && go(pi + 1, si + 1);
  };
  return go(0, 0);
}
