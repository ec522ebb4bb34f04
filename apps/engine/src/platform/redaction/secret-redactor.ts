import { REDACTED } from '@switchyard/sandbox';

const KEY_BLOCK = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g;

/**
 * Replaces secrets in whatever the engine is about to send out (file and browser outputs, error messages, log
 * fields, input views): the same patterns the sandbox tiers apply to stdout/stderr as it streams, plus whole private
 * key blocks. Code output is redacted earlier, in the tiers, before its caps.
 */
export class SecretRedactor {
  private readonly patterns: RegExp[];

  constructor(patterns: readonly RegExp[]) {
    // Whole key blocks first: the header pattern among `patterns` would otherwise hide where a block starts.
    this.patterns = [KEY_BLOCK, ...patterns.map((p) => (p.global ? p : new RegExp(p.source, `${p.flags}g`)))];
  }

  text(s: string): { text: string; redacted: boolean } {
    let out = s;
    for (const re of this.patterns) out = out.replace(re, REDACTED);
    return { text: out, redacted: out !== s };
  }

  /** Deep copy of `value` with every string redacted. */
  value<T>(value: T): { value: T; redacted: boolean } {
    let redacted = false;
    const walk = (v: unknown): unknown => {
      if (typeof v === 'string') {
        const r = this.text(v);
        redacted ||= r.redacted;
        return r.text;
      }
      if (Array.isArray(v)) return v.map(walk);
      if (v && typeof v === 'object')
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
      return v;
    };
    return { value: walk(value) as T, redacted };
  }
}
