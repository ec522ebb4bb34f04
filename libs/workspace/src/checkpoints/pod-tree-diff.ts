import type { TreeDiff, TreeDiffEntry, TreeModifiedEntry } from './checkpoint.types';
import type { TarNode, TarTree } from './pod-tar';
import { ANSWER_COMPARISONS, type DiffWork, unifiedDiff } from './pod-unified-diff';
import type { DiffLimits } from './tree-tool';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * What changed from tree `a` to tree `b` (both read with `keepData`), answered as the tree tool's `diff` answers it
 * (`Differ` in `tree_tool.py`, with `trust: "content"`), step for step: each directory's names in code-point
 * order, depth first; a path on one side only listed with everything under it; a path whose type changed removed
 * then added; files modified when their contents or permission bits differ (a mode-only change is
 * `contentUnchanged`), links when their targets do, directories never (their modes are not compared); text files
 * up to `maxTextBytes` on both sides with a unified diff while `maxDiffBytes` lasts, else `diffOmitted`; the lists
 * stop at `maxEntries` (`truncated`, set as the tool sets it: when the lists are full and the walk goes on).
 */
export function diffTarTrees(a: TarTree, b: TarTree, limits: DiffLimits): TreeDiff {
  const differ = new Differ(limits);
  differ.walk(a, b, '');
  return {
    added: differ.added,
    removed: differ.removed,
    modified: differ.modified,
    truncated: differ.truncated,
  };
}

class Differ {
  readonly added: TreeDiffEntry[] = [];
  readonly removed: TreeDiffEntry[] = [];
  readonly modified: TreeModifiedEntry[] = [];
  truncated = false;
  private budget: number;
  private readonly work: DiffWork = { comparisons: ANSWER_COMPARISONS };

  constructor(private readonly limits: DiffLimits) {
    this.budget = limits.maxDiffBytes;
  }

  walk(a: TarTree, b: TarTree, dir: string): void {
    const prefix = dir === '' ? '' : `${dir}/`;
    const names = sortedNames([...new Set([...(a.children.get(dir) ?? []), ...(b.children.get(dir) ?? [])])]);
    for (const name of names) {
      if (this.full()) return;
      const path = prefix + name;
      const sa = a.nodes.get(path);
      const sb = b.nodes.get(path);
      if (!sb) this.allOf(a, path, sa!, this.removed);
      else if (!sa) this.allOf(b, path, sb, this.added);
      else if (sa.type !== sb.type) {
        this.allOf(a, path, sa, this.removed);
        this.allOf(b, path, sb, this.added);
      } else if (sa.type === 'dir') this.walk(a, b, path);
      else if (sa.type === 'file') this.modifiedFile(path, sa, sb);
      else if (sa.target !== sb.target) {
        this.modified.push({ path, type: 'symlink', targetBefore: sa.target, targetAfter: sb.target });
      }
    }
  }

  private full(): boolean {
    if (this.added.length + this.removed.length + this.modified.length >= this.limits.maxEntries) {
      this.truncated = true;
      return true;
    }
    return false;
  }

  /** A path on one side only: it, and everything under it. */
  private allOf(tree: TarTree, path: string, node: TarNode, into: TreeDiffEntry[]): void {
    if (this.full()) return;
    into.push({ path, type: node.type, ...(node.type === 'file' && { size: node.size }) });
    if (node.type !== 'dir') return;
    for (const name of sortedNames(tree.children.get(path) ?? [])) {
      const child = `${path}/${name}`;
      this.allOf(tree, child, tree.nodes.get(child)!, into);
    }
  }

  private modifiedFile(path: string, sa: TarNode, sb: TarNode): void {
    const e: TreeModifiedEntry = { path, type: 'file', sizeBefore: sa.size, sizeAfter: sb.size };
    if (sa.mode !== sb.mode) {
      e.modeBefore = octal(sa.mode);
      e.modeAfter = octal(sb.mode);
    }
    const changed = sa.size !== sb.size || !contents(sa).equals(contents(sb));
    if (!changed && e.modeBefore === undefined) return;
    if (changed) {
      const max = this.limits.maxTextBytes;
      const before = sa.size <= max ? text(contents(sa)) : null;
      const after = sb.size <= max ? text(contents(sb)) : null;
      if (before === null || after === null) {
        e.diffOmitted = sa.size > max || sb.size > max ? 'too_large' : 'binary';
      } else {
        const diff = unifiedDiff(before, after, path, this.work);
        const bytes = Buffer.byteLength(diff);
        if (bytes <= this.budget) {
          e.diff = diff;
          this.budget -= bytes;
        } else e.diffOmitted = 'budget';
      }
    } else e.contentUnchanged = true;
    this.modified.push(e);
  }
}

function contents(node: TarNode): Buffer {
  if (!node.data) throw new Error('a tree read without its files’ contents cannot be compared');
  return node.data;
}

/** Text as the tool takes it: no NUL, valid UTF-8 (a BOM kept); else `null` (binary). */
function text(data: Buffer): string | null {
  if (data.includes(0)) return null;
  try {
    return utf8.decode(data);
  } catch {
    return null;
  }
}

const octal = (mode: number): string => mode.toString(8).padStart(4, '0');

/** Python's `sorted` of names: by code point (UTF-16 order differs only past U+FFFF, or for lone surrogates). */
function sortedNames(names: string[]): string[] {
  if (!names.some((n) => /[\ud800-\udfff]/.test(n)))
    return names.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const points = new Map(names.map((n) => [n, Array.from(n, (c) => c.codePointAt(0)!)]));
  return names.sort((x, y) => {
    const [p, q] = [points.get(x)!, points.get(y)!];
    for (let i = 0; i < p.length && i < q.length; i++) if (p[i] !== q[i]) return p[i] - q[i];
    return p.length - q.length;
  });
}
