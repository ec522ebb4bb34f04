import { randomBytes } from 'node:crypto';
import { closeSync, constants as C, fchownSync, linkSync, unlinkSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { writeFdAll } from './file-content';
import { applyOwnershipSync, type CreateAs, fdPath, openFileInSync } from './fd-opens';
import { errno } from './fs-errors';
import { FileOpError } from './workspace.errors';

export interface AtomicWriteOptions {
  /** The caller's name for the file, for errors. */
  rel: string;
  /** The request field the path came from, for refusals (`PathRejectedError.details.field`). */
  field?: string;
  /** Mode and (as root) owner the file ends up with. */
  as: CreateAs;
  /** Fail with `FileOpError('EEXIST')` instead of replacing a file that is there (or appears meanwhile). */
  exclusive?: boolean;
  /** Runs once the new content is in place, before anything that can still fail after that. */
  committed?: () => void;
}

/**
 * Writes `data` as `name` in the pinned directory `dir` (an fd from `openDirInsideSync`), atomically: a temp
 * file beside the target (created O_EXCL|O_NOFOLLOW through the directory's fd, same directory so the rename
 * stays on one filesystem), then renamed over the target, so readers see the old or the new content, never
 * half, and a failed write leaves the target as it was and no temp file behind. The temp file gets its mode
 * and owner before it takes the target's name, so the target never shows with the wrong ones.
 *
 * `exclusive` uses link() instead of rename, which fails with EEXIST if the target appeared meanwhile; the
 * owner is then given after the link, because link() of a file the engine no longer owns needs CAP_FOWNER.
 *
 * Not fsync'ed: atomic against concurrent readers, not against power loss, which is fine for a scratch
 * workspace and spares every write a disk flush. The rename runs in the threadpool: on ext4 (auto_da_alloc)
 * replacing a file by rename starts writeback of the new one, ~200 µs of kernel work that may wait on the
 * disk, so it stays off the event loop; everything else is sync.
 *
 * Errors from the disk are thrown as they are (callers map them with `toFileOpError` against their own name
 * for the path); refusals of the directory come as `PathRejectedError`, an existing target in exclusive mode
 * as `FileOpError('EEXIST')`.
 */
export async function writeFileAtomic(
  dir: number,
  name: string,
  data: Buffer,
  { rel, field = 'path', as, exclusive = false, committed }: AtomicWriteOptions,
): Promise<void> {
  const tmp = `.switchyard-${randomBytes(8).toString('hex')}.tmp`;
  const fd = openFileInSync(dir, tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, field, rel, 0o600);
  // After a rename the temp name is gone; in every other case it must be removed.
  let tmpLeft = true;
  try {
    applyOwnershipSync(fd, exclusive ? { mode: as.mode } : as);
    await writeFdAll(fd, data);
    if (exclusive) {
      try {
        linkSync(fdPath(dir, tmp), fdPath(dir, name));
      } catch (err) {
        throw errno(err) === 'EEXIST'
          ? new FileOpError('EEXIST', `${rel} already exists`, { path: rel })
          : err;
      }
    } else {
      await rename(fdPath(dir, tmp), fdPath(dir, name));
      tmpLeft = false;
    }
    committed?.();
    // Through the fd: by path it could reach whatever code swapped in under the name meanwhile.
    if (exclusive && as.owner) fchownSync(fd, as.owner.uid, as.owner.gid);
  } finally {
    closeSync(fd);
    if (tmpLeft) unlinkQuietly(fdPath(dir, tmp));
  }
}

function unlinkQuietly(p: string): void {
  try {
    unlinkSync(p);
  } catch {
    // never created under that name, or already gone
  }
}
