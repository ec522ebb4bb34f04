import { closeSync, constants as C, createReadStream } from 'node:fs';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { InvalidInputError } from '@switchyard/common';
import { openDirInsideSync } from '../fd-opens';
import { openPlainFile } from '../file-ops/open-file';
import { parentOf } from '../file-ops/op-paths';
import { realPathInside } from '../path-guard';
import { FileOpError } from '../workspace.errors';
import type { ByteRange, FileReadStream } from './transfer.types';

/** Read-ahead of a download: large enough that a GiB takes few threadpool trips, small enough to stay flat. */
const READ_CHUNK = 1024 * 1024;

/**
 * Opens one file of the workspace `ws` for a streamed download: path-guarded like the file API (links followed only
 * inside, the final open through the pinned parent with O_NOFOLLOW, a regular single-link file or a refusal), then a
 * stream of `range` (the whole file without one). Every refusal comes before any byte flows.
 */
export async function openFileRead(
  ws: string,
  relPath: string,
  options: { maxPathLength: number; range?: ByteRange },
): Promise<FileReadStream> {
  const rp = await realPathInside(ws, relPath, 'path', {
    maxPathLength: options.maxPathLength,
    rejectRoot: true,
  });
  if (!rp.stat) throw new FileOpError('FILE_NOT_FOUND', `${rp.rel} does not exist`, { path: rp.rel });
  if (!rp.stat.isFile()) {
    throw new FileOpError('NOT_A_FILE', `${rp.rel} is not a regular file`, { path: rp.rel });
  }
  const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), 'path');
  let fd: number;
  let size: number;
  let mtimeMs: number;
  try {
    const file = openPlainFile(dir, path.basename(rp.realRel), C.O_RDONLY, rp.rel);
    ({ fd } = file);
    ({ size, mtimeMs } = file.st);
  } finally {
    closeSync(dir);
  }
  try {
    const { start, end } = rangeWithin(options.range, size, rp.rel);
    // The size is the one fstat saw: a file code keeps growing is sent as it was when opened.
    if (end < start) {
      closeSync(fd); // an empty file: nothing to read
      return { size, mtimeMs, start, end, stream: Readable.from([]) };
    }
    const stream = createReadStream('', { fd, start, end, autoClose: true, highWaterMark: READ_CHUNK });
    return { size, mtimeMs, start, end, stream };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/**
 * The inclusive bytes `range` asks for in a file of `size` bytes (RFC 9110 §14.1.2): an end past the file is cut to
 * it; a start at or past the end is unsatisfiable (`RANGE_NOT_SATISFIABLE`, with the size for `Content-Range`).
 */
export function rangeWithin(
  range: ByteRange | undefined,
  size: number,
  rel: string,
): { start: number; end: number } {
  if (!range) return { start: 0, end: size - 1 };
  const { start } = range;
  if (!Number.isSafeInteger(start) || start < 0)
    throw new InvalidInputError('range', 'range start must be ≥ 0');
  if (range.end !== undefined && (!Number.isSafeInteger(range.end) || range.end < start)) {
    throw new InvalidInputError('range', 'range end must be ≥ its start');
  }
  if (start >= size) {
    throw new FileOpError(
      'RANGE_NOT_SATISFIABLE',
      `range starts at byte ${start}, past the end of ${rel} (${size} bytes)`,
      { path: rel, size },
    );
  }
  return { start, end: Math.min(range.end ?? size - 1, size - 1) };
}
