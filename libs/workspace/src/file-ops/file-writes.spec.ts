import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { InvalidInputError } from '@switchyard/common';
import { expectFileOpError, expectRejected, failure, useFileOpsFixture } from './file-ops.testing';

/** `write` and `edit` (`FileWrites`), through `FileOperations.execute`. */
describe('FileOperations: writes', () => {
  const f = useFileOpsFixture();
  const { run, put, get } = f;

  describe('write', () => {
    it('creates files and parent directories, overwrites by default', async () => {
      const out = await run({ op: 'write', path: 'src/deep/x.py', content: 'print(1)\n' });
      expect(out.output).toEqual({ path: 'src/deep/x.py', bytesWritten: 9, size: 9, created: true });
      expect(out.touched).toEqual([{ path: 'src/deep/x.py', access: 'write' }]);
      await run({ op: 'write', path: 'src/deep/x.py', content: 'print(2)\n' });
      expect(await get('src/deep/x.py')).toBe('print(2)\n');
    });

    it('appends, and create fails with EEXIST', async () => {
      await run({ op: 'write', path: 'log', content: 'a\n', mode: 'create' });
      await run({ op: 'write', path: 'log', content: 'b\n', mode: 'append' });
      await run({ op: 'write', path: 'new-by-append', content: 'z', mode: 'append' });
      expect(await get('log')).toBe('a\nb\n');
      expect(await get('new-by-append')).toBe('z');
      const err = await expectFileOpError(
        run({ op: 'write', path: 'log', content: 'c', mode: 'create' }),
        'EEXIST',
      );
      expect(err.kind).toBe('conflict');
      expect(await get('log')).toBe('a\nb\n');
    });

    it('is atomic: no temp files left behind, mode of an existing file kept', async () => {
      await put('run.sh', 'echo hi\n');
      await fs.chmod(path.join(f.ws, 'run.sh'), 0o750);
      await run({ op: 'write', path: 'run.sh', content: 'echo bye\n' });
      expect((await fs.stat(path.join(f.ws, 'run.sh'))).mode & 0o777).toBe(0o750);
      expect(await fs.readdir(f.ws)).toEqual(['run.sh']);
    });

    it('gives new files the bits of the workspace root', async () => {
      await fs.chmod(f.ws, 0o750);
      await run({ op: 'write', path: 'n/new.txt', content: 'x' });
      expect((await fs.stat(path.join(f.ws, 'n/new.txt'))).mode & 0o777).toBe(0o640);
      expect((await fs.stat(path.join(f.ws, 'n'))).mode & 0o777).toBe(0o750);
    });

    it('enforces the per-file cap on what a write carries; an append grows the file past it', async () => {
      f.configure({ limits: { maxFileBytes: 10 } });
      const err = await expectFileOpError(
        run({ op: 'write', path: 'f', content: 'x'.repeat(11) }),
        'FILE_TOO_LARGE',
      );
      expect(err.message).toMatch(/over the 10 B file cap/);
      await run({ op: 'write', path: 'f', content: 'x'.repeat(6) });
      // Appends are bounded by the workspace cap (and quota), each one's content by the file cap.
      await run({ op: 'write', path: 'f', content: 'y'.repeat(5), mode: 'append' });
      await run({ op: 'write', path: 'f', content: 'z'.repeat(10), mode: 'append' });
      expect(await get('f')).toBe(`${'x'.repeat(6)}${'y'.repeat(5)}${'z'.repeat(10)}`);
      await expectFileOpError(
        run({ op: 'write', path: 'f', content: 'w'.repeat(11), mode: 'append' }),
        'FILE_TOO_LARGE',
      );
      expect((await get('f')).length).toBe(21);
    });

    it('decodes base64 content strictly, naming content when it is not base64', async () => {
      await run({
        op: 'write',
        path: 'b',
        content: Buffer.from([0, 255, 1]).toString('base64'),
        encoding: 'base64',
      });
      await run({ op: 'write', path: 'b', content: 'AA==', encoding: 'base64', mode: 'append' });
      expect((await fs.readFile(path.join(f.ws, 'b'))).equals(Buffer.from([0, 255, 1, 0]))).toBe(true);
      for (const bad of ['AA=', 'A A=', '!!!!', 'AAA=A===']) {
        const err = await failure(run({ op: 'write', path: 'c', content: bad, encoding: 'base64' }));
        expect(err).toBeInstanceOf(InvalidInputError);
        expect(err.details.field).toBe('content');
      }
      const enc = await failure(run({ op: 'write', path: 'c', content: 'x', encoding: 'hex' as never }));
      expect(enc.details.field).toBe('encoding');
      expect(await fs.readdir(f.ws)).toEqual(['b']);
    });

    it('enforces the workspace cap, counting what an overwrite replaces', async () => {
      f.configure({ limits: { maxWorkspaceBytes: 100 } });
      await put('existing', 'e'.repeat(60));
      const err = await expectFileOpError(
        run({ op: 'write', path: 'more', content: 'm'.repeat(41) }),
        'WORKSPACE_FULL',
      );
      expect(err.errorClass).toBe('limit');
      expect(err.message).toMatch(/over its 100 B cap; delete files first/);
      await run({ op: 'write', path: 'more', content: 'm'.repeat(40) });
      // Overwriting 60 bytes with 60 fits even though the workspace is full.
      await run({ op: 'write', path: 'existing', content: 'E'.repeat(60) });
      await expectFileOpError(
        run({ op: 'write', path: 'existing', content: 'x', mode: 'append' }),
        'WORKSPACE_FULL',
      );
    });

    it('refuses directories and the root', async () => {
      await fs.mkdir(path.join(f.ws, 'd'));
      await expectFileOpError(run({ op: 'write', path: 'd', content: 'x' }), 'EISDIR');
      await expectRejected(run({ op: 'write', path: '.', content: 'x' }), 'PATH_IS_ROOT');
      await expectRejected(run({ op: 'write', path: '', content: 'x' }), 'PATH_EMPTY');
    });
  });

  describe('edit', () => {
    beforeEach(() => put('m.py', 'a = 1\nb = 1\nc = 2\n'));

    it('replaces a unique occurrence atomically', async () => {
      const out = await run({ op: 'edit', path: 'm.py', find: 'c = 2', replace: 'c = $&3' });
      expect(out.output).toEqual({ path: 'm.py', replacements: 1 });
      expect(out.touched).toEqual([
        { path: 'm.py', access: 'read' },
        { path: 'm.py', access: 'write' },
      ]);
      expect(await get('m.py')).toBe('a = 1\nb = 1\nc = $&3\n'); // no replacement patterns
    });

    it('refuses ambiguous edits unless all: true', async () => {
      const err = await expectFileOpError(
        run({ op: 'edit', path: 'm.py', find: '= 1', replace: '= 9' }),
        'EDIT_AMBIGUOUS',
      );
      expect(err.message).toMatch(/occurs 2 times.*set all: true/);
      expect(
        (await run({ op: 'edit', path: 'm.py', find: '= 1', replace: '= 9', all: true })).output,
      ).toMatchObject({
        replacements: 2,
      });
      expect(await get('m.py')).toBe('a = 9\nb = 9\nc = 2\n');
    });

    it('reports text not found, binary files and caps', async () => {
      await expectFileOpError(run({ op: 'edit', path: 'm.py', find: 'zzz', replace: '' }), 'EDIT_NOT_FOUND');
      await put('bin', Buffer.from([1, 0, 2]));
      await expectFileOpError(run({ op: 'edit', path: 'bin', find: 'a', replace: 'b' }), 'NOT_REGULAR_FILE');
      await expectFileOpError(run({ op: 'edit', path: 'gone', find: 'a', replace: 'b' }), 'ENOENT');
      f.configure({ limits: { maxFileBytes: 20 } });
      await expectFileOpError(
        run({ op: 'edit', path: 'm.py', find: 'c = 2', replace: 'c = 22222' }),
        'FILE_TOO_LARGE',
      );
      expect(await get('m.py')).toBe('a = 1\nb = 1\nc = 2\n');
      await expect(run({ op: 'edit', path: 'm.py', find: '', replace: 'x' })).rejects.toBeInstanceOf(
        InvalidInputError,
      );
    });
  });
});
