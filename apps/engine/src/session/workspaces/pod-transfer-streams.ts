import { PassThrough, type Readable, type Writable } from 'node:stream';

/**
 * The engine's side of the byte streams the file transfer program in a session pod speaks over an exec
 * (libs/workspace/src/pod/file-transfer.py): uploads go in as frames, so the program can tell an upload that ended
 * from one whose client went away; downloads come out behind one line of JSON, so every refusal is known before any
 * byte flows. No buffering beyond the streams' own: a GiB goes through in the memory of a few chunks.
 */

/** A zero-length frame: the upload is whole. */
const LAST_FRAME = Buffer.alloc(4);
/** A frame's length is 32 bits; a larger chunk goes out in pieces. */
const MAX_FRAME_BYTES = 2 ** 31;

/** The 4-byte big-endian length that goes before `bytes` bytes of upload. */
export function frameHeader(bytes: number): Buffer {
  const header = Buffer.allocUnsafe(4);
  header.writeUInt32BE(bytes);
  return header;
}

/** The command went away before it took the whole upload (it refused it: its answer says why). */
export class CommandGoneError extends Error {}

/**
 * Copies `body` into `stdin` as frames, waiting whenever `stdin` is full (so a slow pod slows the client down), then
 * writes the last frame. When `body` fails (the client went away), `stdin` is ended without the last frame, so the
 * program drops what it received, and the body's error is thrown. When `stdin` closes first, `CommandGoneError`.
 * The body is never destroyed here: whoever owns it answers the client.
 */
export function pumpFramed(body: Readable, stdin: Writable): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onBodyError);
      body.off('close', onBodyClose);
      stdin.off('drain', onDrain);
      stdin.off('close', onGone);
      stdin.off('error', onGone);
      if (err) reject(err);
      else resolve();
    };
    const onData = (chunk: Buffer) => {
      let full = false;
      for (let at = 0; at < chunk.length; at += MAX_FRAME_BYTES) {
        const piece = chunk.subarray(at, at + MAX_FRAME_BYTES);
        // One write per frame: a 4-byte write of its own would be a message of its own on the way to the pod.
        full = !stdin.write(Buffer.concat([frameHeader(piece.length), piece])) || full;
      }
      if (full) body.pause();
    };
    const onDrain = () => {
      if (!settled) body.resume();
    };
    const onEnd = () => {
      stdin.end(LAST_FRAME);
      finish();
    };
    const onBodyError = (err: Error) => {
      stdin.end();
      finish(err);
    };
    const onBodyClose = () => {
      if (body.readableEnded) return;
      stdin.end();
      finish(new Error('the upload was cut off before its end'));
    };
    const onGone = () => {
      body.pause();
      finish(new CommandGoneError('the program in the pod stopped reading the upload'));
    };
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onBodyError);
    body.once('close', onBodyClose);
    stdin.on('drain', onDrain);
    stdin.once('close', onGone);
    stdin.once('error', onGone);
    if (stdin.destroyed) onGone();
    else body.resume();
  });
}

/**
 * Reads `stream` up to its first newline and gives that line back; the bytes after it are put back at the front of
 * the stream. `undefined` when the stream ended first. A line over `maxBytes` is an error (the program only ever
 * writes short ones).
 */
export function readLine(stream: Readable, maxBytes = 64 * 1024): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let length = 0;
    const done = (err: Error | undefined, line?: string) => {
      stream.off('readable', onReadable);
      stream.off('end', onEnd);
      stream.off('error', onError);
      if (err) reject(err);
      else resolve(line);
    };
    const onReadable = () => {
      let chunk: Buffer | null;
      while ((chunk = stream.read() as Buffer | null) !== null) {
        const nl = chunk.indexOf(0x0a);
        if (nl === -1) {
          parts.push(chunk);
          length += chunk.length;
          if (length > maxBytes) return done(new Error(`no line within ${maxBytes} bytes`));
          continue;
        }
        parts.push(chunk.subarray(0, nl));
        const rest = chunk.subarray(nl + 1);
        stream.off('readable', onReadable);
        if (rest.length > 0) stream.unshift(rest);
        return done(undefined, Buffer.concat(parts).toString('utf8'));
      }
    };
    const onEnd = () => done(undefined, undefined);
    const onError = (err: Error) => done(err);
    stream.on('readable', onReadable);
    stream.once('end', onEnd);
    stream.once('error', onError);
  });
}

/** Everything a stream carries, up to `maxBytes` (the rest is dropped: a bounded tail of diagnostics). */
export function collect(stream: Readable, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let kept = 0;
    stream.on('data', (chunk: Buffer) => {
      if (kept >= maxBytes) return;
      parts.push(chunk.subarray(0, maxBytes - kept));
      kept += Math.min(chunk.length, maxBytes - kept);
    });
    const done = () => resolve(Buffer.concat(parts));
    stream.once('end', done);
    stream.once('close', done);
    stream.once('error', done);
  });
}

/** What a download's end must look like for its bytes to be whole. */
export interface OutputCheck {
  /** Resolves with why the command failed, or `undefined` when it ended well. */
  verdict: Promise<string | undefined>;
  /** Exactly this many bytes must come (a file's range); absent: whatever the command wrote (a tar). */
  expectedBytes?: number;
  /** The consumer stopped early (destroyed the stream): drop the connection. */
  abandon(): void;
}

/**
 * `source` (the command's stdout) passed on with backpressure, ending well only once the command did and the byte
 * count matches: a download cut short (the pod died, the file shrank) fails the stream instead of ending it, so the
 * client sees a broken transfer rather than a short file.
 */
export function checkedOutput(source: Readable, check: OutputCheck): Readable {
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  let bytes = 0;
  let ended = false;
  source.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (!out.write(chunk)) source.pause();
  });
  out.on('drain', () => source.resume());
  source.once('end', () => {
    void check.verdict.then(
      (failed) => {
        ended = true;
        if (failed !== undefined) out.destroy(new Error(failed));
        else if (check.expectedBytes !== undefined && bytes !== check.expectedBytes)
          out.destroy(new Error(`${bytes} bytes came of ${check.expectedBytes}: the file changed meanwhile`));
        else out.end();
      },
      (err: unknown) => {
        ended = true;
        out.destroy(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
  source.once('error', (err) => out.destroy(err));
  out.once('close', () => {
    if (!ended || !out.writableFinished) check.abandon();
  });
  return out;
}
