import type { FileOpOutcome, FindOp, ListOp } from '../file-op.types';
import { compileGlob } from '../glob';
import { walk, type WalkState } from '../workspace-fs';
import { FileOpError } from '../workspace.errors';
import type { WorkspaceOptions } from '../workspace.options';
import { intOption, MAX_RESULT_LIMIT } from './op-options';
import { joinRel, type OpPaths, rootSkips } from './op-paths';

const DEFAULT_LIST_LIMIT = 1000;

/**
 * The file API's walks over names: `list` (a directory, paged with an opaque cursor) and `find` (paths
 * matching a glob). Neither follows links nor reads content; both stop at the configured scan cap.
 */
export class FileListing {
  constructor(
    private readonly options: WorkspaceOptions,
    private readonly paths: OpPaths,
  ) {}

  async list(ws: string, op: ListOp): Promise<FileOpOutcome> {
    const limit = intOption(op.limit, 'limit', DEFAULT_LIST_LIMIT, 1, MAX_RESULT_LIMIT);
    const after = op.cursor === undefined ? undefined : decodeCursor(op.cursor);
    const rp = await this.paths.directory(ws, op.path);
    const state: WalkState = { scanned: 0, partial: false };
    const entries: { path: string; type: string; size: number }[] = [];
    let last: string | undefined;
    let more = false;
    const opts = {
      recursive: op.recursive === true,
      maxEntries: this.options.maxScanEntries,
      after,
      skipTop: rootSkips(rp.rel),
    };
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

  async find(ws: string, op: FindOp): Promise<FileOpOutcome> {
    const match = compileGlob(op.pattern, 'pattern');
    const limit = intOption(op.limit, 'limit', DEFAULT_LIST_LIMIT, 1, MAX_RESULT_LIMIT);
    const rp = await this.paths.directory(ws, op.path);
    const state: WalkState = { scanned: 0, partial: false };
    const paths: string[] = [];
    let truncated = false;
    for await (const e of walk(
      rp.real,
      { recursive: true, maxEntries: this.options.maxScanEntries, skipTop: rootSkips(rp.rel) },
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
