import {
  constants as C,
  closeSync,
  existsSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  type Stats,
} from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { errno, toFileOpError } from './fs-errors';
import { FileOpError, PathRejectedError } from './workspace.errors';

/**
 * Opens directories and files inside a workspace one component at a time, each relative to the directory
 * opened before it, through `/proc/self/fd/<fd>/<name>` with O_NOFOLLOW: the `openat` chain Node lacks.
 * The paths opened are ones `realPathInside` (path-guard.ts) vetted; a component swapped for a symlink
 * meanwhile fails instead of being followed. The calls are sync, for the reasons in path-guard.ts's note.
 */

/** O_NOFOLLOW, and O_NONBLOCK so a FIFO cannot hang an open. */
export const NOFOLLOW_FLAGS = C.O_NOFOLLOW | C.O_NONBLOCK;

/**
 * `/proc` path that names exactly what `h` (a handle or a raw fd) has open, whatever happens to the path
 * it was opened by.
 */
export function fdPath(h: FileHandle | number, name?: string): string {
  const fd = typeof h === 'number' ? h : h.fd;
  return name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`;
}

export function assertProcFd(): void {
  if (!existsSync('/proc/self/fd')) {
    throw new Error(
      'the workspace file API needs Linux /proc (/proc/self/fd) to guard against symlink races',
    );
  }
}

export interface CreateAs {
  mode: number;
  owner?: { uid: number; gid: number };
}

/** Flags of a directory open (with `NOFOLLOW_FLAGS`). */
export const DIR_FLAGS = C.O_RDONLY | C.O_DIRECTORY;

/**
 * Opens `realRel` (a path `realPathInside` returned: no symlinks in it) one component at a time, each
 * relative to the directory opened before it and with O_NOFOLLOW, so nothing swapped in meanwhile is
 * followed. With `create`, missing components are made (mkdir -p). Returns a raw fd, which the caller
 * closes with `closeSync`; this is the version the file API uses.
 */
export function openDirInsideSync(
  realRoot: string,
  realRel: string,
  field: string,
  create?: CreateAs,
): number {
  let dir = openSync(realRoot, DIR_FLAGS | NOFOLLOW_FLAGS);
  try {
    for (const seg of realRel ? realRel.split('/') : []) {
      let next: number;
      let created = false;
      try {
        // Open first, mkdir only when that says ENOENT: parents usually exist, and this spares a
        // failing mkdir per component.
        next = openSync(fdPath(dir, seg), DIR_FLAGS | NOFOLLOW_FLAGS);
      } catch (err) {
        if (!create || errno(err) !== 'ENOENT') throw openFailure(err, dir, seg, field, realRel);
        created = mkdirIn(dir, seg, create.mode);
        next = openFileInSync(dir, seg, DIR_FLAGS, field, realRel);
      }
      closeSync(dir);
      dir = next;
      // Through the fd, never the path: chmod/chown by path would follow a link swapped in after mkdir.
      if (created && create) applyOwnershipSync(dir, create);
    }
    return dir;
  } catch (err) {
    closeSync(dir);
    throw err;
  }
}

/** `openDirInsideSync` as a `FileHandle`, for callers that want one. The caller closes the handle. */
export async function openDirInside(
  realRoot: string,
  realRel: string,
  field: string,
  create?: CreateAs,
): Promise<FileHandle> {
  const fd = openDirInsideSync(realRoot, realRel, field, create);
  try {
    // The fd's /proc entry is a magic link to exactly the directory the walk pinned; opening it cannot be
    // redirected by any path swapped meanwhile.
    return await open(fdPath(fd), DIR_FLAGS);
  } finally {
    closeSync(fd);
  }
}

/** mkdir of `name` in the pinned `dir`; false when something by that name already exists. */
function mkdirIn(dir: number, name: string, mode: number): boolean {
  try {
    mkdirSync(fdPath(dir, name), mode);
    return true;
  } catch (err) {
    if (errno(err) === 'EEXIST') return false;
    throw err;
  }
}

/** Gives a freshly created entry exactly `mode` (mkdir/open filter it through the umask) and the owner. */
export async function applyOwnership(h: FileHandle, create: CreateAs): Promise<void> {
  await h.chmod(create.mode);
  if (create.owner) await h.chown(create.owner.uid, create.owner.gid);
}

/** `applyOwnership` on a raw fd. */
export function applyOwnershipSync(fd: number, create: CreateAs): void {
  fchmodSync(fd, create.mode);
  if (create.owner) fchownSync(fd, create.owner.uid, create.owner.gid);
}

/**
 * Opens `name` in the pinned directory `dir` without following a final symlink (O_NONBLOCK too, so a
 * FIFO planted by code cannot hang the engine in open()). Returns a raw fd; the caller closes it.
 */
export function openFileInSync(
  dir: number,
  name: string,
  flags: number,
  field: string,
  relPath: string,
  mode?: number,
): number {
  try {
    return openSync(fdPath(dir, name), flags | NOFOLLOW_FLAGS, mode);
  } catch (err) {
    throw openFailure(err, dir, name, field, relPath);
  }
}

/** `openFileInSync` returning a `FileHandle`. */
export async function openFileIn(
  dir: FileHandle,
  name: string,
  flags: number,
  field: string,
  relPath: string,
  mode?: number,
): Promise<FileHandle> {
  try {
    return await open(fdPath(dir, name), flags | NOFOLLOW_FLAGS, mode);
  } catch (err) {
    throw openFailure(err, dir.fd, name, field, relPath);
  }
}

/** What a failed open of `name` in the pinned `dir` means for the caller. */
function openFailure(err: unknown, dir: number, name: string, field: string, relPath: string): unknown {
  const code = errno(err);
  if (code === 'ELOOP' || (code === 'ENOTDIR' && isLinkIn(dir, name))) {
    return new PathRejectedError(
      field,
      relPath,
      'PATH_SYMLINK_ESCAPE',
      `${field} became a symlink while in use`,
    );
  }
  if (code === 'ENXIO') return new FileOpError('NOT_REGULAR_FILE', `${relPath} is not a regular file`);
  return toFileOpError(err, relPath);
}

function isLinkIn(dir: number, name: string): boolean {
  try {
    return lstatSync(fdPath(dir, name)).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Refuses anything but a regular file with a single link. A hardlink is indistinguishable from the file
 * it shares an inode with, so one planted by code (`ln /etc/shadow x`, possible where
 * fs.protected_hardlinks is off) would let the engine read or write outside the workspace. Regular files
 * created normally have nlink 1, so the refusal costs honest users nothing.
 */
export async function assertPlainFile(h: FileHandle, field: string, relPath: string): Promise<Stats> {
  return checkPlainFile(await h.stat(), field, relPath);
}

/** `assertPlainFile` on a raw fd. */
export function assertPlainFd(fd: number, field: string, relPath: string): Stats {
  return checkPlainFile(fstatSync(fd), field, relPath);
}

function checkPlainFile(st: Stats, field: string, relPath: string): Stats {
  if (st.isDirectory()) throw new FileOpError('EISDIR', `${relPath} is a directory`, { path: relPath });
  if (!st.isFile())
    throw new FileOpError('NOT_REGULAR_FILE', `${relPath} is not a regular file`, { path: relPath });
  if (st.nlink > 1) {
    throw new PathRejectedError(
      field,
      relPath,
      'PATH_HARDLINK',
      `${relPath} has ${st.nlink} hard links; the file API refuses hardlinked files, copy it from code instead`,
    );
  }
  return st;
}
