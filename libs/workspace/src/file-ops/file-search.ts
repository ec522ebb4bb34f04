import { constants as C, type Stats } from 'node:fs';
import * as path from 'node:path';
import type { FileOpOutcome, GrepOp } from '../file-op.types';
import { decodeText, readFdUpTo } from '../file-content';
import { compileGlob, type GlobMatcher } from '../glob';
import { GrepMatcher } from '../grep-matcher';
import { walk, type WalkState } from '../workspace-fs';
import { FileOpError, PathRejectedError } from '../workspace.errors';
import type { WorkspaceOptions } from '../workspace.options';
import { type FileRef, withExistingFile } from './open-file';
import { intOption, MAX_RESULT_LIMIT } from './op-options';
import { joinRel, type OpPaths, rootSkips } from './op-paths';

const DEFAULT_GREP_LIMIT = 200;
const GREP_TEXT_CHARS = 500;

/**
 * The file API's content search, `grep`: a regular expression over the text files under a path (binary,
 * hardlinked and over-cap files skipped), matched in a worker thread under a per-file and an overall
 * timeout. Owns that worker: `close` when done.
 */
export class FileSearch {
  private readonly matcher = new GrepMatcher();

  constructor(
    private readonly options: WorkspaceOptions,
    private readonly paths: OpPaths,
  ) {}

  async close(): Promise<void> {
    await this.matcher.close();
  }

  async grep(ws: string, op: GrepOp): Promise<FileOpOutcome> {
    const re = this.compileRegex(op.pattern, op.ignoreCase === true);
    // Like ripgrep: a glob without `/` filters on the file name at any depth.
    let filter: ((rel: string) => boolean) | undefined;
    if (op.glob !== undefined) {
      const m: GlobMatcher = compileGlob(op.glob, 'glob');
      filter = op.glob.includes('/') ? m : (rel) => m(path.posix.basename(rel));
    }
    const limit = intOption(op.limit, 'limit', DEFAULT_GREP_LIMIT, 1, MAX_RESULT_LIMIT);
    const rp = await this.paths.resolve(ws, op.path ?? '', 'path', { allowEmpty: true });
    if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel || '.'} does not exist`, { path: rp.rel });

    // Files to search: [shown path, real path relative to the root, lstat].
    const state: WalkState = { scanned: 0, partial: false };
    const maxEntries = this.options.maxScanEntries;
    const files = async function* (): AsyncGenerator<[string, string, Stats]> {
      if (!rp.stat!.isDirectory()) {
        yield [rp.rel, rp.realRel, rp.stat!];
        return;
      }
      for await (const e of walk(
        rp.real,
        { recursive: true, maxEntries, skipTop: rootSkips(rp.rel) },
        state,
      )) {
        if (e.type === 'file' && (!filter || filter(e.rel))) {
          yield [joinRel(rp.rel, e.rel), joinRel(rp.realRel, e.rel), e.stat];
        }
      }
    };

    const matches: string[] = [];
    const touched: FileOpOutcome['touched'] = [];
    let truncated = false;
    // Matching time for the whole grep: each file may use the per-file timeout, all together ten times it.
    const deadline = Date.now() + 10 * this.options.grepFileTimeoutMs;
    for await (const [shown, realRel, stat] of files()) {
      if (stat.size > this.options.limits.maxFileBytes) continue;
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
      return await withExistingFile(ref, 'path', C.O_RDONLY, async ({ fd, st }) =>
        st.size > this.options.limits.maxFileBytes ? undefined : decodeText(await readFdUpTo(fd, st.size)),
      );
    } catch (err) {
      if (err instanceof FileOpError || err instanceof PathRejectedError) return undefined;
      throw err;
    }
  }
}
