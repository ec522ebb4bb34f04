import { read, readSync, write, writeSync } from 'node:fs';
import { promisify } from 'node:util';
import { InvalidInputError } from '@switchyard/common';
import { FileOpError, formatBytes } from './workspace.errors';

/** Reading and writing file content for the file API: bounded reads, text detection, line windows. */

const CHUNK = 64 * 1024;

/**
 * Content up to this size is read and written with the sync fs calls: for a few KiB the copy takes a few
 * µs, less than the threadpool round trip an async call costs (40-80 µs). Larger content goes through the
 * threadpool so a 1 MiB file does not hold the event loop.
 */
export const SYNC_IO_BYTES = 64 * 1024;

/** Positional reads: what a `FileHandle` offers, and what `fdReader` gives a raw fd. */
export interface ReadAt {
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
}

const readAsync = promisify(read);
const writeAsync = promisify(write);

/** `ReadAt` over a raw fd (the caller keeps it open while reading). */
export function fdReader(fd: number): ReadAt {
  return { read: (buffer, offset, length, position) => readAsync(fd, buffer, offset, length, position) };
}

/** Reads at most `size` bytes from the start: a file that code keeps growing cannot make us read forever. */
export async function readUpTo(h: ReadAt, size: number): Promise<Buffer> {
  const buf = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const { bytesRead } = await h.read(buf, got, size - got, got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return buf.subarray(0, got);
}

/** `readUpTo` on a raw fd: sync up to `SYNC_IO_BYTES`, through the threadpool beyond. */
export async function readFdUpTo(fd: number, size: number): Promise<Buffer> {
  if (size > SYNC_IO_BYTES) return readUpTo(fdReader(fd), size);
  const buf = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const n = readSync(fd, buf, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}

/** Writes all of `data` at the fd's position: sync up to `SYNC_IO_BYTES`, through the threadpool beyond. */
export async function writeFdAll(fd: number, data: Buffer): Promise<void> {
  const sync = data.length <= SYNC_IO_BYTES;
  for (let done = 0; done < data.length;) {
    done += sync
      ? writeSync(fd, data, done, data.length - done)
      : (await writeAsync(fd, data, done, data.length - done)).bytesWritten;
  }
}

// ignoreBOM keeps a BOM in the text, so an edit writes it back instead of silently dropping it.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** UTF-8 text, or undefined for binary (a NUL byte or invalid UTF-8). */
export function decodeText(buf: Buffer): string | undefined {
  if (buf.includes(0)) return undefined;
  try {
    return UTF8.decode(buf);
  } catch {
    return undefined;
  }
}

export interface LineWindow {
  content: string;
  totalLines: number;
  offset: number;
  lines: number;
  truncated: boolean;
}

/** Lines `offset`…`offset+limit-1` (1-based) of `text`, with their line endings as in the file. */
export function lineWindow(text: string, offset: number, limit: number): LineWindow {
  const totalLines = text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  let start = 0;
  for (let line = 1; line < offset && start < text.length; line++) {
    const nl = text.indexOf('\n', start);
    start = nl === -1 ? text.length : nl + 1;
  }
  let end = start;
  let lines = 0;
  while (lines < limit && end < text.length) {
    const nl = text.indexOf('\n', end);
    end = nl === -1 ? text.length : nl + 1;
    lines++;
  }
  return { content: text.slice(start, end), totalLines, offset, lines, truncated: end < text.length };
}

/** `lineWindow` for files over the cap: streams, keeps at most `cap` bytes, still counts every line. */
export async function streamLineWindow(
  h: ReadAt,
  size: number,
  offset: number,
  limit: number,
  cap: number,
  rel: string,
): Promise<LineWindow> {
  const buf = Buffer.alloc(CHUNK);
  const parts: Buffer[] = [];
  let kept = 0;
  let cut = false;
  let line = 1;
  let lines = 0;
  let lastKeptLine = 0;
  let lastByte = 10;
  for (let pos = 0; pos < size;) {
    const { bytesRead } = await h.read(buf, 0, Math.min(CHUNK, size - pos), pos);
    if (bytesRead === 0) break;
    const chunk = buf.subarray(0, bytesRead);
    if (pos === 0 && chunk.includes(0)) {
      throw new FileOpError(
        'FILE_TOO_LARGE',
        `${rel} is a binary file of ${formatBytes(size)}, over the ${formatBytes(cap)} read cap; process it from code`,
        { path: rel, size, cap },
      );
    }
    for (let i = 0; i < chunk.length;) {
      const nl = chunk.indexOf(10, i);
      const stop = nl === -1 ? chunk.length : nl + 1;
      if (line >= offset && line < offset + limit && !cut) {
        const take = Math.min(stop - i, cap - kept);
        if (take > 0 && line !== lastKeptLine) {
          lines++;
          lastKeptLine = line;
        }
        parts.push(Buffer.from(chunk.subarray(i, i + take)));
        kept += take;
        cut = take < stop - i;
      }
      if (nl !== -1) line++;
      i = stop;
    }
    lastByte = chunk[chunk.length - 1];
    pos += bytesRead;
  }
  const totalLines = line - 1 + (size > 0 && lastByte !== 10 ? 1 : 0);
  return {
    content: Buffer.concat(parts).toString('utf8'),
    totalLines,
    offset,
    lines,
    truncated: cut || totalLines >= offset + limit,
  };
}

/** Strict base64 (the standard alphabet, padded): anything else is refused, never half-decoded. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The bytes a file op's `content` stands for: UTF-8 text, or base64 (`encoding: 'base64'`), checked strictly because
 * `Buffer.from(s, 'base64')` silently skips what it cannot read and would write something else than was meant.
 */
export function contentBytes(content: string, encoding: unknown): Buffer {
  if (encoding === undefined || encoding === 'utf8') return Buffer.from(content, 'utf8');
  if (encoding !== 'base64') throw new InvalidInputError('encoding', 'encoding must be utf8 or base64');
  if (!BASE64.test(content)) {
    throw new InvalidInputError(
      'content',
      'content is not valid base64 (standard alphabet A-Z a-z 0-9 + /, padded with =, no whitespace)',
    );
  }
  return Buffer.from(content, 'base64');
}

export function countOccurrences(text: string, find: string): number {
  let n = 0;
  for (let i = text.indexOf(find); i !== -1; i = text.indexOf(find, i + find.length)) n++;
  return n;
}
