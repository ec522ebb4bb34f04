import { PassThrough, Readable, Writable } from 'node:stream';
import { checkedOutput, CommandGoneError, frameHeader, pumpFramed, readLine } from './pod-transfer-streams';

/** A stdin that keeps what it is given, and reports itself full after every write until drained by hand. */
function stdinSink(): { stdin: Writable; written: () => Buffer; drain: () => void } {
  const parts: Buffer[] = [];
  let pending: (() => void) | undefined;
  const stdin = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _enc, callback) {
      parts.push(chunk);
      pending = callback;
    },
  });
  return {
    stdin,
    written: () => Buffer.concat(parts),
    drain: () => {
      const cb = pending;
      pending = undefined;
      cb?.();
    },
  };
}

/** The frames of an upload, decoded: the pieces, and whether the last (empty) frame came. */
function unframe(bytes: Buffer): { data: Buffer; ended: boolean } {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < bytes.length) {
    const n = bytes.readUInt32BE(at);
    at += 4;
    if (n === 0) return { data: Buffer.concat(parts), ended: at === bytes.length };
    parts.push(bytes.subarray(at, at + n));
    at += n;
  }
  return { data: Buffer.concat(parts), ended: false };
}

describe('pod transfer streams', () => {
  it('frames an upload, holding the body while stdin is full, and ends with the empty frame', async () => {
    const sink = stdinSink();
    const body = new PassThrough();
    const pumping = pumpFramed(body, sink.stdin);
    body.write(Buffer.from('abc'));
    body.write(Buffer.alloc(0));
    body.end(Buffer.from('defg'));
    // Nothing moves past the first write until the pod takes it: the body is paused, not buffered here.
    await new Promise((resolve) => setImmediate(resolve));
    expect(body.isPaused()).toBe(true);
    const drainer = setInterval(sink.drain, 1);
    await pumping;
    await new Promise((resolve) => sink.stdin.once('finish', resolve));
    clearInterval(drainer);
    expect(frameHeader(3)).toEqual(Buffer.from([0, 0, 0, 3]));
    expect(unframe(sink.written())).toEqual({ data: Buffer.from('abcdefg'), ended: true });
  });

  it('leaves out the last frame when the body fails, so the pod drops the upload, and throws its error', async () => {
    const parts: Buffer[] = [];
    const stdin = new PassThrough();
    stdin.on('data', (c: Buffer) => parts.push(c));
    const body = new PassThrough();
    const pumping = pumpFramed(body, stdin);
    body.write(Buffer.from('half'));
    setImmediate(() => body.destroy(new Error('client gone')));
    await expect(pumping).rejects.toThrow('client gone');
    expect(stdin.writableEnded).toBe(true);
    expect(unframe(Buffer.concat(parts))).toEqual({ data: Buffer.from('half'), ended: false });
    expect(body.destroyed).toBe(true);
  });

  it('stops when the command goes away first, without destroying the body', async () => {
    const stdin = new PassThrough();
    const body = new PassThrough();
    const pumping = pumpFramed(body, stdin);
    stdin.destroy();
    await expect(pumping).rejects.toBeInstanceOf(CommandGoneError);
    expect(body.destroyed).toBe(false);
  });

  it('reads the first line and leaves what follows it in the stream', async () => {
    const s = Readable.from([Buffer.from('{"ok":'), Buffer.from('true}\nBYT'), Buffer.from('ES')]);
    expect(await readLine(s)).toBe('{"ok":true}');
    const rest: Buffer[] = [];
    for await (const c of s) rest.push(c as Buffer);
    expect(Buffer.concat(rest).toString()).toBe('BYTES');
    expect(await readLine(Readable.from([Buffer.from('no newline')]))).toBeUndefined();
    await expect(readLine(Readable.from([Buffer.alloc(100, 0x61)]), 10)).rejects.toThrow(
      'no line within 10 bytes',
    );
  });

  it('ends a download only when the command ended well with every byte, else fails it', async () => {
    const read = async (chunks: string[], verdict: string | undefined, expectedBytes?: number) => {
      const out = checkedOutput(Readable.from(chunks.map((c) => Buffer.from(c))), {
        verdict: Promise.resolve(verdict),
        ...(expectedBytes !== undefined && { expectedBytes }),
        abandon: () => undefined,
      });
      let text = '';
      for await (const c of out) text += (c as Buffer).toString();
      return text;
    };
    expect(await read(['ab', 'cd'], undefined, 4)).toBe('abcd');
    expect(await read(['ab', 'cd'], undefined)).toBe('abcd');
    await expect(read(['ab'], undefined, 4)).rejects.toThrow('2 bytes came of 4');
    await expect(read(['ab'], 'exited 2: boom')).rejects.toThrow('exited 2: boom');
  });

  it('drops the connection when the reader abandons the download', async () => {
    let abandoned = 0;
    const source = new PassThrough();
    const out = checkedOutput(source, {
      verdict: new Promise(() => undefined),
      abandon: () => abandoned++,
    });
    source.write(Buffer.from('x'));
    out.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(abandoned).toBe(1);
  });
});
