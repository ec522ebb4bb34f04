import type { ProcessLogEntry } from './stateful.types';

/**
 * The output of one background process, kept in a bounded log (the oldest chunks go first), so `logs` can answer
 * the tail or everything after a seq the caller has already seen.
 */
export class ProcessLog {
  private readonly entries: ProcessLogEntry[] = [];
  private bytes = 0;
  private nextSeq = 1;
  /** Entries dropped from the front to stay within the bound. */
  private dropped = 0;

  constructor(private readonly maxBytes: number) {}

  /** Appends a chunk; answers the entry made. */
  append(stream: ProcessLogEntry['stream'], text: string): ProcessLogEntry {
    const entry = { seq: this.nextSeq++, stream, text };
    this.entries.push(entry);
    this.bytes += Buffer.byteLength(text);
    while (this.bytes > this.maxBytes && this.entries.length > 1) {
      const old = this.entries.shift()!;
      this.bytes -= Buffer.byteLength(old.text);
      this.dropped++;
    }
    return entry;
  }

  /** The chunks after `sinceSeq`, or the last `tail` of them; `dropped` says how many older ones are gone. */
  read(options: { tail?: number; sinceSeq?: number } = {}): {
    entries: ProcessLogEntry[];
    nextSeq: number;
    dropped: number;
  } {
    let entries = this.entries;
    if (options.sinceSeq !== undefined) entries = entries.filter((e) => e.seq > options.sinceSeq!);
    if (options.tail !== undefined) entries = entries.slice(-options.tail);
    return { entries: [...entries], nextSeq: this.nextSeq, dropped: this.dropped };
  }
}
