import type { Language } from '@switchyard/common';

/**
 * Completion and `is_complete` answered by the engine, without asking the session kernel: a kernel runs only code
 * actions (each recorded), and a completion request per key press is not one. Matches are the language's keywords and
 * common builtins, and the names the cell's own text uses; attributes after a `.` are the names the text uses after
 * a `.`.
 */

const WORDS: Readonly<Record<Language, readonly string[]>> = {
  python: [
    ...[
      'False',
      'None',
      'True',
      'and',
      'as',
      'assert',
      'async',
      'await',
      'break',
      'class',
      'continue',
      'def',
    ],
    ...['del', 'elif', 'else', 'except', 'finally', 'for', 'from', 'global', 'if', 'import', 'in', 'is'],
    ...['lambda', 'nonlocal', 'not', 'or', 'pass', 'raise', 'return', 'try', 'while', 'with', 'yield'],
    ...['abs', 'all', 'any', 'bool', 'dict', 'dir', 'display', 'enumerate', 'filter', 'float', 'format'],
    ...['getattr', 'hasattr', 'help', 'input', 'int', 'isinstance', 'len', 'list', 'map', 'max', 'min'],
    ...[
      'next',
      'open',
      'print',
      'range',
      'repr',
      'round',
      'set',
      'sorted',
      'str',
      'sum',
      'tuple',
      'type',
      'zip',
    ],
  ],
  node: [
    ...['async', 'await', 'break', 'case', 'catch', 'class', 'const', 'continue', 'default', 'delete', 'do'],
    ...[
      'else',
      'false',
      'finally',
      'for',
      'function',
      'if',
      'import',
      'in',
      'instanceof',
      'let',
      'new',
      'null',
    ],
    ...['return', 'switch', 'this', 'throw', 'true', 'try', 'typeof', 'undefined', 'var', 'void', 'while'],
    ...['Array', 'JSON', 'Math', 'Number', 'Object', 'Promise', 'String', 'console', 'display', 'process'],
    'require',
  ],
  bash: [
    ...['case', 'do', 'done', 'elif', 'else', 'esac', 'fi', 'for', 'function', 'if', 'in', 'then', 'until'],
    ...['while', 'awk', 'cat', 'cd', 'echo', 'export', 'grep', 'local', 'ls', 'printf', 'pwd', 'read', 'sed'],
  ],
};

/** Text around the cursor the names are taken from: a cell of megabytes costs no more than one of 128 KiB. */
const SCAN_CHARS = 64 * 1024;
const MAX_MATCHES = 200;
const NAME = /[A-Za-z_$][\w$]*/g;

export interface Completion {
  matches: string[];
  cursor_start: number;
  cursor_end: number;
}

/**
 * The string index of a cursor given in Unicode code points (as protocol 5.2+ counts them), clamped to the text.
 */
function indexOfCodePoint(code: string, cursor: number): number {
  const at = Math.max(0, Math.min(cursor, code.length));
  if (!/[\uD800-\uDFFF]/.test(code)) return at;
  let index = 0;
  for (let points = 0; points < cursor && index < code.length; points++) {
    const c = code.charCodeAt(index);
    index += c >= 0xd800 && c <= 0xdbff && index + 1 < code.length ? 2 : 1;
  }
  return index;
}

/** Length in Unicode code points (a surrogate pair is one). */
export const codePointLength = (text: string): number =>
  text.length - (text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g)?.length ?? 0);

export function complete(language: Language, code: string, cursorPos: number): Completion {
  const at = indexOfCodePoint(code, cursorPos);
  const before = code.slice(Math.max(0, at - 256), at);
  const prefix = /[A-Za-z_$][\w$]*$/.exec(before)?.[0] ?? '';
  const attribute = before.length > prefix.length && before[before.length - prefix.length - 1] === '.';
  const text = code.slice(Math.max(0, at - SCAN_CHARS), at + SCAN_CHARS);
  const names = new Set<string>(attribute ? [] : WORDS[language]);
  for (const m of text.matchAll(NAME)) {
    if (attribute === (m.index > 0 && text[m.index - 1] === '.')) names.add(m[0]);
  }
  const matches = [...names]
    .filter((n) => n.startsWith(prefix) && n !== prefix)
    .sort()
    .slice(0, MAX_MATCHES);
  return { matches, cursor_start: cursorPos - prefix.length, cursor_end: cursorPos };
}

export interface IsComplete {
  status: 'complete' | 'incomplete' | 'invalid' | 'unknown';
  indent?: string;
}

/**
 * Whether python code is a whole statement a console may run (`complete`), or needs more lines (an open bracket or
 * string, a line ending in `:` or `\`). Other languages answer `unknown` (the console then decides).
 */
export function isComplete(language: Language, code: string): IsComplete {
  if (language !== 'python') return { status: 'unknown' };
  let depth = 0;
  let i = 0;
  while (i < code.length) {
    const c = code[i];
    if (c === '#') {
      const end = code.indexOf('\n', i);
      i = end < 0 ? code.length : end;
    } else if (c === '"' || c === "'") {
      const quote = code.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
      let end = i + quote.length;
      for (; end < code.length; end++) {
        if (code[end] === '\\') end++;
        else if (code.startsWith(quote, end)) break;
        else if (quote.length === 1 && code[end] === '\n') return { status: 'invalid' };
      }
      if (end >= code.length) return { status: 'incomplete', indent: '' };
      i = end + quote.length;
      continue;
    } else if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c) && --depth < 0) return { status: 'invalid' };
    i++;
  }
  if (depth > 0) return { status: 'incomplete', indent: '' };
  const last = code.trimEnd().split('\n').at(-1) ?? '';
  if (last.endsWith(':')) return { status: 'incomplete', indent: `${/^\s*/.exec(last)![0]}    ` };
  if (last.endsWith('\\')) return { status: 'incomplete', indent: '' };
  return { status: 'complete' };
}
