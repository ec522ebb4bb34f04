import { randomBytes } from 'node:crypto';
import { constants as C, type Stats } from 'node:fs';
import { type FileHandle, open, readdir, rename, rmdir, unlink } from 'node:fs/promises';
import * as path from 'node:path';
import { compareNames, readDirVerified } from './dir-listing';
import { fdPath } from './fd-opens';
import { errno } from './fs-errors';
import { FileOpError } from './workspace.errors';

/** Walks and deletions over a workspace. None of them ever follows a symlink. */

export type EntryType = 'file' | 'dir' | 'symlink' | 'other';

export function entryType(st: Stats): EntryType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

export interface WalkEntry {
  /** Path relative to the walk's start, `/`-separated. */
  rel: string;
  type: EntryType;
  stat: Stats;
}

export interface WalkOptions {
  recursive: boolean;
  /** Entries to visit before stopping with `state.partial`. */
  maxEntries: number;
  /** Resume strictly after this path (segments relative to the start), in walk order. */
  after?: string[];
  /** Names at the top of the walk to leave out, with everything below them. */
  skipTop?: ReadonlySet<string>;
}

export interface WalkState {
  scanned: number;
  partial: boolean;
}

/**
 * Depth-first, children in code-unit order: the order `compareSegments` defines, which cursors and
 * partial snapshots rely on. Each directory is read through `readDirVerified`, so a directory swapped
 * for a link mid-walk is skipped rather than listed.
 */
export async function* walk(
  absStart: string,
  opts: WalkOptions,
  state: WalkState,
): AsyncGenerator<WalkEntry> {
  yield* walkDir(absStart, [], opts, state);
}

async function* walkDir(
  abs: string,
  segs: string[],
  opts: WalkOptions,
  state: WalkState,
): AsyncGenerator<WalkEntry> {
  const entries = await readDirVerified(abs);
  if (!entries) return;
  for (const { name, stat } of entries) {
    if (segs.length === 0 && opts.skipTop?.has(name)) continue;
    const child = [...segs, name];
    const cmp = opts.after ? compareSegments(child, opts.after) : 1;
    // Entirely before the cursor: neither this entry nor anything below it is due.
    if (cmp < 0 && !isPrefix(child, opts.after!)) continue;
    if (state.scanned >= opts.maxEntries) {
      state.partial = true;
      return;
    }
    state.scanned++;
    if (cmp > 0) yield { rel: child.join('/'), type: entryType(stat), stat };
    if (opts.recursive && stat.isDirectory()) yield* walkDir(path.join(abs, name), child, opts, state);
    if (state.partial) return;
  }
}

/** Order of a depth-first walk with sorted children: segment by segment, parents before children. */
export function compareSegments(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const c = compareNames(a[i], b[i]);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

function isPrefix(prefix: readonly string[], of: readonly string[]): boolean {
  return prefix.length < of.length && prefix.every((s, i) => s === of[i]);
}

/**
 * Apparent size of the regular files under `absDir`, visiting at most `maxEntries` entries. When the walk
 * stops early the sum is a lower bound and `partial` says so.
 */
export async function diskUsage(
  absDir: string,
  maxEntries: number,
): Promise<{ bytes: number; partial: boolean }> {
  const state: WalkState = { scanned: 0, partial: false };
  let bytes = 0;
  for await (const e of walk(absDir, { recursive: true, maxEntries }, state)) {
    if (e.type === 'file') bytes += e.stat.size;
  }
  return { bytes, partial: state.partial };
}

/** Directories held open at once while deleting; deeper subtrees are moved up and deleted afterwards. */
const MAX_OPEN_DEPTH = 32;
const DIR_FLAGS = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW | C.O_NONBLOCK;

/**
 * `rm -rf <dir>/<name>`, where `dir` is an open directory inside the workspace. Unlike `fs.rm` (which
 * walks by path and can be steered outside by a directory swapped for a symlink mid-walk, as in
 * CVE-2022-21658), every step here happens relative to an open directory fd (a handle or a raw fd) with
 * O_NOFOLLOW. Arbitrarily deep trees are handled with bounded fds: past `MAX_OPEN_DEPTH` a subtree is
 * renamed up into `dir` and removed on its own afterwards. Missing `name` is not an error.
 */
export async function removeEntry(dir: FileHandle | number, name: string, relPath: string): Promise<void> {
  const deferred: string[] = [];
  try {
    await unlink(fdPath(dir, name));
    return;
  } catch (err) {
    const code = errno(err);
    if (code === 'ENOENT') return;
    if (code !== 'EISDIR' && code !== 'EPERM') throw err;
  }
  await emptyDir(dir, name, 0, dir, deferred, relPath);
  await rmdirIn(dir, name, relPath);
  for (const moved of deferred) await removeEntry(dir, moved, relPath);
}

async function emptyDir(
  parent: FileHandle | number,
  name: string,
  depth: number,
  top: FileHandle | number,
  deferred: string[],
  relPath: string,
): Promise<void> {
  let dir: FileHandle;
  try {
    dir = await open(fdPath(parent, name), DIR_FLAGS);
  } catch (err) {
    if (errno(err) === 'ENOENT') return;
    throw err;
  }
  try {
    // A few passes: sandboxed code may still be adding files; past that, give up rather than spin.
    for (let pass = 0; pass < 3; pass++) {
      const children = await readdir(fdPath(dir), { withFileTypes: true });
      if (children.length === 0) return;
      for (const child of children) {
        if (!child.isDirectory()) {
          await unlink(fdPath(dir, child.name)).catch(ignoreEnoent);
        } else if (depth + 1 >= MAX_OPEN_DEPTH) {
          const moved = `.switchyard-rm-${randomBytes(8).toString('hex')}`;
          await rename(fdPath(dir, child.name), fdPath(top, moved));
          deferred.push(moved);
        } else {
          await emptyDir(dir, child.name, depth + 1, top, deferred, relPath);
          await rmdirIn(dir, child.name, relPath);
        }
      }
    }
    throw new FileOpError(
      'ENOTEMPTY',
      `${relPath} kept changing while being deleted; stop the code writing to it`,
    );
  } finally {
    await dir.close();
  }
}

async function rmdirIn(dir: FileHandle | number, name: string, relPath: string): Promise<void> {
  try {
    await rmdir(fdPath(dir, name));
  } catch (err) {
    if (errno(err) === 'ENOENT') return;
    if (errno(err) === 'ENOTEMPTY') {
      throw new FileOpError(
        'ENOTEMPTY',
        `${relPath} kept changing while being deleted; stop the code writing to it`,
      );
    }
    throw err;
  }
}

function ignoreEnoent(err: unknown): void {
  if (errno(err) !== 'ENOENT') throw err;
}
