import { type ArrayChange, diffArrays } from 'diff';

/** Lines of context around each change, as `difflib.unified_diff` gives by default. */
const CONTEXT = 3;
/** Line comparisons jsdiff may make for one file, and for one answer's files together (~1 µs each, at worst). */
export const FILE_COMPARISONS = 200_000;
export const ANSWER_COMPARISONS = 1_000_000;

/** What is left of one answer's comparisons (`ANSWER_COMPARISONS` to start with). */
export interface DiffWork {
  comparisons: number;
}

type Tag = 'equal' | 'replace' | 'delete' | 'insert';
/** `difflib.SequenceMatcher` opcodes: `a[i1:i2]` becomes `b[j1:j2]`. */
type Opcode = [tag: Tag, i1: number, i2: number, j1: number, j2: number];

/** Python's `str.splitlines(keepends=True)`: the line ends it knows, each kept with its line. */
// eslint-disable-next-line no-control-regex
const LINE_END = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;

export function splitLines(text: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (const m of text.matchAll(LINE_END)) {
    const end = m.index + m[0].length;
    lines.push(text.slice(start, end));
    start = end;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

/**
 * The unified diff of two texts as the tree tool makes it, `''.join(difflib.unified_diff(a.splitlines(True),
 * b.splitlines(True), 'a/' + path, 'b/' + path))`: `--- a/<path>` and `+++ b/<path>` without dates, hunks of 3
 * lines of context merged when at most 6 lines apart, `@@ -l,n +l,n @@` ranges as difflib writes them, and no
 * `\ No newline at end of file` marker (a last line without one runs into the next line of the diff).
 *
 * Which lines are matched is jsdiff's choice (Myers: a shortest edit script) where difflib's is its own (longest
 * matching blocks, with popular lines of long files ignored): the same for most edits, and where a text allows more
 * than one alignment the hunks may differ while applying to the same result. jsdiff's matching is bounded by `work`
 * (`FILE_COMPARISONS` per file): past it, the lines between the common head and tail are one change.
 */
export function unifiedDiff(before: string, after: string, path: string, work: DiffWork): string {
  const a = splitLines(before);
  const b = splitLines(after);
  let out = '';
  for (const group of groupedOpcodes(opcodes(a, b, work))) {
    if (!out) out = `--- a/${path}\n+++ b/${path}\n`;
    const first = group[0];
    const last = group[group.length - 1];
    out += `@@ -${range(first[1], last[2])} +${range(first[3], last[4])} @@\n`;
    for (const [tag, i1, i2, j1, j2] of group) {
      if (tag === 'equal') {
        for (const line of a.slice(i1, i2)) out += ` ${line}`;
        continue;
      }
      if (tag === 'replace' || tag === 'delete') for (const line of a.slice(i1, i2)) out += `-${line}`;
      if (tag === 'replace' || tag === 'insert') for (const line of b.slice(j1, j2)) out += `+${line}`;
    }
  }
  return out;
}

/** `difflib._format_range_unified`. */
function range(start: number, stop: number): string {
  const length = stop - start;
  if (length === 1) return `${start + 1}`;
  return `${length === 0 ? start : start + 1},${length}`;
}

/** jsdiff's matching, stopped at its bound (thrown from its comparator, caught here). */
class Over extends Error {}

/** Opcodes from jsdiff's changes (a removal and an addition side by side: one `replace`), or coarse ones. */
function opcodes(a: string[], b: string[], work: DiffWork): Opcode[] {
  const limit = Math.max(0, Math.min(FILE_COMPARISONS, work.comparisons));
  let calls = 0;
  let changes: ArrayChange<string>[] | undefined;
  try {
    changes = diffArrays(a, b, {
      comparator: (x: string, y: string) => {
        if (++calls > limit) throw new Over();
        return x === y;
      },
    });
  } catch (err) {
    if (!(err instanceof Over)) throw err;
  }
  work.comparisons -= Math.min(calls, limit);
  if (!changes) return coarseOpcodes(a, b);
  const codes: Opcode[] = [];
  let i = 0;
  let j = 0;
  for (let k = 0; k < changes.length;) {
    if (!changes[k].added && !changes[k].removed) {
      const n = changes[k++].value.length;
      if (n > 0) codes.push(['equal', i, i + n, j, j + n]);
      i += n;
      j += n;
      continue;
    }
    let di = 0;
    let dj = 0;
    for (; k < changes.length && (changes[k].added || changes[k].removed); k++) {
      if (changes[k].added) dj += changes[k].value.length;
      else di += changes[k].value.length;
    }
    codes.push([di && dj ? 'replace' : di ? 'delete' : 'insert', i, i + di, j, j + dj]);
    i += di;
    j += dj;
  }
  return codes;
}

/** The common head and tail kept, everything between them one change: O(n), whatever the texts. */
function coarseOpcodes(a: string[], b: string[]): Opcode[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++;
  const [i2, j2] = [a.length - tail, b.length - tail];
  const codes: Opcode[] = [];
  if (head > 0) codes.push(['equal', 0, head, 0, head]);
  if (i2 > head || j2 > head) {
    codes.push([i2 > head && j2 > head ? 'replace' : i2 > head ? 'delete' : 'insert', head, i2, head, j2]);
  }
  if (tail > 0) codes.push(['equal', i2, a.length, j2, b.length]);
  return codes;
}

/** `difflib.SequenceMatcher.get_grouped_opcodes(3)`: changes with their context, hunk by hunk. */
function groupedOpcodes(input: Opcode[]): Opcode[][] {
  const n = CONTEXT;
  const codes: Opcode[] = input.length ? input.map((c) => [...c] as Opcode) : [['equal', 0, 1, 0, 1]];
  const head = codes[0];
  if (head[0] === 'equal')
    codes[0] = ['equal', Math.max(head[1], head[2] - n), head[2], Math.max(head[3], head[4] - n), head[4]];
  const tail = codes[codes.length - 1];
  if (tail[0] === 'equal') {
    codes[codes.length - 1] = [
      'equal',
      tail[1],
      Math.min(tail[2], tail[1] + n),
      tail[3],
      Math.min(tail[4], tail[3] + n),
    ];
  }
  const groups: Opcode[][] = [];
  let group: Opcode[] = [];
  for (const [tag, start1, i2, start2, j2] of codes) {
    let [i1, j1] = [start1, start2];
    if (tag === 'equal' && i2 - i1 > 2 * n) {
      group.push([tag, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]);
      groups.push(group);
      group = [];
      [i1, j1] = [Math.max(i1, i2 - n), Math.max(j1, j2 - n)];
    }
    group.push([tag, i1, i2, j1, j2]);
  }
  if (group.length && !(group.length === 1 && group[0][0] === 'equal')) groups.push(group);
  return groups;
}
