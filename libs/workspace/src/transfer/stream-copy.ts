import { createHash } from 'node:crypto';
import { write, writev } from 'node:fs';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { toFileOpError } from '../fs-errors';
import { FileOpError, formatBytes } from '../workspace.errors';

const writeAsync = promisify(write);
const writevAsync = promisify(writev);

/**
 * Chunks are gathered up to this many bytes and written with one `writev`: an HTTP body arrives in 16–64 KiB pieces,
 * and a threadpool trip per piece would cost more than the copy. Memory per transfer stays at about this much.
 */
const BATCH_BYTES = 1024 * 1024;

/**
 * How many more bytes a transfer may put in the workspace: the workspace cap less what it held when the transfer
 * began (the loop-mounted image's ENOSPC is the hard stop behind it, and catches transfers running side by side).
 */
export class ByteBudget {
  private used = 0;

  constructor(
    private readonly remaining: number,
    private readonly cap: number,
    private readonly rel: string,
  ) {}

  get taken(): number {
    return this.used;
  }

  take(n: number): void {
    this.used += n;
    if (this.used > this.remaining) {
      throw new FileOpError(
        'WORKSPACE_FULL',
        `${this.rel || '.'}: the upload passed the workspace's ${formatBytes(this.cap)} cap after ${formatBytes(this.used)}; delete files first`,
        { path: this.rel, cap: this.cap },
      );
    }
  }
}

/** The chunks of a body without destroying it when the reader stops early: the HTTP edge may still answer on it. */
export function chunksOf(body: Readable): AsyncIterable<Buffer> {
  // Streams of other implementations (tar-stream's entries) have no `iterator`: they are read to their end anyway.
  if (typeof body.iterator !== 'function') return body as AsyncIterable<Buffer>;
  return { [Symbol.asyncIterator]: () => body.iterator({ destroyOnReturn: false }) } as AsyncIterable<Buffer>;
}

/**
 * Writes every chunk of `source` at the start of the fresh file `fd`, counting them against `budget` before they are
 * written and hashing them (sha256). Disk errors come as `FileOpError`s (ENOSPC: `WORKSPACE_FULL`); an error of the
 * source (a client that went away) comes as it is.
 */
export async function copyToFd(
  fd: number,
  source: AsyncIterable<Buffer>,
  budget: ByteBudget,
  rel: string,
): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  let batch: Buffer[] = [];
  let batched = 0;
  // One write in flight while the next batch arrives and is hashed: the disk and the hash overlap.
  // Settles, never rejects (a rejection nobody awaits yet would be unhandled): a failure is kept and thrown here.
  let writing: Promise<void> = Promise.resolve();
  let failure: Error | undefined;
  const settle = async () => {
    await writing;
    if (failure !== undefined) throw failure;
  };
  const flush = async () => {
    await settle();
    if (batched === 0) return;
    const parts = batch;
    const length = batched;
    batch = [];
    batched = 0;
    writing = writeAllAt(fd, parts, length, size - length).catch((err: unknown) => {
      failure = toFileOpError(err, rel) as Error;
    });
  };
  try {
    for await (const chunk of source) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (buf.length === 0) continue;
      budget.take(buf.length);
      hash.update(buf);
      batch.push(buf);
      batched += buf.length;
      size += buf.length;
      if (batched >= BATCH_BYTES) await flush();
    }
    await flush();
    await settle();
  } finally {
    // Never leave a write running on an fd the caller is about to close.
    await writing;
  }
  return { size, sha256: hash.digest('hex') };
}

/** `writev` of `parts` at `position`, finishing a short write with plain writes. */
async function writeAllAt(fd: number, parts: Buffer[], length: number, position: number): Promise<void> {
  let done = (await writevAsync(fd, parts, position)).bytesWritten;
  if (done === length) return;
  const rest = Buffer.concat(parts).subarray(done);
  for (let off = 0; off < rest.length;) {
    const { bytesWritten } = await writeAsync(fd, rest, off, rest.length - off, position + done);
    off += bytesWritten;
    done += bytesWritten;
  }
}
