/** How far past a cut the ring looks for a line start, so a replay begins on a fresh line when it can. */
const LINE_SEARCH_BYTES = 4096;

/**
 * The last `maxBytes` of a terminal's output, replayed to a client that attaches (or comes back) so its screen shows
 * what happened before it. Chunks are kept as they came and the oldest are dropped (or cut) first, so appending costs
 * no copy of what is kept. A cut starts the replay at the next line when one begins soon after it, else at the next
 * UTF-8 character, so the first thing a client draws is not half a character or the tail of a line.
 */
export class TerminalScrollback {
  private chunks: Buffer[] = [];
  /** Index of the oldest chunk kept: dropping from the front moves it, and the array is compacted now and then. */
  private head = 0;
  private bytes = 0;
  /** Bytes dropped from the front since the terminal opened. */
  private droppedBytes = 0;

  constructor(readonly maxBytes: number) {
    if (!Number.isInteger(maxBytes) || maxBytes < 1)
      throw new RangeError('maxBytes must be a positive integer');
  }

  get size(): number {
    return this.bytes;
  }

  get dropped(): number {
    return this.droppedBytes;
  }

  append(data: Buffer): void {
    if (data.length === 0) return;
    // A chunk larger than the whole ring: only its end can be kept.
    const chunk = data.length > this.maxBytes ? data.subarray(data.length - this.maxBytes) : data;
    this.droppedBytes += data.length - chunk.length;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) this.trim(this.bytes - this.maxBytes);
  }

  /** Everything kept, oldest first, as one buffer (a copy: later appends do not change it). */
  snapshot(): Buffer {
    return Buffer.concat(this.head === 0 ? this.chunks : this.chunks.slice(this.head), this.bytes);
  }

  /** Drops everything (the terminal ended and nobody can attach again). */
  clear(): void {
    this.droppedBytes += this.bytes;
    this.chunks = [];
    this.head = 0;
    this.bytes = 0;
  }

  /** Drops at least `excess` bytes from the front, then up to a line or character start. */
  private trim(excess: number): void {
    let drop = excess;
    while (this.head < this.chunks.length && drop >= this.chunks[this.head].length) {
      drop -= this.chunks[this.head].length;
      this.remove(this.chunks[this.head++].length);
    }
    if (this.head < this.chunks.length) {
      const first = this.chunks[this.head];
      const cut = startAfter(first, drop);
      this.chunks[this.head] = first.subarray(cut);
      this.remove(cut);
      if (this.chunks[this.head].length === 0) this.head++;
    }
    // Keystroke echoes come a byte or two at a time: the dropped front is sliced off once it is half the array.
    if (this.head > 1024 && this.head * 2 > this.chunks.length) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
  }

  private remove(n: number): void {
    this.bytes -= n;
    this.droppedBytes += n;
  }
}

/** The offset, at or after `from`, where a replay of `buf` may start: after a newline soon after, else a character. */
function startAfter(buf: Buffer, from: number): number {
  const newline = buf.indexOf(0x0a, from);
  if (newline !== -1 && newline - from < LINE_SEARCH_BYTES) return newline + 1;
  let at = from;
  // UTF-8 continuation bytes are 10xxxxxx: skip them so the replay starts on a character's first byte.
  while (at < buf.length && (buf[at] & 0xc0) === 0x80) at++;
  return at;
}
