import { StringDecoder } from 'node:string_decoder';
import type { OutputLimits } from './sandbox.types';

export const REDACTED = '***REDACTED***';
const KEY_BEGIN = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/g;
const KEY_END = /-----END [A-Z0-9 ]*PRIVATE KEY-----/g;
/** A partial line is held back (for redaction) up to this many characters… */
const HOLD_CHARS = 4096;
/** …then flushed except for this tail, so a secret up to this long is still caught inside one huge line. */
const OVERLAP_CHARS = 512;

/**
 * Decodes one output stream safely across chunk boundaries (UTF-8) and replaces secrets by {@link REDACTED},
 * holding back the current partial line (up to a bound) so a secret split across chunks is still caught. Used by
 * every run's `OutputCollector`, and on its own for background processes' logs, which have no caps.
 */
export class RedactingDecoder {
  private readonly decoder = new StringDecoder('utf8');
  private readonly redact: readonly RegExp[];
  /** Decoded text not yet redacted: the current partial line. */
  private pending = '';
  /** Inside a private key block whose END line has not come yet: everything is secret until it does. */
  private inKeyBlock = false;
  /** True once anything was replaced by {@link REDACTED}. */
  redacted = false;

  constructor(redact: readonly RegExp[] = []) {
    this.redact = redact.map((re) => (re.global ? re : new RegExp(re.source, `${re.flags}g`)));
  }

  /** Text of `chunk` that is safe to emit now (possibly empty: a partial line waits). */
  write(chunk: Buffer): string {
    return this.release(this.decoder.write(chunk), false);
  }

  /** The rest: a trailing partial character as U+FFFD, and whatever was held back. */
  end(): string {
    const rest = this.release(this.decoder.end(), true);
    this.pending = '';
    return rest;
  }

  /** Drops what is held back (the stream was cut). */
  discard(): void {
    this.pending = '';
  }

  /** Redacted text that is safe to emit; holds back what a secret could still be continuing in. */
  private release(text: string, final: boolean): string {
    if (this.redact.length === 0) return text;
    this.pending += text;
    let cut = this.pending.length;
    if (!final) {
      cut = this.pending.lastIndexOf('\n') + 1;
      if (cut === 0) {
        if (this.pending.length <= HOLD_CHARS) return '';
        cut = this.pending.length - OVERLAP_CHARS;
      }
    }
    let spans = this.secretSpans();
    // A secret crossing the cut waits, whole, for the next round.
    for (const [start, end] of spans) if (start < cut && end > cut) cut = start;
    const blocks = this.keyBlockSpans(cut);
    if (blocks.length > 0) spans = merge([...spans.filter(([, end]) => end <= cut), ...blocks]);
    if (spans.some(([, end]) => end <= cut)) this.redacted = true;
    let out = '';
    let at = 0;
    for (const [start, end] of spans) {
      if (end > cut) break;
      out += `${this.pending.slice(at, start)}${REDACTED}`;
      at = end;
    }
    out += this.pending.slice(at, cut);
    this.pending = this.pending.slice(cut);
    return out;
  }

  /** Matches of every pattern in `pending`, merged into sorted, disjoint spans. */
  private secretSpans(): Array<[number, number]> {
    const spans: Array<[number, number]> = [];
    for (const re of this.redact) {
      for (const m of this.pending.matchAll(re)) {
        if (m[0].length > 0) spans.push([m.index, m.index + m[0].length]);
      }
    }
    return merge(spans);
  }

  /**
   * Private key blocks span many lines, longer than any hold-back: from a BEGIN line everything up to the END line
   * is secret, across as many releases as it takes.
   */
  private keyBlockSpans(cut: number): Array<[number, number]> {
    const spans: Array<[number, number]> = [];
    let at = 0;
    while (at < cut) {
      let start = at;
      if (!this.inKeyBlock) {
        KEY_BEGIN.lastIndex = at;
        const begin = KEY_BEGIN.exec(this.pending);
        if (!begin || begin.index >= cut) break;
        start = begin.index;
        this.inKeyBlock = true;
      }
      KEY_END.lastIndex = start;
      const end = KEY_END.exec(this.pending);
      if (end && end.index + end[0].length <= cut) {
        spans.push([start, end.index + end[0].length]);
        this.inKeyBlock = false;
        at = end.index + end[0].length;
      } else {
        if (cut > start) spans.push([start, cut]);
        break;
      }
    }
    return spans;
  }
}

/**
 * One output stream of a run: a {@link RedactingDecoder}, then at most `maxBytes` and `maxLines` kept. Redaction
 * happens before the caps, so a cut can never leave half a secret visible. Anything past the caps is dropped on
 * arrival: memory stays bounded whatever the child writes. Every tier uses two, through its runs' `RunSupervisor`.
 */
export class OutputCollector {
  private readonly stream: RedactingDecoder;
  private readonly parts: string[] = [];
  private bytes = 0;
  private lines = 0;
  truncated = false;

  constructor(
    private readonly limits: OutputLimits,
    private readonly onText?: (text: string) => void,
  ) {
    this.stream = new RedactingDecoder(limits.redact);
  }

  /** True once anything was replaced by {@link REDACTED}. */
  get redacted(): boolean {
    return this.stream.redacted;
  }

  /** Takes a chunk; returns false once the stream went past a cap (the rest of the stream is unwanted). */
  push(chunk: Buffer): boolean {
    if (this.truncated) return false;
    this.keep(this.stream.write(chunk));
    return !this.truncated;
  }

  /** Everything kept. A complete stream flushes a trailing partial character as U+FFFD; a cut one drops it. */
  text(): string {
    if (!this.truncated) this.keep(this.stream.end());
    else this.stream.discard();
    return this.parts.join('');
  }

  /** Applies the byte and line caps to emitted text. */
  private keep(text: string): void {
    if (text.length === 0 || this.truncated) return;
    const buf = Buffer.from(text, 'utf8');
    let end = Math.min(buf.length, this.limits.maxBytes - this.bytes);
    // Text that starts after the last allowed line is over the line cap right away.
    if (this.lines >= this.limits.maxLines) end = 0;
    for (let i = buf.indexOf(0x0a); i !== -1 && i < end; i = buf.indexOf(0x0a, i + 1)) {
      if (++this.lines === this.limits.maxLines) {
        end = i + 1;
        break;
      }
    }
    if (end < buf.length) {
      this.truncated = true;
      // Never split a UTF-8 sequence: back up to the start of the character.
      while (end > 0 && (buf[end] & 0xc0) === 0x80) end--;
    }
    if (end === 0) return;
    this.bytes += end;
    const kept = end === buf.length ? text : buf.subarray(0, end).toString('utf8');
    this.parts.push(kept);
    this.onText?.(kept);
  }
}

/** Sorted, disjoint spans. */
function merge(spans: Array<[number, number]>): Array<[number, number]> {
  const sorted = [...spans].sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const span of sorted) {
    const last = merged.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push([span[0], span[1]]);
  }
  return merged;
}
