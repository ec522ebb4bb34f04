import { randomBytes } from 'node:crypto';
import { closeSync, constants as C, fchownSync, linkSync, unlinkSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { keepAs, newEntryPolicy } from '../entry-policy';
import { applyOwnershipSync, fdPath, openDirInsideSync, openFileInSync } from '../fd-opens';
import { openPlainFile } from '../file-ops/open-file';
import { parentOf } from '../file-ops/op-paths';
import { errno, toFileOpError } from '../fs-errors';
import { type RealPath, realPathInside } from '../path-guard';
import { FileOpError } from '../workspace.errors';
import { type ByteBudget, chunksOf, copyToFd } from './stream-copy';
import type { FileWriteResult } from './transfer.types';

/** A transfer let into a workspace: how many bytes it may add, and how to report what it did add. */
export interface Admission {
  budget: ByteBudget;
  /** Once, at the end: the change in bytes the transfer made on disk, `undefined` when unknown. */
  settle(delta: number | undefined): void;
}

export interface StreamWriteOptions {
  maxPathLength: number;
  /** `false`: refuse an existing file (`FILE_EXISTS`), also one that appears while the body streams. */
  overwrite: boolean;
  /** Lets the transfer in (the workspace cap), once the target is vetted and before any byte is written. */
  admit(rp: RealPath, rel: string, replacedSize: number): Promise<Admission>;
}

/**
 * Writes `body` to `relPath` in the workspace `ws` as it arrives: path-guarded like the file API, parent directories
 * made, into a temporary file beside the target (created O_EXCL|O_NOFOLLOW through the pinned parent) that is renamed
 * over it (or linked, without overwrite) once the body is whole. A failed or aborted body, a cap passed or a full
 * disk leave the old file as it was and no temporary file behind. Not capped by the file API's whole-file cap.
 */
export async function writeFileStream(
  ws: string,
  relPath: string,
  body: Readable,
  options: StreamWriteOptions,
): Promise<FileWriteResult> {
  const rp = await realPathInside(ws, relPath, 'path', {
    maxPathLength: options.maxPathLength,
    rejectRoot: true,
  });
  const existing = rp.stat;
  const name = path.basename(rp.real);
  let dir: number | undefined;
  try {
    if (existing) {
      if (existing.isDirectory()) {
        throw new FileOpError('NOT_A_FILE', `${rp.rel} is a directory`, { path: rp.rel });
      }
      if (!options.overwrite) {
        throw new FileOpError('FILE_EXISTS', `${rp.rel} already exists (overwrite=false)`, { path: rp.rel });
      }
      dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path');
      // Regular and single-link, or refused, as the file API's write would.
      closeSync(openPlainFile(dir, name, C.O_RDONLY, rp.rel).fd);
    }
    const oldSize = existing?.size ?? 0;
    const admission = await options.admit(rp, rp.rel, oldSize);
    let applied: number | undefined = 0;
    try {
      const policy = newEntryPolicy(rp.rootStat);
      dir ??= openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path', policy.dir);
      const as = existing ? keepAs(existing) : policy.file;
      const tmp = `.switchyard-${randomBytes(8).toString('hex')}.tmp`;
      const fd = openFileInSync(dir, tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 'path', rp.rel, 0o600);
      let tmpLeft = true;
      try {
        applyOwnershipSync(fd, options.overwrite ? as : { mode: as.mode });
        const { size, sha256 } = await copyToFd(fd, chunksOf(body), admission.budget, rp.rel);
        if (options.overwrite) {
          await rename(fdPath(dir, tmp), fdPath(dir, name));
          tmpLeft = false;
        } else {
          try {
            linkSync(fdPath(dir, tmp), fdPath(dir, name));
          } catch (err) {
            if (errno(err) !== 'EEXIST') throw err;
            throw new FileOpError('FILE_EXISTS', `${rp.rel} already exists (overwrite=false)`, {
              path: rp.rel,
            });
          }
          // link() of a file the engine no longer owns would need CAP_FOWNER: the owner comes after.
          if (as.owner) fchownSync(fd, as.owner.uid, as.owner.gid);
        }
        applied = size - oldSize;
        return { path: rp.rel, size, sha256, realPath: rp.realRel };
      } finally {
        closeSync(fd);
        if (tmpLeft) unlinkQuietly(fdPath(dir, tmp));
      }
    } finally {
      admission.settle(applied);
    }
  } catch (err) {
    throw toFileOpError(err, rp.rel);
  } finally {
    if (dir !== undefined) closeSync(dir);
  }
}

function unlinkQuietly(p: string): void {
  try {
    unlinkSync(p);
  } catch {
    // never created under that name, or already gone
  }
}
