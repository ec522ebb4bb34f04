import { closeSync, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, type Stats } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { DIR_FLAGS, fdPath, NOFOLLOW_FLAGS } from './fd-opens';
import { errno } from './fs-errors';

/** Directories up to this size (bytes, as fstat reports them) are read with one sync readdir. */
const SYNC_READDIR_BYTES = 64 * 1024;
/** Entries lstat'ed between two yields to the event loop. */
const LSTAT_BATCH = 256;

/**
 * Reads a directory opened by absolute path, after checking through `/proc/self/fd` that the directory
 * actually opened is the one named (an intermediate component swapped for a link would show up as a
 * different path). Entries are lstat'ed through the same fd. Returns undefined when the directory is gone
 * or cannot be opened by path any more (too deep); walks treat that as "skip".
 */
export async function readDirVerified(absDir: string): Promise<{ name: string; stat: Stats }[] | undefined> {
  let fd: number;
  try {
    fd = openSync(absDir, DIR_FLAGS | NOFOLLOW_FLAGS);
  } catch (err) {
    const code = errno(err);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'ENAMETOOLONG')
      return undefined;
    throw err;
  }
  try {
    if (readlinkSync(fdPath(fd)) !== absDir) return undefined;
    // Small directories (nearly all) in one sync call; a huge one off the event loop.
    const names = (
      fstatSync(fd).size <= SYNC_READDIR_BYTES ? readdirSync(fdPath(fd)) : await readdir(fdPath(fd))
    ).sort(compareNames);
    const out: { name: string; stat: Stats }[] = [];
    for (let i = 0; i < names.length; i++) {
      if (i > 0 && i % LSTAT_BATCH === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      const stat = lstatQuietly(fdPath(fd, names[i])); // vanished meanwhile: skip
      if (stat) out.push({ name: names[i], stat });
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

function lstatQuietly(p: string): Stats | undefined {
  try {
    return lstatSync(p, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** Code-unit order, the same everywhere so cursors and snapshots agree. */
export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
