import { closeSync, constants as C } from 'node:fs';
import * as path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import {
  assertPlainFd,
  FileOpError,
  newEntryPolicy,
  openDirInsideSync,
  openFileInSync,
  readFdUpTo,
  realPathInside,
  toFileOpError,
  WORKSPACE_OPTIONS,
  WorkspaceManager,
  type WorkspaceOptions,
  writeFileAtomic,
} from '@switchyard/workspace';

/**
 * Moves bytes between the browser and a session's workspace with the file API's guarantees, through the
 * workspace's own path guard: paths are vetted by `realPathInside` (no traversal, no symlink out), and the
 * directories on the way are then opened one component at a time with O_NOFOLLOW through `/proc/self/fd`,
 * so a component that sandboxed code swaps for a symlink meanwhile is refused instead of followed. Writes
 * are the file API's own atomic write (`writeFileAtomic`: temp file + rename in the pinned directory) and
 * take the mode and, as root, the owner of the workspace root (`newEntryPolicy`), like files the file API
 * creates; uploads read only regular, single-link files.
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
    const policy = newEntryPolicy(rp.rootStat);
    const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), field, policy.dir);
    try {
      await writeFileAtomic(dir, path.basename(rp.realRel), bytes, { rel: rp.rel, field, as: policy.file });
    } catch (err) {
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
