import { lstatSync, readlinkSync, realpathSync, type Stats } from 'node:fs';
import * as path from 'node:path';
import { InvalidInputError, NotFoundError } from '@switchyard/common';
import { errno } from './fs-errors';
import { FileOpError, PathRejectedError } from './workspace.errors';

/**
 * Keeps every file-API access inside a workspace. Two layers:
 *
 * 1. `resolveInside` (pure): rejects malformed and lexically escaping paths and normalizes the rest.
 * 2. `realPathInside` (disk): resolves symlinks one hop at a time and refuses any that leave the root,
 *    dangle or point at another link. The ops then open what it vetted with `openDirInside`/`openFileIn`
 *    (fd-opens.ts), which walk component by component through `/proc/self/fd/<fd>` with O_NOFOLLOW: a
 *    component that sandboxed code swaps for a symlink between the check and the use fails with ELOOP
 *    instead of being followed (an `openat` chain, which Node lacks). This needs Linux `/proc`, like the
 *    sandbox tiers.
 *
 * Cost: the metadata calls here (realpath, lstat, open, fstat, close, readlink) are made with the *sync*
 * fs variants. Each is a single syscall of 1-10 µs on a local filesystem, while a trip through libuv's
 * threadpool costs 40-80 µs and queues behind every other fs call of the process; a read or write used to
 * make a dozen such trips. Nothing here can block for long: opens use O_NONBLOCK (a FIFO cannot hang
 * them) and the workspace is a local directory. Content I/O past a few KiB and walks stay asynchronous.
 */

export const DEFAULT_MAX_PATH_LENGTH = 4096;
/** Linux NAME_MAX. */
const MAX_SEGMENT_BYTES = 255;
/**
 * Characters that change how a name reads without showing themselves: bidi overrides and isolates (U+202A–U+202E,
 * U+2066–U+2069, U+061C, U+200E/F) make `txt.exe` display as `exe.txt`; zero-width and other default-ignorable
 * characters (U+200B–U+200D, U+FEFF, U+180E, U+00AD, variation selectors, tag characters…) make two different names
 * look the same, or hide data in one. Every Unicode format character (Cf) and default-ignorable code point.
 */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/u;

export interface PathGuardOptions {
  /** Longest accepted path in bytes (default 4096). */
  maxPathLength?: number;
  /** Accept `''` as the workspace root (for ops whose path is optional). Otherwise it is PATH_EMPTY. */
  allowEmpty?: boolean;
  /** Refuse paths that normalize to the root itself (`.`, `a/..`) with PATH_IS_ROOT. */
  rejectRoot?: boolean;
}

export interface ResolvedPath {
  /** Normalized relative path (`a/b`), `''` for the root. */
  rel: string;
  /** `rel` joined to the root, symlinks not resolved. */
  abs: string;
}

export interface RealPath extends ResolvedPath {
  realRoot: string;
  /** `lstat` of `realRoot`, taken by this call (new entries copy its mode and owner). */
  rootStat: Stats;
  /** Absolute path with every symlink on the way resolved and vetted. */
  real: string;
  /** `real` relative to `realRoot`, `''` for the root. */
  realRel: string;
  /** `lstat` of `real`; undefined when it does not exist (yet). */
  stat?: Stats;
}

/**
 * Normalizes `relPath` against `root` without touching the disk. Throws `PathRejectedError` for empty,
 * absolute, escaping, NUL/control-char, invisible-char, backslash, percent-encoded-traversal and over-long paths.
 * `a/../b` is fine; `a/../../x` is not.
 */
