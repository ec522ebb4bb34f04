import { randomBytes } from 'node:crypto';
import { closeSync, constants as C, renameSync, unlinkSync } from 'node:fs';
import * as path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import {
  applyOwnershipSync,
  assertPlainFd,
  type CreateAs,
  fdPath,
  FileOpError,
  openDirInsideSync,
  openFileInSync,
  readFdUpTo,
  realPathInside,
  toFileOpError,
  WORKSPACE_OPTIONS,
  WorkspaceManager,
  type WorkspaceOptions,
  writeFdAll,
} from '@switchyard/workspace';

/**
 * Moves bytes between the browser and a session's workspace with the file API's guarantees, through the
 * workspace's own path guard: paths are vetted by `realPathInside` (no traversal, no symlink out), and the
 * directories on the way are then opened one component at a time with O_NOFOLLOW through `/proc/self/fd`,
 * so a component that sandboxed code swaps for a symlink meanwhile is refused instead of followed. Writes
 * are atomic (temp file + rename in the pinned directory) and take the mode and, as root, the owner of the
 * workspace root, like files the file API creates; uploads read only regular, single-link files.
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
    const dirAs: CreateAs = { mode: root.mode & 0o777, owner };
    const fileAs: CreateAs = { mode: root.mode & 0o666, owner };
    const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), field, dirAs);
    const name = path.basename(rp.realRel);
    const tmp = `.${name.slice(0, 200)}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      const fd = openFileInSync(dir, tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, field, rp.rel, 0o600);
      try {
        applyOwnershipSync(fd, fileAs);
        await writeFdAll(fd, bytes);
      } finally {
        closeSync(fd);
      }
      renameSync(fdPath(dir, tmp), fdPath(dir, name));
    } catch (err) {
      try {
        unlinkSync(fdPath(dir, tmp));
      } catch {
        // never created, or already renamed
      }
      // A directory in the way, the workspace's own quota (its loop-mounted image) or the disk full…
      throw toFileOpError(err, rp.rel);
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
    const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), field);
    let fd: number;
    try {
      fd = openFileInSync(dir, path.basename(rp.realRel), C.O_RDONLY, field, rp.rel);
    } finally {
      closeSync(dir);
    }
    try {
      const st = assertPlainFd(fd, field, rp.rel);
      if (st.size > maxBytes) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `${rp.rel} is ${st.size} bytes, over the ${maxBytes}-byte cap`,
          {
            path: rp.rel,
          },
        );
      }
      return { buffer: await readFdUpTo(fd, st.size), name: path.basename(rp.rel), realRel: rp.realRel };
    } finally {
      closeSync(fd);
    }
  }
}

function parentOf(rel: string): string {
  const d = path.dirname(rel);
  return d === '.' ? '' : d;
}
