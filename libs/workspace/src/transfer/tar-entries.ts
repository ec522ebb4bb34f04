import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { SwitchyardError } from '@switchyard/common';
import { extract, type Headers } from 'tar-stream';
import { FileOpError } from '../workspace.errors';

/** gzip's magic bytes: a body starting with them is gunzipped on its way to the tar reader. */
const GZIP_MAGIC = [0x1f, 0x8b];

/**
 * Reads a tar (or a gzip-compressed tar, told by its magic bytes, not by a header) from `chunks` as they arrive and
 * hands each entry to `onEntry` in turn; the next entry waits until `onEntry` settles, so the body is read no faster
 * than entries are written. A refusal thrown by `onEntry` stops the read and is thrown as it is; a malformed archive
 * is `ARCHIVE_INVALID`; an error of `chunks` themselves (a client gone) is thrown as it is.
 */
export async function readTarEntries(
  chunks: AsyncIterable<Buffer>,
  onEntry: (header: Headers, content: Readable) => Promise<void>,
): Promise<void> {
  const ex = extract();
  let fail!: (err: unknown) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined); // raced below; never left unhandled
  ex.on('error', (err: unknown) => fail(invalid(err)));
  const finished = new Promise<void>((resolve) => ex.on('finish', resolve));
  let current: Promise<void> | undefined;
  ex.on('entry', (header: Headers, content: Readable, next: (err?: unknown) => void) => {
    current = onEntry(header, content);
    current.then(
      () => next(),
      (err: unknown) => {
        // Settled here, not through the reader's 'error': a reader its entry already destroyed emits none.
        fail(err);
        content.resume();
        ex.destroy();
      },
    );
  });

  let target: Writable = ex;
  let head: Buffer | undefined = Buffer.alloc(0);
  const feed = async (buf: Buffer) => {
    if (!target.write(buf)) await Promise.race([once(target, 'drain'), failed]);
  };
  try {
    for await (const chunk of chunks) {
      if (head === undefined) {
        await feed(chunk);
        continue;
      }
      // Enough bytes to tell gzip from tar (a body may arrive a byte at a time).
      head = Buffer.concat([head, chunk]);
      if (head.length < GZIP_MAGIC.length) continue;
      if (head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1]) target = gunzipInto(ex);
      const first = head;
      head = undefined;
      await feed(first);
    }
    if (head !== undefined && head.length > 0) await feed(head);
    target.end();
    await Promise.race([finished, failed]);
  } catch (err) {
    // Whatever stopped the read, the entry being written stops too (its content closes early) and is let finish its
    // cleanup before the caller cleans up after the archive.
    ex.destroy();
    await current?.catch(() => undefined);
    throw err;
  }
}

function gunzipInto(ex: Writable): Writable {
  const gunzip = createGunzip();
  gunzip.on('error', (err) => ex.destroy(err));
  gunzip.pipe(ex);
  return gunzip;
}

function invalid(err: unknown): unknown {
  if (err instanceof SwitchyardError) return err;
  const why = err instanceof Error ? err.message : String(err);
  return new FileOpError(
    'ARCHIVE_INVALID',
    `the body is not a readable tar (or gzip-compressed tar): ${why}`,
    {
      field: 'body',
    },
  );
}
