import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { InvalidInputError } from '@switchyard/common';
import { expectFileOpError, failure, useFileOpsFixture } from './file-ops.testing';

/** `read` and `stat` (`FileReads`), through `FileOperations.execute`. */
describe('FileOperations: reads', () => {
  const f = useFileOpsFixture();
  const { run, put } = f;

  describe('read', () => {
    it('returns a line window with totals, 1-based', async () => {
      await put('a.txt', 'one\ntwo\nthree\nfour\n');
      const all = await run({ op: 'read', path: 'a.txt' });
      expect(all.output).toEqual({
        path: 'a.txt',
        encoding: 'utf8',
        content: 'one\ntwo\nthree\nfour\n',
        totalLines: 4,
        offset: 1,
        lines: 4,
        truncated: false,
      });
      expect(all.touched).toEqual([{ path: 'a.txt', access: 'read' }]);
      const part = await run({ op: 'read', path: 'a.txt', offset: 2, limit: 2 });
      expect(part.output).toMatchObject({
        content: 'two\nthree\n',
        totalLines: 4,
        offset: 2,
        lines: 2,
        truncated: true,
      });
    });

    it('handles a last line without newline, empty files and offsets past the end', async () => {
      await put('b.txt', 'x\ny');
      expect((await run({ op: 'read', path: 'b.txt', offset: 2 })).output).toMatchObject({
        content: 'y',
        totalLines: 2,
        lines: 1,
        truncated: false,
      });
      expect((await run({ op: 'read', path: 'b.txt', offset: 9 })).output).toMatchObject({
        content: '',
        lines: 0,
      });
      await put('empty', '');
      expect((await run({ op: 'read', path: 'empty' })).output).toMatchObject({ content: '', totalLines: 0 });
    });

    it('returns binary files (NUL byte or invalid UTF-8) as base64', async () => {
      const bin = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]);
      await put('img.png', bin);
      const out = (await run({ op: 'read', path: 'img.png' })).output;
      expect(out).toEqual({
        path: 'img.png',
        encoding: 'base64',
        content: bin.toString('base64'),
        size: 6,
        truncated: false,
      });
      await put('latin1.txt', Buffer.from([0x63, 0x61, 0x66, 0xe9]));
      expect((await run({ op: 'read', path: 'latin1.txt' })).output).toMatchObject({ encoding: 'base64' });
    });

    it('refuses files over the cap unless a window is asked for, then streams it', async () => {
      f.configure({ limits: { maxFileBytes: 1024 } });
      const lines = Array.from({ length: 300 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
      await put('big.txt', lines);
      const err = await expectFileOpError(run({ op: 'read', path: 'big.txt' }), 'FILE_TOO_LARGE');
      expect(err.message).toMatch(/over the 1 KiB read cap; use offset\/limit/);
      expect(err.errorClass).toBe('limit');
      expect(err.kind).toBe('payload_too_large');
      const out = (await run({ op: 'read', path: 'big.txt', offset: 100, limit: 3 })).output;
      expect(out).toMatchObject({
        content: 'line 100\nline 101\nline 102\n',
        totalLines: 300,
        lines: 3,
        truncated: true,
      });
      // A window wider than the cap is cut at the cap.
      const wide = (await run({ op: 'read', path: 'big.txt', offset: 1, limit: 300 })).output;
      expect(Buffer.byteLength(wide.content as string)).toBe(1024);
      expect(wide.truncated).toBe(true);
    });

    it('refuses a binary file over the cap even with a window', async () => {
      f.configure({ limits: { maxFileBytes: 16 } });
      await put('blob', Buffer.alloc(100));
      await expectFileOpError(run({ op: 'read', path: 'blob', offset: 1 }), 'FILE_TOO_LARGE');
    });

    it('reports missing files, directories and bad windows', async () => {
      await expectFileOpError(run({ op: 'read', path: 'nope.txt' }), 'ENOENT');
      await fs.mkdir(path.join(f.ws, 'd'));
      await expectFileOpError(run({ op: 'read', path: 'd' }), 'EISDIR');
      await put('f', 'x');
      await expectFileOpError(run({ op: 'read', path: 'f/g' }), 'ENOTDIR');
      const err = await failure(run({ op: 'read', path: 'f', offset: 0 }));
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe('offset');
    });

    it('refuses FIFOs without blocking', async () => {
      const { execFileSync } = await import('node:child_process');
      execFileSync('mkfifo', [path.join(f.ws, 'pipe')]);
      await expectFileOpError(run({ op: 'read', path: 'pipe' }), 'NOT_REGULAR_FILE');
    });
  });

  describe('stat', () => {
    it('describes files, directories and links (not their targets)', async () => {
      await put('f.txt', 'abc');
      await fs.chmod(path.join(f.ws, 'f.txt'), 0o640);
      await fs.symlink('/etc/passwd', path.join(f.ws, 'out'));
      const file = (await run({ op: 'stat', path: 'f.txt' })).output;
      expect(file).toMatchObject({ path: 'f.txt', type: 'file', size: 3, mode: '0640' });
      expect(new Date(file.mtime as string).getTime()).toBeGreaterThan(0);
      expect((await run({ op: 'stat', path: '.' })).output).toMatchObject({ path: '', type: 'dir' });
      expect((await run({ op: 'stat', path: 'out' })).output).toMatchObject({ type: 'symlink', size: 11 });
      await expectFileOpError(run({ op: 'stat', path: 'nope' }), 'ENOENT');
    });
  });
});
