import { RE2JS } from 're2js';

/**
 * Regular expressions that come from tenants (policy rules, skill schemas) run on RE2 (the `re2js` port), never on
 * V8's backtracking engine: matching takes time linear in the input, so no pattern can freeze the event loop the way
 * `^(a+)+$` or `^(a|a)*b$` does. Linear is per instruction of the compiled program, though, and RE2 expands counted
 * repetitions (`[a-z]{1,1000}` is 2000 instructions, compiled in ~40 ms): so the program's size is estimated from the
 * pattern before compiling it, and a pattern over the caller's bound is refused rather than compiled.
 */

/** Why a pattern cannot be used: the message says what to change; `size` is set when it is too large. */
export class LinearRegexError extends Error {
  constructor(
    message: string,
    readonly size?: number,
  ) {
    super(message);
  }
}

/** A compiled pattern: `test` is a linear-time search (anchor the source to match the whole value). */
export interface LinearRegex {
  test(value: string): boolean;
  /** The compiled program's size, in instructions: a match costs at most about this much per input character. */
  readonly size: number;
}

export interface LinearRegexOptions {
  ignoreCase?: boolean;
  /** `.` matches a newline too. */
  dotAll?: boolean;
  /** The largest program accepted, in instructions (as estimated from the pattern before compiling it). */
  maxSize: number;
}

/**
 * Back-references: no linear-time engine can run them, and translating them to RE2 syntax would silently change their
 * meaning (`\k<n>` becomes the text `k<n>`), so they are refused by name before anything else.
 */
const BACK_REFERENCE = /\\(?:[1-9]|k<)/;

/**
 * Compiles `source`, written in JavaScript's regex syntax (`\u0041`, `(?<name>…)`), for RE2. Throws
 * `LinearRegexError` for a pattern RE2 cannot run (back-references, lookarounds), one that is not a regular
 * expression, or one whose program would exceed `maxSize` instructions.
 */
export function compileLinearRegex(source: string, options: LinearRegexOptions): LinearRegex {
  if (BACK_REFERENCE.test(source)) {
    throw new LinearRegexError(
      'back-references (\\1, \\k<name>) cannot be matched in linear time; write it without',
    );
  }
  let translated: string;
  try {
    translated = RE2JS.translateRegExp(source);
  } catch (err) {
    throw new LinearRegexError(`is not a regular expression: ${(err as Error).message}`);
  }
  const estimate = programSize(translated);
  if (estimate > options.maxSize) {
    throw new LinearRegexError(
      `is too large: its repetitions expand to about ${estimate} steps, over the limit of ${options.maxSize}; ` +
        'use smaller counts ({n,m}) or fewer of them',
      estimate,
    );
  }
  const flags = (options.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0) | (options.dotAll ? RE2JS.DOTALL : 0);
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(translated, flags);
  } catch (err) {
    throw new LinearRegexError(
      `cannot be matched in linear time or is invalid (lookarounds and back-references are not supported): ${(err as Error).message}`,
    );
  }
  return { test: (value) => compiled.test(value), size: Math.max(1, estimate) };
}

/** A counted repetition in RE2 syntax: `{n}`, `{n,}`, `{n,m}` (a `{` that is not one is a literal). */
const COUNTED = /^\{(\d{1,7})(,(\d{0,7}))?\}/;

/**
 * An upper estimate of the number of instructions RE2 compiles `source` (RE2 syntax) to, computed like Go's
 * `regexp/syntax` size check: an atom is 1, a group adds 2, `*` `+` `?` add 1, `{n,m}` repeats its operand m times,
 * alternatives add up. It never throws: a pattern it cannot follow is left to RE2's own parser to refuse.
 */
export function programSize(source: string): number {
  // One frame per open group: the size of its finished alternatives, of the current one, and of the last atom
  // (which a following quantifier multiplies).
  type Frame = { alternatives: number; current: number; last: number };
  const stack: Frame[] = [{ alternatives: 0, current: 0, last: 0 }];
  const top = (): Frame => stack[stack.length - 1];
  const atom = (size: number): void => {
    top().current += size;
    top().last = size;
  };
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (c === '\\') {
      const next = source[i + 1];
      if (next === 'Q') {
        // \Q…\E: literal text, one instruction per character.
        const end = source.indexOf('\\E', i + 2);
        const stop = end < 0 ? source.length : end;
        for (let k = i + 2; k < stop; k++) atom(1);
        i = end < 0 ? source.length : end + 2;
        continue;
      }
      // \x{…}, \p{…}, \P{…}: one atom, whatever is inside the braces.
      if ((next === 'x' || next === 'p' || next === 'P') && source[i + 2] === '{') {
        const end = source.indexOf('}', i + 3);
        i = end < 0 ? source.length : end + 1;
      } else i += 2;
      atom(1);
    } else if (c === '[') {
      i = classEnd(source, i);
      atom(1);
    } else if (c === '(') {
      // `(?flags)` alone sets flags and compiles to nothing; any other group opens a frame.
      const flagsOnly = /^\(\?[a-zA-Z-]*\)/.exec(source.slice(i, i + 12));
      if (flagsOnly) {
        i += flagsOnly[0].length;
        continue;
      }
      stack.push({ alternatives: 0, current: 0, last: 0 });
      i += 1;
    } else if (c === ')') {
      if (stack.length > 1) atom(sizeOf(stack.pop()!) + 2);
      i += 1;
    } else if (c === '|') {
      const f = top();
      // An empty alternative still compiles to one instruction.
      f.alternatives += Math.max(f.current, 1) + 1;
      f.current = 0;
      f.last = 0;
      i += 1;
    } else if (c === '*' || c === '+' || c === '?') {
      top().current += 1;
      i += source[i + 1] === '?' ? 2 : 1;
    } else if (c === '{' && COUNTED.test(source.slice(i, i + 18))) {
      const [text, min, comma, max] = COUNTED.exec(source.slice(i, i + 18))!;
      const n = Number(min);
      const m = comma === undefined ? n : max === '' ? n + 1 : Number(max);
      const f = top();
      // The operand is already counted once; it is repeated up to max(n, m) times, each optional copy adding one.
      const repeated = f.last * Math.max(n, m, 1) + Math.max(0, m - n) + 1;
      f.current += repeated - f.last;
      f.last = repeated;
      i += text.length + (source[i + text.length] === '?' ? 1 : 0);
    } else {
      atom(1);
      i += 1;
    }
  }
  // Unclosed groups (a syntax error RE2 reports) still count.
  let size = 0;
  while (stack.length > 0) size += sizeOf(stack.pop()!);
  return size;
}

/** A group's size: its alternatives, the last of which (like any) takes one instruction even when empty. */
const sizeOf = (f: { alternatives: number; current: number }): number =>
  f.alternatives + Math.max(f.current, 1);

/** The index just past a character class that opens at `start` (`]` right after `[` or `[^` is a literal). */
function classEnd(source: string, start: number): number {
  let i = start + 1;
  if (source[i] === '^') i++;
  if (source[i] === ']') i++;
  while (i < source.length && source[i] !== ']') {
    if (source[i] === '\\') i += 2;
    else if (source.startsWith('[:', i)) {
      const end = source.indexOf(':]', i + 2);
      i = end < 0 ? i + 1 : end + 2;
    } else i++;
  }
  return i + 1;
}
