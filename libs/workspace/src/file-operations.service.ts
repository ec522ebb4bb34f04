import { randomBytes } from 'node:crypto';
import { closeSync, constants as C, linkSync, type Stats, unlinkSync } from 'node:fs';
import { readdir, rename, unlink } from 'node:fs/promises';
import * as path from 'node:path';
import { Inject, Injectable, type OnApplicationShutdown, Optional } from '@nestjs/common';
import { InvalidInputError } from '@switchyard/common';
import type {
  DeleteOp,
  EditOp,
  FileOp,
  FileOpOutcome,
  FindOp,
  GrepOp,
  ListOp,
  MkdirOp,
  MoveOp,
  ReadOp,
  StatOp,
  WriteOp,
} from './file-op.types';
import {
  countOccurrences,
  decodeText,
  fdReader,
  lineWindow,
  readFdUpTo,
  streamLineWindow,
  writeFdAll,
} from './file-content';
import { compileGlob, type GlobMatcher } from './glob';
import { GrepMatcher } from './grep-matcher';
import {
  applyOwnershipSync,
  assertPlainFd,
  assertProcFd,
  type CreateAs,
  errno,
  fdPath,
  openDirInsideSync,
  openFileInSync,
  type RealPath,
  realPathInside,
  toFileOpError,
} from './path-guard';
import { diskUsage, entryType, removeEntry, walk, type WalkState } from './workspace-fs';
import { type UsageTicket, WorkspaceUsage } from './workspace-usage';
import { FileOpError, formatBytes, PathRejectedError } from './workspace.errors';
import { WORKSPACE_OPTIONS, type WorkspaceOptions } from './workspace.options';

const DEFAULT_READ_LINES = 2000;
const DEFAULT_LIST_LIMIT = 1000;
const DEFAULT_GREP_LIMIT = 200;
const MAX_RESULT_LIMIT = 10_000;
const GREP_TEXT_CHARS = 500;

type Touched = FileOpOutcome['touched'];
/** What opening an existing file needs: where it really is, what the caller called it, its lstat. */
type FileRef = Pick<RealPath, 'realRoot' | 'realRel' | 'rel' | 'stat'>;
/** A file opened by `withExistingFile`: a raw fd (valid only during the callback) and its fstat. */
interface OpenFile {
  fd: number;
  st: Stats;
}
interface Policy {
  file: CreateAs;
  dir: CreateAs;
}

/**
 * The file API over one workspace directory. Paths in `output` are the caller's (normalized); paths in
 * `touched` are the real ones (symlinks resolved), so the graph gets one node per actual file.
 *
 * Binary files: `read` returns anything that is not valid UTF-8 or contains a NUL byte as base64
 * (`encoding: 'base64'`, whole file, no line window), because code often produces images or archives an
 * agent wants back; `grep` skips them and `edit` refuses them.
 *
 * Workspace cap: checked against a per-workspace running count (`WorkspaceUsage`) that this API keeps up
 * to date itself; changes made behind its back (code actions) must be reported with `markUsageStale`,
 * after which the next write re-measures with a bounded walk.
 */
@Injectable()
export class FileOperations implements OnApplicationShutdown {
  private readonly usage: WorkspaceUsage;
  private readonly matcher = new GrepMatcher();

  constructor(
    @Inject(WORKSPACE_OPTIONS) private readonly options: WorkspaceOptions,
    // Shared with `WorkspaceManager` in `WorkspaceModule`; a standalone instance keeps its own.
    @Optional() usage?: WorkspaceUsage,
  ) {
    assertProcFd();
    this.usage = usage ?? new WorkspaceUsage();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.matcher.close();
  }

  /**
   * Tells the file API that `workspaceDir` may have changed behind its back (a code action ran in it,
   * something outside the engine wrote to it): the workspace cap re-measures it on the next write.
   * `WorkspaceManager.markUsageStale(sessionId)` does the same by session id.
   */
  markUsageStale(workspaceDir: string): void {
    this.usage.markStale(workspaceDir);
  }