export function resolveInside(
  root: string,
  relPath: unknown,
  field: string,
  opts: PathGuardOptions = {},
): ResolvedPath {
  if (typeof relPath !== 'string') throw new InvalidInputError(field, `${field} must be a string`);
  const reject = (code: ConstructorParameters<typeof PathRejectedError>[2], message: string): never => {
    throw new PathRejectedError(field, relPath, code, message);
  };
  if (relPath === '') {
    if (opts.allowEmpty && !opts.rejectRoot) return { rel: '', abs: root };
    reject('PATH_EMPTY', `${field} is empty; give a path relative to the workspace root`);
  }
  if (relPath.includes('\0')) reject('PATH_NUL', `${field} contains a NUL byte`);
  const max = opts.maxPathLength ?? DEFAULT_MAX_PATH_LENGTH;
  const bytes = Buffer.byteLength(relPath);
  if (bytes > max) reject('PATH_TOO_LONG', `${field} is ${bytes} bytes, over the ${max}-byte limit`);
  // Newlines and other controls would forge lines in grep output and in the graph's file records; C1 controls
  // (NEL U+0085 among them) and U+2028/U+2029 are line breaks to some readers too.
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  if (/[\x01-\x1f\x7f-\x9f\u2028\u2029]/.test(relPath)) {
    reject('PATH_CONTROL_CHAR', `${field} contains a control character`);
  }
  const invisible = INVISIBLE.exec(relPath)?.[0];
  if (invisible !== undefined) {
    const at = `U+${invisible.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    reject(
      'PATH_INVISIBLE_CHAR',
      `${field} contains an invisible or bidi control character (${at}); a name must read as what it is`,
    );
  }
  // On Linux `\` is an ordinary byte, so `..\..\x` could not escape here; but the same string means
  // traversal to Windows tools, URL normalizers and people reading the graph, so it is refused outright.
  if (relPath.includes('\\')) reject('PATH_BACKSLASH', `${field} contains a backslash; use / as separator`);
  if (relPath.startsWith('/')) {
    reject('PATH_ABSOLUTE', `${field} is absolute; give a path relative to the workspace root`);
  }
  checkEncodedTraversal(relPath, reject);

  const segments: string[] = [];
  for (const seg of relPath.split('/')) {
    if (Buffer.byteLength(seg) > MAX_SEGMENT_BYTES) {
      reject('PATH_TOO_LONG', `${field} has a component over ${MAX_SEGMENT_BYTES} bytes`);
    }
    if (seg === '' || seg === '.') continue;
    if (seg !== '..') segments.push(seg);
    else if (segments.pop() === undefined)
      reject('PATH_ESCAPE', `${field} climbs out of the workspace with ..`);
  }
  if (segments.length === 0 && opts.rejectRoot) {
    reject('PATH_IS_ROOT', `${field} names the workspace root itself; name an entry inside it`);
  }
  const rel = segments.join('/');
  return { rel, abs: rel ? path.join(root, rel) : root };
}

/**
 * Paths are used literally: nothing in the file API ever percent-decodes them, so a file named `%2e%2e`
 * is just a file. A name that *would* decode (once, twice or thrice) to traversal is still refused,
 * because some other layer (a proxy, a client, a log viewer) may decode it; such names have no honest use.
 * Overlong UTF-8 (`%c0%ae`) and IIS-style `%u002e` are refused on sight for the same reason.
 */
function checkEncodedTraversal(
  p: string,
  reject: (code: 'PATH_ENCODED_TRAVERSAL', m: string) => never,
): void {
  if (!p.includes('%')) return;
  const message = 'path contains percent-encoded traversal; send the decoded name (paths are not decoded)';
  if (/%c[01]|%e0%80|%u00/i.test(p)) reject('PATH_ENCODED_TRAVERSAL', message);
  let current = p;
  for (let round = 0; round < 3; round++) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(current);
    } catch {
      return; // not valid percent-encoding: no decoder will turn it into traversal
    }
    if (decoded === current) return;
    if (
      decoded.includes('\0') ||
      decoded.includes('\\') ||
      decoded.startsWith('/') ||
      decoded.split('/').includes('..')
    ) {
      reject('PATH_ENCODED_TRAVERSAL', message);
    }
    current = decoded;
  }
}

export function isInside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** Real path of a workspace directory; `NotFoundError` when it is missing. */
export async function realRootOf(root: string): Promise<string> {
  return rootOf(root).realRoot;
}

/**
 * Real path and `lstat` of a workspace directory, looked up afresh on each call but only once per call:
 * a handful of sync syscalls (~5 µs), cheap enough that a cache, and the question of when to distrust it,
 * is not worth having.
 */
function rootOf(root: string): { realRoot: string; rootStat: Stats } {
  try {
    const realRoot = realpathSync.native(root);
    const rootStat = lstatSync(realRoot);
    if (!rootStat.isDirectory()) throw new NotFoundError(`workspace ${root} is not a directory`);
    return { realRoot, rootStat };
  } catch (err) {
    if (errno(err) === 'ENOENT') throw new NotFoundError(`workspace ${root} does not exist`, { root });
    throw err;
  }
}

/**
 * `resolveInside`, then the disk: every symlink on the path (the last one too, unless `followFinal` is
 * false) is followed one hop and must land on an existing non-link inside the real root. Dangling links,
 * links to links and links out (`ln -s .. up`, `ln -s /etc x`) are refused. A missing tail is fine: its
 * nearest existing ancestor has been vetted, and files get created under it.
 */
export async function realPathInside(
  root: string,
  relPath: unknown,
  field: string,
  opts: PathGuardOptions & { followFinal?: boolean } = {},
): Promise<RealPath> {
  // Async for its callers (and the tests that wrap it), synchronous inside: see the note at the top.
  const resolved = resolveInside(root, relPath, field, opts);
  const { realRoot, rootStat } = rootOf(root);
  const segs = resolved.rel ? resolved.rel.split('/') : [];
  const done = (real: string, stat?: Stats): RealPath => ({
    ...resolved,
    realRoot,
    rootStat,
    real,
    realRel: path.relative(realRoot, real),
    stat,
  });

  let cur = realRoot;
  let st = rootStat;
  for (let i = 0; i < segs.length; i++) {
    const next = path.join(cur, segs[i]);
    // throwIfNoEntry: a missing tail is the common case for writes, and an exception costs more than the
    // syscall.
    const s = lstatSync(next, { throwIfNoEntry: false });
    if (!s) return done(path.join(next, ...segs.slice(i + 1)));
    const last = i === segs.length - 1;
    if (s.isSymbolicLink() && (!last || opts.followFinal !== false)) {
      cur = followLink(realRoot, next, field, String(relPath));
      st = lstatSync(cur);
    } else {
      cur = next;
      st = s;
    }
    if (!last && !st.isDirectory()) {
      throw new FileOpError('ENOTDIR', `${segs.slice(0, i + 1).join('/')} is not a directory`, {
        path: resolved.rel,
      });
    }
  }
  return done(cur, st);
}

function followLink(realRoot: string, link: string, field: string, relPath: string): string {
  const reject = (
    code: 'PATH_SYMLINK_ESCAPE' | 'PATH_SYMLINK_DANGLING' | 'PATH_SYMLINK_CHAIN',
    why: string,
  ) =>
    new PathRejectedError(
      field,
      relPath,
      code,
      `${field} goes through symlink ${path.relative(realRoot, link)}, ${why}`,
    );
  // `link` sits in a directory with no symlinks in its path, so lexical `..` is physical `..` here.
  const target = path.resolve(path.dirname(link), readlinkSync(link));
  // Refused before anything is looked up: probing the target would tell code which host paths exist
  // (dangling vs escape).
  if (!isInside(realRoot, target)) throw reject('PATH_SYMLINK_ESCAPE', 'which leads outside the workspace');
  // Walk the target from the root without following anything: any link on the way makes a chain.
  let cur = realRoot;
  for (const seg of path.relative(realRoot, target).split(path.sep).filter(Boolean)) {
    cur = path.join(cur, seg);
    let s: Stats;
    try {
      s = lstatSync(cur);
    } catch (err) {
      if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') {
        throw reject('PATH_SYMLINK_DANGLING', 'which points nowhere');
      }
      throw err;
    }
    if (s.isSymbolicLink()) throw reject('PATH_SYMLINK_CHAIN', 'which points to or through another link');
  }
  return cur;
}
