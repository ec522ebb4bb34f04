import { closeSync } from 'node:fs';
import { readdir, rename, unlink } from 'node:fs/promises';
import * as path from 'node:path';
import { newEntryPolicy } from '../entry-policy';
import type { DeleteOp, FileOpOutcome, MkdirOp, MoveOp } from '../file-op.types';
import { fdPath, openDirInsideSync } from '../fd-opens';
import { errno, toFileOpError } from '../fs-errors';
import { removeEntry } from '../workspace-fs';
import type { WorkspaceUsage } from '../workspace-usage';
import { FileOpError } from '../workspace.errors';
import { type OpPaths, parentOf } from './op-paths';

/**
 * The file API's changes to the tree itself: `mkdir`, `move` and `delete`. Entries are named, never
 * followed (a link is moved or deleted, not its target); what a move or delete frees is kept in the
 * workspace's usage count.
 */
export class FileTree {
  constructor(
    private readonly paths: OpPaths,
    private readonly usage: WorkspaceUsage,
  ) {}

  async mkdir(ws: string, op: MkdirOp): Promise<FileOpOutcome> {
    const rp = await this.paths.resolve(ws, op.path, 'path');
    if (rp.stat) {
      if (!rp.stat.isDirectory()) {
        throw new FileOpError('EEXIST', `${rp.rel} exists and is not a directory`, { path: rp.rel });
      }
      return { output: { path: rp.rel, created: false }, touched: [] };
    }
    closeSync(openDirInsideSync(rp.realRoot, rp.realRel, 'path', newEntryPolicy(rp.rootStat).dir));
    return { output: { path: rp.rel, created: true }, touched: [] };
  }

  /** Renames entries, links included (a link is moved, never followed). */
  async move(ws: string, op: MoveOp): Promise<FileOpOutcome> {
    const from = await this.paths.resolve(ws, op.path, 'path', { rejectRoot: true, followFinal: false });
    const to = await this.paths.resolve(ws, op.to, 'to', { rejectRoot: true, followFinal: false });
    if (!from.stat) throw new FileOpError('ENOENT', `${from.rel} does not exist`, { path: from.rel });
    // Between this check and the rename code could create `to`; Node has no RENAME_NOREPLACE, and the
    // worst case is an overwrite inside the same workspace.
    if (to.stat && op.overwrite !== true) {
      throw new FileOpError('EEXIST', `${to.rel} already exists; set overwrite: true to replace it`, {
        path: to.rel,
      });
    }
    if (from.stat.isDirectory() && (to.realRel + '/').startsWith(from.realRel + '/')) {
      throw new FileOpError('INVALID_MOVE', `cannot move directory ${from.rel} into itself (${to.rel})`, {
        path: from.rel,
      });
    }
    // Renaming inside the workspace only changes its usage by the file an overwrite replaces (a link
    // counts for nothing, and a directory can only be replaced when empty). A failed rename changed nothing.
    const replaced = to.stat?.isFile() ? to.stat.size : 0;
    const ticket = await this.usage.track(from);
    let applied = 0;
    try {
      const src = openDirInsideSync(from.realRoot, parentOf(from.realRel), 'path');
      try {
        const dst = openDirInsideSync(
          to.realRoot,
          parentOf(to.realRel),
          'to',
          newEntryPolicy(from.rootStat).dir,
        );
        try {
          await rename(fdPath(src, path.basename(from.real)), fdPath(dst, path.basename(to.real)));
          applied = -replaced;
        } catch (err) {
          if (errno(err) === 'EINVAL')
            throw new FileOpError('INVALID_MOVE', `cannot move ${from.rel} to ${to.rel}`);
          throw toFileOpError(err, to.rel);
        } finally {
          closeSync(dst);
        }
      } finally {
        closeSync(src);
      }
    } finally {
      ticket.settle(applied);
    }
    return {
      output: { path: from.rel, to: to.rel },
      touched: [
        { path: from.realRel, access: 'write' },
        { path: to.realRel, access: 'write' },
      ],
    };
  }

  /** Deletes the entry itself (a link, not its target); never the workspace root (PATH_IS_ROOT). */
  async delete(ws: string, op: DeleteOp): Promise<FileOpOutcome> {
    const rp = await this.paths.resolve(ws, op.path, 'path', { rejectRoot: true, followFinal: false });
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
    const name = path.basename(rp.real);
    const ticket = await this.usage.track(rp);
    // A file frees its size (links and other entries count for nothing); a tree, an amount only a walk
    // can tell, so the count goes stale; a failed unlink changed nothing.
    let applied: number | undefined = 0;
    try {
      const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path');
      try {
        if (!rp.stat.isDirectory()) {
          await unlink(fdPath(dir, name));
          applied = rp.stat.isFile() ? -rp.stat.size : 0;
        } else if (op.recursive === true) {
          applied = undefined;
          await removeEntry(dir, name, rp.rel);
        } else {
          const empty = (await readdir(fdPath(dir, name))).length === 0;
          const what = empty ? 'a directory' : 'a non-empty directory';
          throw new FileOpError(
            empty ? 'EISDIR' : 'ENOTEMPTY',
            `${rp.rel} is ${what}; set recursive: true to delete it`,
            {
              path: rp.rel,
            },
          );
        }
      } finally {
        closeSync(dir);
      }
    } finally {
      ticket.settle(applied);
    }
    return { output: { path: rp.rel, deleted: true }, touched: [{ path: rp.realRel, access: 'write' }] };
  }
}