  async execute(workspaceDir: string, op: FileOp): Promise<FileOpOutcome> {
    try {
      switch (op.op) {
        case 'read':
          return await this.read(workspaceDir, op);
        case 'write':
          return await this.write(workspaceDir, op);
        case 'edit':
          return await this.edit(workspaceDir, op);
        case 'list':
          return await this.list(workspaceDir, op);
        case 'find':
          return await this.find(workspaceDir, op);
        case 'grep':
          return await this.grep(workspaceDir, op);
        case 'stat':
          return await this.stat(workspaceDir, op);
        case 'mkdir':
          return await this.mkdir(workspaceDir, op);
        case 'move':
          return await this.move(workspaceDir, op);
        case 'delete':
          return await this.delete(workspaceDir, op);
        default:
          throw new InvalidInputError('op', `unknown file op ${String((op as { op: unknown }).op)}`);
      }
    } catch (err) {
      throw toFileOpError(err, 'path' in op && typeof op.path === 'string' ? op.path : '');
    }
  }

  private get limits() {
    return this.options.limits;
  }

  private guard(
    ws: string,
    p: unknown,
    field: string,
    opts: { allowEmpty?: boolean; rejectRoot?: boolean; followFinal?: boolean } = {},
  ) {
    return realPathInside(ws, p, field, { maxPathLength: this.limits.maxPathLength, ...opts });
  }

  // ---------------------------------------------------------------- read

