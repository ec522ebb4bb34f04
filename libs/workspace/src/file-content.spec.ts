import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { countOccurrences, decodeText, lineWindow, streamLineWindow } from './file-content';

describe('file-content', () => {
  it('tells text from binary, keeping a BOM', () => {
    expect(decodeText(Buffer.from('\uFEFFhé\n'))).toBe('\uFEFFhé\n');
    expect(decodeText(Buffer.from([0x61, 0x00]))).toBeUndefined();
    expect(decodeText(Buffer.from([0xc3]))).toBeUndefined();
  });

  it('cuts line windows with their own line endings', () => {
    expect(lineWindow('a\r\nb\nc', 2, 5)).toEqual({
      content: 'b\nc',
      totalLines: 3,
      offset: 2,
      lines: 2,
      truncated: false,
    });
    expect(lineWindow('a\n\n\n', 2, 1)).toEqual({
      content: '\n',
      totalLines: 3,
      offset: 2,
      lines: 1,
      truncated: true,
    });
  });

  it('counts non-overlapping occurrences', () => {
    expect(countOccurrences('aaaa', 'aa')).toBe(2);
    expect(countOccurrences('abc', 'x')).toBe(0);
  });

  describe('streamLineWindow', () => {
    let tmp: string;
    beforeEach(async () => {
      tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'sy-content-'));
    });
    afterEach(() => fs.rm(tmp, { recursive: true, force: true }));

    const stream = async (content: string, offset: number, limit: number, cap: number) => {
      const file = path.join(tmp, 'f');
      await fs.writeFile(file, content);
      const h = await fs.open(file);
      try {
        return await streamLineWindow(h, Buffer.byteLength(content), offset, limit, cap, 'f');
      } finally {
        await h.close();
      }
    };

    it('agrees with lineWindow across chunk boundaries, with and without a final newline', async () => {
      // Lines of 1000 bytes straddle the 64 KiB chunks.
      const text = Array.from({ length: 200 }, (_, i) => `${i}`.padEnd(999, '.')).join('\n');
      for (const t of [text, `${text}\n`]) {
        for (const [offset, limit] of [
          [1, 3],
          [65, 2],
          [199, 5],
          [300, 1],
        ]) {
          expect(await stream(t, offset, limit, 1 << 20)).toEqual(lineWindow(t, offset, limit));
        }
      }
    });

    it('keeps at most cap bytes and says so', async () => {
      const out = await stream('abcdef\nghij\n', 1, 10, 4);
      expect(out).toEqual({ content: 'abcd', totalLines: 2, offset: 1, lines: 1, truncated: true });
    });
  });
});
