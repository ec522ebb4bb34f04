import { constants as C } from 'node:fs';
import { InvalidInputError } from '@switchyard/common';
import type { FileOpOutcome, ReadOp, StatOp } from '../file-op.types';
import { decodeText, fdReader, lineWindow, readFdUpTo, streamLineWindow } from '../file-content';
import { entryType } from '../workspace-fs';
import { FileOpError, formatBytes } from '../workspace.errors';
import type { WorkspaceOptions } from '../workspace.options';
import { withExistingFile } from './open-file';
import { intOption } from './op-options';
import type { OpPaths } from './op-paths';

const DEFAULT_READ_LINES = 2000;

/**
 * The file API's reads of one entry: `read` (a file's content, as a line window of text or whole as base64)
 * and `stat` (what an entry is, never following it).
 */
export class FileReads {
  constructor(
    private readonly options: WorkspaceOptions,
    private readonly paths: OpPaths,
  ) {}

  async read(ws: string, op: ReadOp): Promise<FileOpOutcome> {
    const offset = intOption(op.offset, 'offset', 1, 1, Number.MAX_SAFE_INTEGER);
    const limit = intOption(op.limit, 'limit', DEFAULT_READ_LINES, 1, 1_000_000);
    const rp = await this.paths.resolve(ws, op.path, 'path', { rejectRoot: true });
    const cap = this.options.limits.maxFileBytes;
    const base64 = readEncoding(op);
    const output = await withExistingFile(rp, 'path', C.O_RDONLY, async ({ fd, st }) => {
      if (base64) {
        if (st.size > cap) {
          throw new FileOpError(
            'FILE_TOO_LARGE',
            `${rp.rel} is ${formatBytes(st.size)}, over the ${formatBytes(cap)} cap for reads as base64; download it from files/content`,
            { path: rp.rel, size: st.size, cap },
          );
        }
        const buf = await readFdUpTo(fd, st.size);
        return {
          path: rp.rel,
          encoding: 'base64',
          content: buf.toString('base64'),
          size: buf.length,
          truncated: false,
        };
      }
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

  async stat(ws: string, op: StatOp): Promise<FileOpOutcome> {
    const rp = await this.paths.resolve(ws, op.path, 'path', { followFinal: false });
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
}

/** Whether a read asks for the whole file as base64 (which has no line window: offset and limit do not apply). */
function readEncoding(op: ReadOp): boolean {
  if (op.encoding === undefined || op.encoding === 'utf8') return false;
  if (op.encoding !== 'base64') throw new InvalidInputError('encoding', 'encoding must be utf8 or base64');
  // Bytes have no lines: offset and limit (validated like any read's) do not apply.
  return true;
}