  private async read(ws: string, op: ReadOp): Promise<FileOpOutcome> {
    const offset = intOption(op.offset, 'offset', 1, 1, Number.MAX_SAFE_INTEGER);
    const limit = intOption(op.limit, 'limit', DEFAULT_READ_LINES, 1, 1_000_000);
    const rp = await this.guard(ws, op.path, 'path', { rejectRoot: true });
    const cap = this.limits.maxFileBytes;
    const output = await this.withExistingFile(rp, 'path', C.O_RDONLY, async ({ fd, st }) => {
      if (st.size <= cap) {
        const buf = await readFdUpTo(fd, st.size);
        const text = decodeText(buf);
        if (text === undefined) {
          return {
            path: rp.rel,
            encoding: 'base64',
            content: buf.toString('base64'),
            size: buf.length,
            truncated: false,
          };
        }
        return { path: rp.rel, encoding: 'utf8', ...lineWindow(text, offset, limit) };
      }
      // Too big to return whole; a line window of it is fine, streamed so memory stays within the cap.
      if (op.offset === undefined && op.limit === undefined) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `${rp.rel} is ${formatBytes(st.size)}, over the ${formatBytes(cap)} read cap; use offset/limit to read part of it`,
          { path: rp.rel, size: st.size, cap },
        );
      }
      return {
        path: rp.rel,
        encoding: 'utf8',
        ...(await streamLineWindow(fdReader(fd), st.size, offset, limit, cap, rp.rel)),
      };
    });
    return { output, touched: [{ path: rp.realRel, access: 'read' }] };
  }

  // ---------------------------------------------------------------- write / edit

  private async write(ws: string, op: WriteOp): Promise<FileOpOutcome> {
    if (typeof op.content !== 'string') throw new InvalidInputError('content', 'content must be a string');
    const mode = op.mode ?? 'overwrite';
    if (!['overwrite', 'append', 'create'].includes(mode)) {
      throw new InvalidInputError('mode', 'mode must be overwrite, append or create');
    }
    const rp = await this.guard(ws, op.path, 'path', { rejectRoot: true });
    const data = Buffer.from(op.content, 'utf8');
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
      const ticket = await this.checkCaps(rp, newSize, oldSize);
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
          const as = existing ? keepAs(existing) : policy.file;
          await atomicWrite(dir, name, data, rp.rel, mode === 'create', as, () => {
            applied = newSize - oldSize;
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

  private async edit(ws: string, op: EditOp): Promise<FileOpOutcome> {
    if (typeof op.find !== 'string' || op.find === '') {
      throw new InvalidInputError('find', 'find must be a non-empty string');
    }
    if (typeof op.replace !== 'string') throw new InvalidInputError('replace', 'replace must be a string');
    const rp = await this.guard(ws, op.path, 'path', { rejectRoot: true });
    const cap = this.limits.maxFileBytes;
    const { text, st } = await this.withExistingFile(rp, 'path', C.O_RDONLY, async ({ fd, st }) => {
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
        await atomicWrite(dir, path.basename(rp.real), data, rp.rel, false, keepAs(st), () => {
          applied = data.length - st.size;
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
  private async checkCaps(rp: RealPath, newSize: number, replacedSize: number): Promise<UsageTicket> {
    const { maxFileBytes, maxWorkspaceBytes } = this.limits;
    if (newSize > maxFileBytes) {
      throw new FileOpError(
        'FILE_TOO_LARGE',
        `${rp.rel} would be ${formatBytes(newSize)}, over the ${formatBytes(maxFileBytes)} file cap; split the content across files`,
        { path: rp.rel, size: newSize, cap: maxFileBytes },
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

  /** Opens an existing regular, single-link file through its pinned parent and runs `fn` on it. */
  private async withExistingFile<T>(
    rp: FileRef,
    field: string,
    flags: number,
    fn: (file: OpenFile) => Promise<T>,
  ): Promise<T> {
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
    if (rp.stat.isDirectory()) throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
    const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), field);
    let file: OpenFile;
    try {
      file = openPlainFile(dir, path.basename(rp.realRel), flags, rp.rel, field);
    } finally {
      closeSync(dir); // the open file pins what it needs; the directory is done with
    }
    try {
      return await fn(file);
    } finally {
      closeSync(file.fd);
    }
  }

  // ---------------------------------------------------------------- list / find / grep

  private async list(ws: string, op: ListOp): Promise<FileOpOutcome> {
    const limit = intOption(op.limit, 'limit', DEFAULT_LIST_LIMIT, 1, MAX_RESULT_LIMIT);
    const after = op.cursor === undefined ? undefined : decodeCursor(op.cursor);
    const rp = await this.directory(ws, op.path);
    const state: WalkState = { scanned: 0, partial: false };
    const entries: { path: string; type: string; size: number }[] = [];
    let last: string | undefined;
    let more = false;
    const opts = { recursive: op.recursive === true, maxEntries: this.options.maxScanEntries, after };
    for await (const e of walk(rp.real, opts, state)) {
      if (entries.length === limit) {
        more = true;
        break;
      }
      entries.push({ path: joinRel(rp.rel, e.rel), type: e.type, size: e.type === 'dir' ? 0 : e.stat.size });
      last = e.rel;
    }
    const nextCursor = (more || state.partial) && last !== undefined ? encodeCursor(last) : undefined;
    return { output: { entries, ...(nextCursor ? { nextCursor } : {}) }, touched: [] };
  }

  private async find(ws: string, op: FindOp): Promise<FileOpOutcome> {
    const match = compileGlob(op.pattern, 'pattern');
    const limit = intOption(op.limit, 'limit', DEFAULT_LIST_LIMIT, 1, MAX_RESULT_LIMIT);
    const rp = await this.directory(ws, op.path);
    const state: WalkState = { scanned: 0, partial: false };
    const paths: string[] = [];
    let truncated = false;
    for await (const e of walk(
      rp.real,
      { recursive: true, maxEntries: this.options.maxScanEntries },
      state,
    )) {
      if (!match(e.rel)) continue;
      if (paths.length === limit) {
        truncated = true;
        break;
      }
      paths.push(joinRel(rp.rel, e.rel));
    }
    return { output: { paths, truncated: truncated || state.partial }, touched: [] };
  }

  private async grep(ws: string, op: GrepOp): Promise<FileOpOutcome> {
    const re = this.compileRegex(op.pattern, op.ignoreCase === true);
    // Like ripgrep: a glob without `/` filters on the file name at any depth.
    let filter: ((rel: string) => boolean) | undefined;
    if (op.glob !== undefined) {
      const m: GlobMatcher = compileGlob(op.glob, 'glob');
      filter = op.glob.includes('/') ? m : (rel) => m(path.posix.basename(rel));
    }
    const limit = intOption(op.limit, 'limit', DEFAULT_GREP_LIMIT, 1, MAX_RESULT_LIMIT);
    const rp = await this.guard(ws, op.path ?? '', 'path', { allowEmpty: true });
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel || '.'} does not exist`, { path: rp.rel });

    // Files to search: [shown path, real path relative to the root, lstat].
    const state: WalkState = { scanned: 0, partial: false };
    const maxEntries = this.options.maxScanEntries;
    const files = async function* (): AsyncGenerator<[string, string, Stats]> {
      if (!rp.stat!.isDirectory()) {
        yield [rp.rel, rp.realRel, rp.stat!];
        return;
      }
      for await (const e of walk(rp.real, { recursive: true, maxEntries }, state)) {
        if (e.type === 'file' && (!filter || filter(e.rel))) {
          yield [joinRel(rp.rel, e.rel), joinRel(rp.realRel, e.rel), e.stat];
        }
      }
    };

    const matches: string[] = [];
    const touched: Touched = [];
    let truncated = false;
    // Matching time for the whole grep: each file may use the per-file timeout, all together ten times it.
    const deadline = Date.now() + 10 * this.options.grepFileTimeoutMs;
    for await (const [shown, realRel, stat] of files()) {
      if (stat.size > this.limits.maxFileBytes) continue;
      const text = await this.readTextQuietly({ realRoot: rp.realRoot, realRel, rel: shown, stat });
      if (text === undefined) continue;
      const lines = text.endsWith('\n') ? text.slice(0, -1) : text;
      const hits = await this.matchLines(re, lines, limit - matches.length + 1, shown, deadline);
      if (hits === undefined || (hits.length > 0 && matches.length === limit)) {
        truncated = true;
        break;
      }
      if (hits.length === 0) continue;
      touched.push({ path: realRel, access: 'read' });
      const all = lines.split('\n');
      for (const i of hits) {
        if (matches.length === limit) {
          truncated = true;
          break;
        }
        matches.push(`${shown}:${i + 1}:${all[i].replace(/\r$/, '').slice(0, GREP_TEXT_CHARS)}`);
      }
      if (truncated) break;
    }
    return { output: { matches, truncated: truncated || state.partial }, touched };
  }

  /** The length cap limits the surface; the per-file timeout in `matchLines` bounds a backtracking pattern. */
  private compileRegex(pattern: unknown, ignoreCase: boolean): RegExp {
    const max = this.options.maxRegexLength;
    if (typeof pattern !== 'string' || pattern === '' || pattern.length > max) {
      throw new FileOpError(
        'INVALID_PATTERN',
        `pattern must be a regular expression of 1 to ${max} characters`,
        {
          field: 'pattern',
        },
      );
    }
    try {
      return new RegExp(pattern, ignoreCase ? 'i' : '');
    } catch (err) {
      throw new FileOpError(
        'INVALID_PATTERN',
        `pattern is not a valid regular expression: ${(err as Error).message}`,
        {
          field: 'pattern',
        },
      );
    }
  }

  /**
   * Indices of matching lines, at most `max`; undefined once the grep's overall deadline has passed.
   * Matched in a worker thread with a timeout (`GrepMatcher`): a backtracking pattern such as `(a+)+$` on a long line
   * costs this grep one timeout, and never holds the event loop every other request needs.
   */
  private async matchLines(
    re: RegExp,
    text: string,
    max: number,
    shown: string,
    deadline: number,
  ): Promise<number[] | undefined> {
    const perFile = this.options.grepFileTimeoutMs;
    const timeout = Math.min(perFile, deadline - Date.now());
    if (timeout <= 0) return undefined;
    const hits = await this.matcher.match(re, text, max, timeout);
    if (hits !== 'timeout') return hits;
    if (timeout < perFile) return undefined; // the overall budget ran out, not this file's
    throw new FileOpError(
      'INVALID_PATTERN',
      `pattern took over ${perFile} ms on ${shown} (catastrophic backtracking?); simplify it`,
      { field: 'pattern' },
    );
  }

  /** Text of a file for grep, or undefined for anything it should skip (binary, hardlinked, swapped…). */
  private async readTextQuietly(ref: FileRef): Promise<string | undefined> {
    try {
      return await this.withExistingFile(ref, 'path', C.O_RDONLY, async ({ fd, st }) =>
        st.size > this.limits.maxFileBytes ? undefined : decodeText(await readFdUpTo(fd, st.size)),
      );
    } catch (err) {
      if (err instanceof FileOpError || err instanceof PathRejectedError) return undefined;
      throw err;
    }
  }

  private async directory(ws: string, p: unknown): Promise<RealPath> {
    const rp = await this.guard(ws, p ?? '', 'path', { allowEmpty: true });
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel || '.'} does not exist`, { path: rp.rel });
    if (!rp.stat.isDirectory()) {
      throw new FileOpError('ENOTDIR', `${rp.rel} is not a directory; use stat or read`, { path: rp.rel });
    }
    return rp;
  }

  // ---------------------------------------------------------------- stat / mkdir / move / delete

  private async stat(ws: string, op: StatOp): Promise<FileOpOutcome> {
    const rp = await this.guard(ws, op.path, 'path', { followFinal: false });
    const st = rp.stat;
    if (!st) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
    const type = entryType(st);
    return {
      output: {
        path: rp.rel,
        type,
        size: type === 'dir' ? 0 : st.size,
        mtime: st.mtime.toISOString(),
        mode: (st.mode & 0o7777).toString(8).padStart(4, '0'),
      },
      touched: [],
    };
  }

  private async mkdir(ws: string, op: MkdirOp): Promise<FileOpOutcome> {
    const rp = await this.guard(ws, op.path, 'path');
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
  private async move(ws: string, op: MoveOp): Promise<FileOpOutcome> {
    const from = await this.guard(ws, op.path, 'path', { rejectRoot: true, followFinal: false });
    const to = await this.guard(ws, op.to, 'to', { rejectRoot: true, followFinal: false });
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
  private async delete(ws: string, op: DeleteOp): Promise<FileOpOutcome> {
    const rp = await this.guard(ws, op.path, 'path', { rejectRoot: true, followFinal: false });
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

// ------------------------------------------------------------------ helpers

/**
 * New entries take their permission bits and (when the engine is root) their owner from the workspace
 * root (`st`, its lstat), so whatever `WorkspaceManager.create` arranged for the sandbox uid holds for
 * API-made files too.
 */
function newEntryPolicy(st: Stats): Policy {
  const owner = process.getuid?.() === 0 ? { uid: st.uid, gid: st.gid } : undefined;
  return { dir: { mode: st.mode & 0o777, owner }, file: { mode: st.mode & 0o666, owner } };
}

/** An overwritten file keeps its mode (minus setuid/setgid) and, as root, its owner. */
function keepAs(st: Stats): CreateAs {
  return {
    mode: st.mode & 0o777,
    owner: process.getuid?.() === 0 ? { uid: st.uid, gid: st.gid } : undefined,
  };
}

/** Opens `name` in the pinned `dir` and checks it is a regular single-link file, closing it if not. */
function openPlainFile(dir: number, name: string, flags: number, rel: string, field = 'path'): OpenFile {
  const fd = openFileInSync(dir, name, flags, field, rel);
  try {
    return { fd, st: assertPlainFd(fd, field, rel) };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * Writes a temp file beside the target (O_EXCL, same directory so the rename stays on one filesystem)
 * then renames it over the target: readers see the old or the new content, never half. `exclusive` uses
 * link() instead, which fails with EEXIST if the target appeared meanwhile. Not fsync'ed: atomic against
 * concurrent readers, not against power loss, which is fine for a scratch workspace. `committed` runs
 * once the new content is in place.
 *
 * Everything is sync but the rename: on ext4 (auto_da_alloc) replacing a file by rename starts writeback
 * of the new one, ~200 µs of kernel work that may wait on the disk, so it runs in the threadpool, off the
 * event loop.
 */
async function atomicWrite(
  dir: number,
  name: string,
  data: Buffer,
  rel: string,
  exclusive: boolean,
  as: CreateAs,
  committed: () => void,
): Promise<void> {
  const tmp = `.switchyard-${randomBytes(8).toString('hex')}.tmp`;
  const fd = openFileInSync(dir, tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 'path', rel, 0o600);
  // After a rename the temp name is gone; in every other case it must be removed.
  let tmpLeft = true;
  try {
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
    committed();
    // Only now, through the fd: link() of a file the engine no longer owns needs CAP_FOWNER.
    applyOwnershipSync(fd, as);
  } finally {
    closeSync(fd);
    if (tmpLeft) unlinkQuietly(fdPath(dir, tmp));
  }
}

function unlinkQuietly(p: string): void {
  try {
    unlinkSync(p);
  } catch {
    // already gone
  }
}

function intOption(value: unknown, field: string, def: number, min: number, max: number): number {
  if (value === undefined) return def;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(field, `${field} must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** Parent of a root-relative path, `''` for the root itself. */
function parentOf(rel: string): string {
  const dir = path.posix.dirname(rel);
  return dir === '.' ? '' : dir;
}

function joinRel(base: string, rel: string): string {
  return base ? `${base}/${rel}` : rel;
}

function encodeCursor(rel: string): string {
  return Buffer.from(rel, 'utf8').toString('base64url');
}

function decodeCursor(cursor: unknown): string[] {
  const bad = () =>
    new FileOpError('INVALID_CURSOR', 'cursor is not one this API returned; list again without it');
  if (typeof cursor !== 'string' || cursor === '') throw bad();
  const rel = Buffer.from(cursor, 'base64url').toString('utf8');
  if (encodeCursor(rel) !== cursor || rel.includes('\0') || rel === '') throw bad();
  return rel.split('/');
}
