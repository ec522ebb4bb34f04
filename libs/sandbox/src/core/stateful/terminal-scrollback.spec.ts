import { TerminalScrollback } from './terminal-scrollback';

const text = (s: TerminalScrollback): string => s.snapshot().toString('utf8');

describe('TerminalScrollback', () => {
  it('keeps everything while under its bound, in order', () => {
    const s = new TerminalScrollback(64);
    s.append(Buffer.from('$ echo hi\r\n'));
    s.append(Buffer.from('hi\r\n$ '));
    expect(text(s)).toBe('$ echo hi\r\nhi\r\n$ ');
    expect(s.size).toBe(17);
    expect(s.dropped).toBe(0);
  });

  it('never holds more than its bound, however much comes', () => {
    const s = new TerminalScrollback(1000);
    for (let i = 0; i < 10_000; i++) s.append(Buffer.from(`line ${i}\n`));
    expect(s.size).toBeLessThanOrEqual(1000);
    expect(text(s).endsWith('line 9999\n')).toBe(true);
    expect(s.size + s.dropped).toBe(Array.from({ length: 10_000 }, (_, i) => `line ${i}\n`).join('').length);
  });

  it('starts the replay at a line after a cut', () => {
    const s = new TerminalScrollback(20);
    s.append(Buffer.from('aaaaaaaaaa\nbbbbbbbbb\n'));
    s.append(Buffer.from('cccc\n'));
    // 26 bytes: 6 must go; the cut falls inside the first line, so the replay starts at the second.
    expect(text(s)).toBe('bbbbbbbbb\ncccc\n');
  });

  it('keeps only the end of one chunk bigger than the whole ring', () => {
    const s = new TerminalScrollback(8);
    s.append(Buffer.from('0123456789abcdef'));
    expect(text(s)).toBe('89abcdef');
    expect(s.dropped).toBe(8);
  });

  it('never starts inside a UTF-8 character when no line starts near the cut', () => {
    const s = new TerminalScrollback(7);
    // "é" is two bytes (c3 a9): keeping the last 7 of "aéééé" would start on a continuation byte.
    s.append(Buffer.from('aéééé', 'utf8'));
    s.append(Buffer.from('x'));
    const kept = s.snapshot();
    expect(kept[0] & 0xc0).not.toBe(0x80);
    expect(kept.toString('utf8')).toBe('éééx');
  });

  it('a snapshot is a copy, and clear drops everything', () => {
    const s = new TerminalScrollback(16);
    s.append(Buffer.from('abc'));
    const snap = s.snapshot();
    s.append(Buffer.from('def'));
    expect(snap.toString()).toBe('abc');
    s.clear();
    expect(s.size).toBe(0);
    expect(text(s)).toBe('');
    expect(s.dropped).toBe(6);
  });

  it('refuses a bound that is not a positive integer', () => {
    expect(() => new TerminalScrollback(0)).toThrow(RangeError);
    expect(() => new TerminalScrollback(1.5)).toThrow(RangeError);
  });
});
