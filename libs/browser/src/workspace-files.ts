import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as C,
  fchmodSync,
  fchownSync,
  mkdirSync,
  openSync,
  renameSync,
  type Stats,
  unlinkSync,
} from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import * as path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import {
  FileOpError,
  PathRejectedError,
  realPathInside,
  WORKSPACE_OPTIONS,
  WorkspaceManager,
  type WorkspaceOptions,
} from '@switchyard/workspace';

const DIR_FLAGS = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW;
const fdPath = (fd: number, name: string): string => `/proc/self/fd/${fd}/${name}`;
const errno = (err: unknown): string | undefined =>
  typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;

interface CreateAs {
  mode: number;
  owner?: { uid: number; gid: number };
}

/**
 * Moves bytes between the browser and a session's workspace with the file API's guarantees: paths are
 * vetted by `realPathInside` (no traversal, no symlink out), and the directories on the way are then
 * opened one component at a time with O_NOFOLLOW through `/proc/self/fd`, so a component that sandboxed
 * code swaps for a symlink meanwhile is refused instead of followed. Writes are atomic (temp file +
 * rename in the pinned directory) and take the mode and, as root, the owner of the workspace root, like
 * files the file API creates; uploads read only regular, single-link files.
 */
@Injectable()
export class WorkspaceFiles {
  constructor(
    private readonly workspaces: WorkspaceManager,
    @Inject(WORKSPACE_OPTIONS) private readonly workspaceOptions: WorkspaceOptions,
  ) {}

  /**
   * Writes `bytes` at `relPath` (parents made), replacing a file there. Returns the real path relative to
   * the workspace, for the graph. Throws `PathRejectedError` (refused path) or `FileOpError` (caps, a
   * directory in the way).
   */
  async write(
    sessionId: string,
    workspaceDir: string,
    relPath: string,
    bytes: Buffer,
    field = 'path',
  ): Promise<string> {
    const rp = await realPathInside(workspaceDir, relPath, field, { rejectRoot: true });
    if (rp.stat?.isDirectory()) throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
    const maxWorkspace = this.workspaceOptions.limits.maxWorkspaceBytes;
    const used = await this.workspaces.usageBytes(sessionId);
    const after = used - (rp.stat?.isFile() ? rp.stat.size : 0) + bytes.length;
    if (after > maxWorkspace) {
      throw new FileOpError(
        'WORKSPACE_FULL',
        `writing ${rp.rel} (${bytes.length} bytes) would take the workspace over its ${maxWorkspace}-byte cap`,
        { path: rp.rel },
      );
    }
    const root = rp.rootStat;
    const owner = process.getuid?.() === 0 ? { uid: root.uid, gid: root.gid } : undefined;
    const dir = openDirPinned(rp.realRoot, parentOf(rp.realRel), field, rp.rel, {
      mode: root.mode & 0o777,
      owner,
    });
    const name = path.basename(rp.realRel);
    const tmp = `.${name.slice(0, 200)}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      const h = await open(fdPath(dir, tmp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
      try {
        await h.chmod(root.mode & 0o666);
        if (owner) await h.chown(owner.uid, owner.gid);
        await h.writeFile(bytes);
      } finally {
        await h.close();
      }
      renameSync(fdPath(dir, tmp), fdPath(dir, name));
    } catch (err) {
      try {
        unlinkSync(fdPath(dir, tmp));
      } catch {
        // never created, or already renamed
      }
      if (errno(err) === 'EISDIR')
        throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
      if (errno(err) === 'ENOSPC' || errno(err) === 'EDQUOT') {
        // The workspace's own quota (its loop-mounted image) or the disk is full.
        throw new FileOpError('WORKSPACE_FULL', `${rp.rel} cannot be written: the workspace is full`, {
          path: rp.rel,
        });
      }
      throw err;
    } finally {
      closeSync(dir);
      this.workspaces.markUsageStale(sessionId);
    }
    return rp.realRel;
  }

  /** Reads a regular, single-link file of at most `maxBytes`. Returns its bytes, name and real path. */
  async read(
    workspaceDir: string,
    relPath: string,
    maxBytes: number,
    field = 'path',
  ): Promise<{ buffer: Buffer; name: string; realRel: string }> {
    const rp = await realPathInside(workspaceDir, relPath, field, { rejectRoot: true });
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
    const dir = openDirPinned(rp.realRoot, parentOf(rp.realRel), field, rp.rel);
    let h: FileHandle;
    try {
      h = await open(fdPath(dir, path.basename(rp.realRel)), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
    } catch (err) {
      throw openFailure(err, field, rp.rel);
    } finally {
      closeSync(dir);
    }
    try {
      const st = await h.stat();
      checkPlainFile(st, field, rp.rel);
      if (st.size > maxBytes) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `${rp.rel} is ${st.size} bytes, over the ${maxBytes}-byte cap`,
          {
            path: rp.rel,
          },
        );
      }
      return { buffer: await h.readFile(), name: path.basename(rp.rel), realRel: rp.realRel };
    } finally {
      await h.close();
    }
  }
}

function parentOf(rel: string): string {
  const d = path.dirname(rel);
  return d === '.' ? '' : d;
}

function checkPlainFile(st: Stats, field: string, rel: string): void {
  if (st.isDirectory()) throw new FileOpError('EISDIR', `${rel} is a directory`, { path: rel });
  if (!st.isFile()) throw new FileOpError('NOT_REGULAR_FILE', `${rel} is not a regular file`, { path: rel });
  if (st.nlink > 1) {
    throw new PathRejectedError(
      field,
      rel,
      'PATH_HARDLINK',
      `${rel} has ${st.nlink} hard links; copy it from code instead`,
    );
  }
}

function openFailure(err: unknown, field: string, rel: string): unknown {
  const code = errno(err);
  if (code === 'ELOOP' || code === 'ENOTDIR') {
    return new PathRejectedError(field, rel, 'PATH_SYMLINK_ESCAPE', `${field} became a symlink while in use`);
  }
  if (code === 'ENOENT') return new FileOpError('ENOENT', `${rel} does not exist`, { path: rel });
  if (code === 'ENXIO')
    return new FileOpError('NOT_REGULAR_FILE', `${rel} is not a regular file`, { path: rel });
  return err;
}

/**
 * Opens `relDir` below `realRoot` one component at a time without following links; with `create`, makes
 * missing directories with that mode and owner. Returns a raw fd the caller closes.
 */
function openDirPinned(
  realRoot: string,
  relDir: string,
  field: string,
  rel: string,
  create?: CreateAs,
): number {
  let fd = openSync(realRoot, DIR_FLAGS);
  try {
    for (const seg of relDir ? relDir.split('/') : []) {
      let next: number;
      try {
        next = openSync(fdPath(fd, seg), DIR_FLAGS);
      } catch (err) {
        if (!create || errno(err) !== 'ENOENT') throw openFailure(err, field, rel);
        let made = false;
        try {
          mkdirSync(fdPath(fd, seg), create.mode);
          made = true;
        } catch (e) {
          if (errno(e) !== 'EEXIST') throw e;
        }
        try {
          next = openSync(fdPath(fd, seg), DIR_FLAGS);
        } catch (e) {
          throw openFailure(e, field, rel);
        }
        if (made) {
          fchmodSync(next, create.mode);
          if (create.owner) fchownSync(next, create.owner.uid, create.owner.gid);
        }
      }
      closeSync(fd);
      fd = next;
    }
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}
