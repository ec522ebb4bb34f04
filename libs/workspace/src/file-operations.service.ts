import { randomBytes } from 'node:crypto';
import { constants as C, type Stats } from 'node:fs';
import { type FileHandle, link, lstat, readdir, rename, unlink } from 'node:fs/promises';
import * as path from 'node:path';
import * as vm from 'node:vm';
import { Inject, Injectable } from '@nestjs/common';
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
import { countOccurrences, decodeText, lineWindow, readUpTo, streamLineWindow } from './file-content';
import { compileGlob, type GlobMatcher } from './glob';
import {
  applyOwnership,
  assertPlainFile,
  assertProcFd,
  type CreateAs,
  errno,
  fdPath,
  openDirInside,
  openFileIn,
  type RealPath,
  realPathInside,
  toFileOpError,
} from './path-guard';
import { diskUsage, entryType, removeEntry, walk, type WalkState } from './workspace-fs';
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
 */
@Injectable()
export class FileOperations {
  constructor(@Inject(WORKSPACE_OPTIONS) private readonly options: WorkspaceOptions) {
    assertProcFd();
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
    const output = await this.withExistingFile(rp, 'path', C.O_RDONLY, async (h, st) => {
      if (st.size <= cap) {
        const buf = await readUpTo(h, st.size);
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
        ...(await streamLineWindow(h, st.size, offset, limit, cap, rp.rel)),
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
    if (existing) {
      // Regular and single-link, or refused (EISDIR, NOT_REGULAR_FILE, PATH_HARDLINK), whatever the mode.
      await this.withExistingFile(rp, 'path', C.O_RDONLY, async () => undefined);
      if (mode === 'create') {
        throw new FileOpError('EEXIST', `${rp.rel} already exists; use mode overwrite or append`, {
          path: rp.rel,
        });
      }
    }
    const oldSize = existing?.size ?? 0;
    const newSize = mode === 'append' ? oldSize + data.length : data.length;
    await this.checkCaps(rp, newSize, oldSize);

    const policy = await newEntryPolicy(rp.realRoot);
    const dir = await openDirInside(rp.realRoot, parentOf(rp.realRel), 'path', policy.dir);
    const name = path.basename(rp.real);
    try {
      if (mode === 'append' && existing) {
        const h = await openFileIn(dir, name, C.O_WRONLY | C.O_APPEND, 'path', rp.rel);
        try {
          const st = await assertPlainFile(h, 'path', rp.rel);
          // The file we vetted must be the one we opened; a replacement could be far bigger.
          if (st.ino !== existing.ino) {
            throw new FileOpError('ENOENT', `${rp.rel} was replaced while writing; retry`, { path: rp.rel });
          }
          await h.writeFile(data);
        } finally {
          await h.close();
        }
      } else {
        await atomicWrite(
          dir,
          name,
          data,
          rp.rel,
          mode === 'create',
          existing ? keepAs(existing) : policy.file,
        );
      }
    } finally {
      await dir.close();
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
    const { text, st } = await this.withExistingFile(rp, 'path', C.O_RDONLY, async (h, st) => {
      if (st.size > cap) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `${rp.rel} is ${formatBytes(st.size)}, over the ${formatBytes(cap)} cap for edits; edit it from code`,
          { path: rp.rel, size: st.size, cap },
        );
      }
      return { text: decodeText(await readUpTo(h, st.size)), st };
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
    await this.checkCaps(rp, data.length, st.size);
    const dir = await openDirInside(rp.realRoot, parentOf(rp.realRel), 'path');
    try {
      await atomicWrite(dir, path.basename(rp.real), data, rp.rel, false, keepAs(st));
    } finally {
      await dir.close();
    }
    return {
      output: { path: rp.rel, replacements: count },
      touched: [
        { path: rp.realRel, access: 'read' },
        { path: rp.realRel, access: 'write' },
      ],
    };
  }

  /** Per-file cap, then the workspace cap on what the workspace would hold after the write. */
  private async checkCaps(rp: RealPath, newSize: number, replacedSize: number): Promise<void> {
    const { maxFileBytes, maxWorkspaceBytes } = this.limits;
    if (newSize > maxFileBytes) {
      throw new FileOpError(
        'FILE_TOO_LARGE',
        `${rp.rel} would be ${formatBytes(newSize)}, over the ${formatBytes(maxFileBytes)} file cap; split the content across files`,
        { path: rp.rel, size: newSize, cap: maxFileBytes },
      );
    }
    // A walk capped at maxScanEntries gives a lower bound; huge trees are the sandbox's quota to police.
    const { bytes } = await diskUsage(rp.realRoot, this.options.maxScanEntries);
    const after = bytes - replacedSize + newSize;
    if (after > maxWorkspaceBytes) {
      throw new FileOpError(
        'WORKSPACE_FULL',
        `the workspace would hold ${formatBytes(after)}, over its ${formatBytes(maxWorkspaceBytes)} cap; delete files first`,
        { path: rp.rel, usage: bytes, cap: maxWorkspaceBytes },
      );
    }
  }

  /** Opens an existing regular, single-link file through its pinned parent and runs `fn` on it. */
  private async withExistingFile<T>(
    rp: FileRef,
    field: string,
    flags: number,
    fn: (h: FileHandle, st: Stats) => Promise<T>,
  ): Promise<T> {
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
    if (rp.stat.isDirectory()) throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
    const dir = await openDirInside(rp.realRoot, parentOf(rp.realRel), field);
    try {
      const h = await openFileIn(dir, path.basename(rp.realRel), flags, field, rp.rel);
      try {
        return await fn(h, await assertPlainFile(h, field, rp.rel));
      } finally {
        await h.close();
      }
    } finally {
      await dir.close();
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

    const ctx = vm.createContext({});
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
      const hits = this.matchLines(ctx, re, lines, limit - matches.length + 1, shown, deadline);
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

  /** The length cap limits the surface; the per-file timeout in `matchLines` is what stops ReDoS. */
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
   * Runs in a vm context with a timeout: V8 interrupts a backtracking regex there, so `(a+)+$` on a long
   * line costs one timeout, not a frozen engine.
   */
  private matchLines(
    ctx: vm.Context,
    re: RegExp,
    text: string,
    max: number,
    shown: string,
    deadline: number,
  ): number[] | undefined {
    const perFile = this.options.grepFileTimeoutMs;
    const timeout = Math.min(perFile, deadline - Date.now());
    if (timeout <= 0) return undefined;
    Object.assign(ctx, { re, text, max });
    try {
      return [...(MATCH_SCRIPT.runInContext(ctx, { timeout }) as number[])];
    } catch (err) {
      if (errno(err) === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
        if (timeout < perFile) return undefined; // the overall budget ran out, not this file's

        throw new FileOpError(
          'INVALID_PATTERN',
          `pattern took over ${this.options.grepFileTimeoutMs} ms on ${shown} (catastrophic backtracking?); simplify it`,
          { field: 'pattern' },
        );
      }
      throw err;
    } finally {
      Object.assign(ctx, { re: undefined, text: undefined });
    }
  }

  /** Text of a file for grep, or undefined for anything it should skip (binary, hardlinked, swapped…). */
  private async readTextQuietly(ref: FileRef): Promise<string | undefined> {
    try {
      return await this.withExistingFile(ref, 'path', C.O_RDONLY, async (h, st) =>
        st.size > this.limits.maxFileBytes ? undefined : decodeText(await readUpTo(h, st.size)),
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
    const policy = await newEntryPolicy(rp.realRoot);
    await (await openDirInside(rp.realRoot, rp.realRel, 'path', policy.dir)).close();
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
    const policy = await newEntryPolicy(from.realRoot);
    const src = await openDirInside(from.realRoot, parentOf(from.realRel), 'path');
    try {
      const dst = await openDirInside(to.realRoot, parentOf(to.realRel), 'to', policy.dir);
      try {
        await rename(fdPath(src, path.basename(from.real)), fdPath(dst, path.basename(to.real)));
      } catch (err) {
        if (errno(err) === 'EINVAL')
          throw new FileOpError('INVALID_MOVE', `cannot move ${from.rel} to ${to.rel}`);
        throw toFileOpError(err, to.rel);
      } finally {
        await dst.close();
      }
    } finally {
      await src.close();
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
    const dir = await openDirInside(rp.realRoot, parentOf(rp.realRel), 'path');
    try {
      if (!rp.stat.isDirectory()) {
        await unlink(fdPath(dir, name));
      } else if (op.recursive === true) {
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
      await dir.close();
    }
    return { output: { path: rp.rel, deleted: true }, touched: [{ path: rp.realRel, access: 'write' }] };
  }
}

// ------------------------------------------------------------------ helpers

const MATCH_SCRIPT = new vm.Script(`(function () {
  const out = [];
  let start = 0;
  for (let i = 0; start <= text.length && out.length < max; i++) {
    let end = text.indexOf('\\n', start);
    if (end === -1) end = text.length;
    if (re.test(text.slice(start, end))) out.push(i);
    start = end + 1;
  }
  return out;
})()`);

/**
 * New entries take their permission bits and (when the engine is root) their owner from the workspace
 * root, so whatever `WorkspaceManager.create` arranged for the sandbox uid holds for API-made files too.
 */
async function newEntryPolicy(realRoot: string): Promise<Policy> {
  const st = await lstat(realRoot);
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

/**
 * Writes a temp file beside the target (O_EXCL, same directory so the rename stays on one filesystem)
 * then renames it over the target: readers see the old or the new content, never half. `exclusive` uses
 * link() instead, which fails with EEXIST if the target appeared meanwhile. Not fsync'ed: atomic against
 * concurrent readers, not against power loss, which is fine for a scratch workspace.
 */
async function atomicWrite(
  dir: FileHandle,
  name: string,
  data: Buffer,
  rel: string,
  exclusive: boolean,
  as: CreateAs,
): Promise<void> {
  const tmp = `.switchyard-${randomBytes(8).toString('hex')}.tmp`;
  const h = await openFileIn(dir, tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 'path', rel, 0o600);
  try {
    await h.writeFile(data);
    if (exclusive) {
      await link(fdPath(dir, tmp), fdPath(dir, name)).catch((err: unknown) => {
        throw errno(err) === 'EEXIST'
          ? new FileOpError('EEXIST', `${rel} already exists`, { path: rel })
          : err;
      });
    } else {
      await rename(fdPath(dir, tmp), fdPath(dir, name));
    }
    // Only now, through the fd: link() of a file the engine no longer owns needs CAP_FOWNER.
    await applyOwnership(h, as);
  } finally {
    await h.close();
    await unlink(fdPath(dir, tmp)).catch(() => undefined);
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
