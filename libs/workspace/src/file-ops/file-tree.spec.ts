import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { expectFileOpError, expectRejected, useFileOpsFixture } from './file-ops.testing';

/** `mkdir`, `move` and `delete` (`FileTree`), through `FileOperations.execute`. */
describe('FileOperations: tree', () => {
  const f = useFileOpsFixture();
  const { run, put, get } = f;

  describe('mkdir', () => {
    it('is recursive and idempotent', async () => {
      expect((await run({ op: 'mkdir', path: 'a/b/c' })).output).toEqual({ path: 'a/b/c', created: true });
      expect((await run({ op: 'mkdir', path: 'a/b/c' })).output).toEqual({ path: 'a/b/c', created: false });
      expect((await fs.stat(path.join(f.ws, 'a/b/c'))).isDirectory()).toBe(true);
      await put('file', '');
      await expectFileOpError(run({ op: 'mkdir', path: 'file' }), 'EEXIST');
      await expectFileOpError(run({ op: 'mkdir', path: 'file/sub' }), 'ENOTDIR');
    });
  });

  describe('move', () => {
    it('renames files and directories, creating parents', async () => {
      await put('a.txt', 'A');
      const out = await run({ op: 'move', path: 'a.txt', to: 'new/dir/b.txt' });
      expect(out.output).toEqual({ path: 'a.txt', to: 'new/dir/b.txt' });
      expect(out.touched).toEqual([
        { path: 'a.txt', access: 'write' },
        { path: 'new/dir/b.txt', access: 'write' },
      ]);
      expect(await get('new/dir/b.txt')).toBe('A');
      await run({ op: 'move', path: 'new', to: 'old' });
      expect(await get('old/dir/b.txt')).toBe('A');
    });

    it('refuses to overwrite unless asked, and moving a directory into itself', async () => {
      await put('a', '1');
      await put('b', '2');
      await expectFileOpError(run({ op: 'move', path: 'a', to: 'b' }), 'EEXIST');
      await run({ op: 'move', path: 'a', to: 'b', overwrite: true });
      expect(await get('b')).toBe('1');
      await fs.mkdir(path.join(f.ws, 'd'));
      await expectFileOpError(run({ op: 'move', path: 'd', to: 'd/inner' }), 'INVALID_MOVE');
      await expectFileOpError(run({ op: 'move', path: 'missing', to: 'x' }), 'ENOENT');
      await expectRejected(run({ op: 'move', path: 'b', to: '../b' }), 'PATH_ESCAPE');
      await expectRejected(run({ op: 'move', path: 'b', to: '.' }), 'PATH_IS_ROOT');
    });

    it('moves a link without following it', async () => {
      await fs.symlink(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'evil'));
      await run({ op: 'move', path: 'evil', to: 'renamed' });
      expect(await fs.readlink(path.join(f.ws, 'renamed'))).toBe(path.join(f.outside, 'secret.txt'));
      expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });
  });

  describe('delete', () => {
    it('deletes files; directories only with recursive', async () => {
      await put('f', '');
      await put('full/x', '');
      await fs.mkdir(path.join(f.ws, 'empty'));
      expect((await run({ op: 'delete', path: 'f' })).output).toEqual({ path: 'f', deleted: true });
      await expectFileOpError(run({ op: 'delete', path: 'empty' }), 'EISDIR');
      await expectFileOpError(run({ op: 'delete', path: 'full' }), 'ENOTEMPTY');
      await run({ op: 'delete', path: 'full', recursive: true });
      await run({ op: 'delete', path: 'empty', recursive: true });
      expect(await fs.readdir(f.ws)).toEqual([]);
      await expectFileOpError(run({ op: 'delete', path: 'f' }), 'ENOENT');
    });

    it('never deletes the workspace root', async () => {
      for (const p of ['.', 'a/..', './']) {
        await expectRejected(run({ op: 'delete', path: p, recursive: true }), 'PATH_IS_ROOT');
      }
      await expectRejected(run({ op: 'delete', path: '', recursive: true }), 'PATH_EMPTY');
      expect((await fs.stat(f.ws)).isDirectory()).toBe(true);
    });

    it('deletes links, never what they point to, even inside a recursive delete', async () => {
      await fs.symlink(f.outside, path.join(f.ws, 'outlink'));
      await fs.mkdir(path.join(f.ws, 'd'));
      await fs.symlink(f.outside, path.join(f.ws, 'd/inner-link'));
      await run({ op: 'delete', path: 'd', recursive: true });
      await run({ op: 'delete', path: 'outlink' });
      expect(await fs.readdir(f.ws)).toEqual([]);
      expect(await fs.readFile(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });
  });
});
