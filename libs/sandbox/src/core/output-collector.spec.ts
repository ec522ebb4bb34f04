import { OutputCollector, REDACTED } from './output-collector';
import { DEFAULT_SECRET_PATTERNS } from './sandbox.options';

const collect = (
  limits: { maxBytes: number; maxLines: number; redact?: RegExp[] },
  chunks: Array<string | Buffer>,
) => {
  const seen: string[] = [];
  const c = new OutputCollector(limits, (t) => seen.push(t));
  const accepted = chunks.map((ch) => c.push(typeof ch === 'string' ? Buffer.from(ch) : ch));
  return { text: c.text(), truncated: c.truncated, redacted: c.redacted, accepted, seen };
};

describe('OutputCollector', () => {
  it('keeps everything under the caps and streams it', () => {
    const r = collect({ maxBytes: 100, maxLines: 10 }, ['a\nb', '\nc\n']);
    expect(r).toMatchObject({
      text: 'a\nb\nc\n',
      truncated: false,
      accepted: [true, true],
      seen: ['a\nb', '\nc\n'],
    });
  });

  it('cuts at the byte cap and refuses the rest', () => {
    const r = collect({ maxBytes: 5, maxLines: 100 }, ['abc', 'defg', 'h']);
    expect(r).toMatchObject({ text: 'abcde', truncated: true, accepted: [true, false, false] });
  });

  it('is not truncated when output ends exactly at a cap', () => {
    expect(collect({ maxBytes: 4, maxLines: 100 }, ['ab', 'cd'])).toMatchObject({
      text: 'abcd',
      truncated: false,
    });
    expect(collect({ maxBytes: 100, maxLines: 2 }, ['a\n', 'b\n'])).toMatchObject({
      text: 'a\nb\n',
      truncated: false,
    });
  });

  it('cuts after the last allowed line', () => {
    expect(collect({ maxBytes: 100, maxLines: 2 }, ['a\nb\nc\nd'])).toMatchObject({
      text: 'a\nb\n',
      truncated: true,
    });
    expect(collect({ maxBytes: 100, maxLines: 2 }, ['a\nb\n', 'c'])).toMatchObject({
      text: 'a\nb\n',
      truncated: true,
      accepted: [true, false],
    });
  });

  it('decodes UTF-8 split across chunks', () => {
    const euro = Buffer.from('€'); // 3 bytes
    const r = collect({ maxBytes: 100, maxLines: 10 }, [
      euro.subarray(0, 1),
      euro.subarray(1, 2),
      euro.subarray(2),
    ]);
    expect(r.text).toBe('€');
    expect(r.seen.join('')).toBe('€');
  });

  it('drops a character cut by the byte cap instead of emitting garbage', () => {
    const r = collect({ maxBytes: 4, maxLines: 10 }, ['ab€']);
    expect(r).toMatchObject({ text: 'ab', truncated: true });
  });

  it('marks an incomplete trailing character of a complete stream', () => {
    expect(collect({ maxBytes: 100, maxLines: 10 }, [Buffer.from([0x61, 0xe2, 0x82])]).text).toBe('a\uFFFD');
  });

  it('never holds more than the cap', () => {
    const c = new OutputCollector({ maxBytes: 1 << 20, maxLines: 1e9 });
    const chunk = Buffer.alloc(64 * 1024, 0x78);
    for (let i = 0; i < 100; i++) c.push(chunk);
    expect(Buffer.byteLength(c.text())).toBe(1 << 20);
    expect(c.truncated).toBe(true);
  });

  describe('redaction', () => {
    const KEY = 'AKIAABCDEFGHIJKLMNOP';
    const limits = { maxBytes: 1000, maxLines: 100, redact: [...DEFAULT_SECRET_PATTERNS] };

    it('replaces secrets, also when a chunk boundary splits one', () => {
      const r = collect(limits, [`key=${KEY.slice(0, 7)}`, `${KEY.slice(7)} done\nnext line\n`]);
      expect(r.text).toBe(`key=${REDACTED} done\nnext line\n`);
      expect(r.seen.join('')).toBe(r.text);
      expect(r.text).not.toContain('AKIA');
    });

    it('holds back only the current line and flushes the rest at the end', () => {
      const r = collect(limits, ['line one\npartial ', 'ghp_' + 'a'.repeat(36)]);
      expect(r.seen).toEqual(['line one\n', `partial ${REDACTED}`]);
    });

    it('catches a secret inside a very long line without newlines', () => {
      const filler = 'x'.repeat(5000);
      const r = collect({ ...limits, maxBytes: 100_000 }, [
        filler,
        ` ${KEY.slice(0, 10)}`,
        `${KEY.slice(10)} `,
        filler,
      ]);
      expect(r.text).toBe(`${filler} ${REDACTED} ${filler}`);
    });

    it('redacts before truncating, so a cut never shows half a secret', () => {
      const r = collect({ ...limits, maxBytes: 10 }, [`ab ${KEY}\n`]);
      expect(r.truncated).toBe(true);
      expect(r.text).toBe(`ab ${REDACTED}`.slice(0, 10));
      expect(r.text).not.toMatch(/AKIA/);
    });

    it('says whether it redacted anything', () => {
      expect(collect(limits, [`x ${KEY}\n`]).redacted).toBe(true);
      expect(collect(limits, ['plain\n']).redacted).toBe(false);
    });

    it('redacts a whole private key block, however many chunks and lines it spans', () => {
      const body = Array.from({ length: 30 }, (_, i) => `MIIEvQIBADANBgkqhkiG9w0BAQEFAASC${i}`).join('\n');
      const pem = `-----BEGIN RSA PRIVATE KEY-----\n${body}\n-----END RSA PRIVATE KEY-----`;
      const chunks = [`before\n${pem.slice(0, 100)}`, pem.slice(100, 700), `${pem.slice(700)}\nafter\n`];
      const r = collect({ ...limits, maxBytes: 100_000 }, chunks);
      expect(r.text).not.toContain('MIIEvQ');
      expect(r.text.startsWith(`before\n${REDACTED}`)).toBe(true);
      expect(r.text.endsWith('\nafter\n')).toBe(true);
      expect(r.seen.join('')).toBe(r.text);
    });

    it('redacts bearer tokens and the values of *_TOKEN / *_SECRET / *PASSWORD assignments', () => {
      const r = collect(limits, [
        'Authorization: Bearer abcdefghijklmnop1234567890\nGH_TOKEN=s3cr3t-value-1 DB_PASSWORD: "hunter2hunter2"\n',
      ]);
      expect(r.text).toBe(`Authorization: ${REDACTED}\nGH_TOKEN=${REDACTED} DB_PASSWORD: "${REDACTED}"\n`);
    });

    it('redacts in time linear in the text: long blank runs cost no more than other text', () => {
      // Each pattern runs over 256 KiB of blank characters (the quadratic look-behind took minutes here).
      const blanks = `${'\n \t'.repeat(87_382)}API_TOKEN = abcdef123456\n`;
      const started = performance.now();
      const r = collect({ ...limits, maxBytes: 1 << 20, maxLines: 1 << 20 }, [blanks]);
      expect(performance.now() - started).toBeLessThan(100);
      expect(r.text.endsWith(`API_TOKEN = ${REDACTED}\n`)).toBe(true);
    });

    it('leaves ordinary output alone', () => {
      const text = 'risk-assessment task-1234567890abcdefghijkl sk-short AKIA123\n';
      expect(collect(limits, [text]).text).toBe(text);
    });
  });
});
