import { closeSync, constants as C } from 'node:fs';
import * as path from 'node:path';
import { InvalidInputError } from '@switchyard/common';
import { writeFileAtomic } from '../atomic-write';
import { keepAs, newEntryPolicy } from '../entry-policy';
import type { EditOp, FileOpOutcome, WriteOp } from '../file-op.types';
import { contentBytes, countOccurrences, decodeText, readFdUpTo, writeFdAll } from '../file-content';
import { openDirInsideSync } from '../fd-opens';
import type { RealPath } from '../path-guard';
import { diskUsage } from '../workspace-fs';
import type { UsageTicket, WorkspaceUsage } from '../workspace-usage';
import { FileOpError, formatBytes } from '../workspace.errors';
import type { WorkspaceOptions } from '../workspace.options';
import { openPlainFile, withExistingFile } from './open-file';
import { type OpPaths, parentOf } from './op-paths';

/**
 * The file API's changes to a file's content: `write` (overwrite, append or create) and `edit` (find and
 * replace). Both hold to the per-file and the workspace cap, kept in the workspace's usage count, and
 * replace content atomically (`writeFileAtomic`); an append writes in place.
 */
export class FileWrites {
  constructor(
    private readonly options: WorkspaceOptions,
    private readonly paths: OpPaths,
    private readonly usage: WorkspaceUsage,
  ) {}

  async write(ws: string, op: WriteOp): Promise<FileOpOutcome> {
    if (typeof op.content !== 'string') throw new InvalidInputError('content', 'content must be a string');
    const mode = op.mode ?? 'overwrite';
    if (!['overwrite', 'append', 'create'].includes(mode)) {
      throw new InvalidInputError('mode', 'mode must be overwrite, append or create');
    }
    const rp = await this.paths.resolve(ws, op.path, 'path', { rejectRoot: true });
    const data = contentBytes(op.content, op.encoding);
    const existing = rp.stat;
    const name = path.basename(rp.real);
    const oldSize = existing?.size ?? 0;
    const newSize = mode === 'append' ? oldSize + data.length : data.length;
    // The parent, pinned once and used for the check, the append or the temp file and rename. Opened
    // without `create` while the target exists (its parent does too); for a new file it is opened (and
    // missing directories made) only after the caps passed, so a refused write leaves nothing behind.
    let dir: number | undefined;
    try {
      if (existing) {
        if (existing.isDirectory()) {
          throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
        }
        dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path');
        // Regular and single-link, or refused (EISDIR, NOT_REGULAR_FILE, PATH_HARDLINK), whatever the mode.
        closeSync(openPlainFile(dir, name, C.O_RDONLY, rp.rel).fd);
        if (mode === 'create') {
          throw new FileOpError('EEXIST', `${rp.rel} already exists; use mode overwrite or append`, {
            path: rp.rel,
          });
        }
      }
      // An append grows the file in place: the whole-file cap bounds what one append carries, the workspace cap
      // (and its quota) what the file grows to.
      const ticket =
        mode === 'append'
          ? await this.checkCaps(rp, newSize, oldSize, data.length)
          : await this.checkCaps(rp, newSize, oldSize);
      // What the write has changed on disk so far, for the usage count: nothing until the new content is
      // in place; unknown while an append is under way.
      let applied: number | undefined = 0;
      try {
        const policy = newEntryPolicy(rp.rootStat);
        dir ??= openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path', policy.dir);
        if (mode === 'append' && existing) {
          const { fd, st } = openPlainFile(dir, name, C.O_WRONLY | C.O_APPEND, rp.rel);
          try {
            // The file we vetted must be the one we opened; a replacement could be far bigger.
            if (st.ino !== existing.ino) {
              throw new FileOpError('ENOENT', `${rp.rel} was replaced while writing; retry`, {
                path: rp.rel,
              });
            }
            applied = undefined;
            await writeFdAll(fd, data);
            applied = data.length;
          } finally {
            closeSync(fd);
          }
        } else {
          await writeFileAtomic(dir, name, data, {
            rel: rp.rel,
            as: existing ? keepAs(existing) : policy.file,
            exclusive: mode === 'create',
            committed: () => {
              applied = newSize - oldSize;
            },
          });
        }
      } finally {
        ticket.settle(applied);
      }
    } finally {
      if (dir !== undefined) closeSync(dir);
    }
    return {
      output: { path: rp.rel, bytesWritten: data.length, size: newSize, created: !existing },
      touched: [{ path: rp.realRel, access: 'write' }],
    };
  }

  async edit(ws: string, op: EditOp): Promise<FileOpOutcome> {
    if (typeof op.find !== 'string' || op.find === '') {
      throw new InvalidInputError('find', 'find must be a non-empty string');
    }
    if (typeof op.replace !== 'string') throw new InvalidInputError('replace', 'replace must be a string');
    const rp = await this.paths.resolve(ws, op.path, 'path', { rejectRoot: true });
    const cap = this.options.limits.maxFileBytes;
    const { text, st } = await withExistingFile(rp, 'path', C.O_RDONLY, async ({ fd, st }) => {
      if (st.size > cap) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `${rp.rel} is ${formatBytes(st.size)}, over the ${formatBytes(cap)} cap for edits; edit it from code`,
          { path: rp.rel, size: st.size, cap },
        );
      }
      return { text: decodeText(await readFdUpTo(fd, st.size)), st };
    });
    if (text === undefined) {
      throw new FileOpError('NOT_REGULAR_FILE', `${rp.rel} is binary (not UTF-8 text); edit it from code`, {
        path: rp.rel,
      });
    }
    const count = countOccurrences(text, op.find);
    if (count === 0) {
      throw new FileOpError(
        'EDIT_NOT_FOUND',
        `find text does not occur in ${rp.rel}; read the file and copy the exact text, whitespace included`,
        { path: rp.rel },
      );
    }
    if (count > 1 && op.all !== true) {
      throw new FileOpError(
        'EDIT_AMBIGUOUS',
        `find text occurs ${count} times in ${rp.rel}; include more surrounding text or set all: true`,
        { path: rp.rel, occurrences: count },
      );
    }
    const data = Buffer.from(text.split(op.find).join(op.replace), 'utf8');
    const ticket = await this.checkCaps(rp, data.length, st.size);
    let applied = 0;
    try {
      const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path');
      try {
        await writeFileAtomic(dir, path.basename(rp.real), data, {
          rel: rp.rel,
          as: keepAs(st),
          committed: () => {
            applied = data.length - st.size;
          },
        });
      } finally {
        closeSync(dir);
      }
    } finally {
      ticket.settle(applied);
    }
    return {
      output: { path: rp.rel, replacements: count },
      touched: [
        { path: rp.realRel, access: 'read' },
        { path: rp.realRel, access: 'write' },
      ],
    };
  }

  /**
   * Per-file cap, then the workspace cap on what the workspace would hold after the write. Passing both
   * reserves the change in the workspace's usage count: settle the ticket with what was actually written.
   */
  private async checkCaps(
    rp: RealPath,
    newSize: number,
    replacedSize: number,
    cappedSize = newSize,
  ): Promise<UsageTicket> {
    const { maxFileBytes, maxWorkspaceBytes } = this.options.limits;
    if (cappedSize > maxFileBytes) {
      throw new FileOpError(
        'FILE_TOO_LARGE',
        `${rp.rel} would be ${formatBytes(cappedSize)}, over the ${formatBytes(maxFileBytes)} file cap; split the content across files (or appends), or upload it through files/content`,
        { path: rp.rel, size: cappedSize, cap: maxFileBytes },
      );
    }
    // When the count is stale: a walk capped at maxScanEntries gives a lower bound; huge trees are the
    // sandbox's quota to police.
    const measure = async () => (await diskUsage(rp.realRoot, this.options.maxScanEntries)).bytes;
    return this.usage.reserve(rp, newSize - replacedSize, measure, (bytes) => {
      const after = bytes - replacedSize + newSize;
      if (after > maxWorkspaceBytes) {
        throw new FileOpError(
          'WORKSPACE_FULL',
          `the workspace would hold ${formatBytes(after)}, over its ${formatBytes(maxWorkspaceBytes)} cap; delete files first`,
          { path: rp.rel, usage: bytes, cap: maxWorkspaceBytes },
        );
      }
    });
  }
}
