import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { FileOp } from '../file-op.types';
import { expectFileOpError, useFileOpsFixture } from './file-ops.testing';

/** `list` and `find` (`FileListing`), through `FileOperations.execute`. */
describe('FileOperations: listing', () => {
  const f = useFileOpsFixture();
  const { run, put } = f;

  describe('list', () => {
    beforeEach(async () => {
      await put('b.txt', '12345');
      await put('a/x.txt', 'x');
      await put('a/y/z.txt', 'zz');
      await put('a-b', '');
      await fs.symlink('a', path.join(f.ws, 'link'));
    });

    it('lists one level, sorted, without following links', async () => {
      const out = await run({ op: 'list' });
      expect(out.output).toEqual({
        entries: [
          { path: 'a', type: 'dir', size: 0 },
          { path: 'a-b', type: 'file', size: 0 },
          { path: 'b.txt', type: 'file', size: 5 },
          { path: 'link', type: 'symlink', size: 1 },
        ],
      });
      expect(out.touched).toEqual([]);
    });

    it('leaves the session’s home out of walks from the root, and lists it when asked by name', async () => {
      await put('.home/.local/lib/pkg.py', 'p');
      await put('.homework', 'h');
      const top = (await run({ op: 'list', recursive: true })).output.entries as { path: string }[];
      expect(top.map((e) => e.path)).toEqual([
        '.homework',
        'a',
        'a/x.txt',
        'a/y',
        'a/y/z.txt',
        'a-b',
        'b.txt',
        'link',
      ]);
      const home = (await run({ op: 'list', path: '.home', recursive: true })).output.entries as {
        path: string;
      }[];
      expect(home.map((e) => e.path)).toEqual([
        '.home/.local',
        '.home/.local/lib',
        '.home/.local/lib/pkg.py',
      ]);
      const found = (await run({ op: 'find', pattern: '**/*.py' })).output as { paths: string[] };
      expect(found.paths).toEqual([]);
      expect(
        ((await run({ op: 'find', path: '.home', pattern: '**/*.py' })).output as { paths: string[] }).paths,
      ).toEqual(['.home/.local/lib/pkg.py']);
    });

    it('lists recursively in walk order and pages with an opaque cursor', async () => {
      const all = (await run({ op: 'list', recursive: true })).output.entries as { path: string }[];
      expect(all.map((e) => e.path)).toEqual(['a', 'a/x.txt', 'a/y', 'a/y/z.txt', 'a-b', 'b.txt', 'link']);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = (await run({ op: 'list', recursive: true, limit: 2, cursor })).output;
        seen.push(...(page.entries as { path: string }[]).map((e) => e.path));
        cursor = page.nextCursor as string | undefined;
      } while (cursor);
      expect(seen).toEqual(all.map((e) => e.path));
    });

    it('lists a subdirectory (also through an inside link) with workspace-relative paths', async () => {
      const sub = (await run({ op: 'list', path: 'a' })).output.entries as { path: string }[];
      expect(sub.map((e) => e.path)).toEqual(['a/x.txt', 'a/y']);
      const viaLink = (await run({ op: 'list', path: 'link' })).output.entries as { path: string }[];
      expect(viaLink.map((e) => e.path)).toEqual(['link/x.txt', 'link/y']);
    });

    it('rejects bad cursors, files and missing dirs', async () => {
      await expectFileOpError(run({ op: 'list', cursor: '!!not base64' }), 'INVALID_CURSOR');
      await expectFileOpError(run({ op: 'list', cursor: 'AA' }), 'INVALID_CURSOR'); // decodes to NUL
      await expectFileOpError(run({ op: 'list', path: 'b.txt' }), 'ENOTDIR');
      await expectFileOpError(run({ op: 'list', path: 'nope' }), 'ENOENT');
    });
  });

  describe('find', () => {
    beforeEach(async () => {
      await put('main.py', '');
      await put('src/app.py', '');
      await put('src/app.ts', '');
      await put('src/lib/util.py', '');
      await put('.hidden/cfg.py', '');
      await put('docs/readme.md', '');
    });

    const find = async (pattern: string, extra: Partial<FileOp & { op: 'find' }> = {}) =>
      (await run({ op: 'find', pattern, ...extra })).output;

    it('matches *, **, ?, {a,b} and classes relative to path', async () => {
      expect((await find('*.py')).paths).toEqual(['main.py']);
      expect((await find('**/*.py')).paths).toEqual([
        '.hidden/cfg.py',
        'main.py',
        'src/app.py',
        'src/lib/util.py',
      ]);
      expect((await find('src/app.{py,ts}')).paths).toEqual(['src/app.py', 'src/app.ts']);
      expect((await find('src/ap?.[pt]*')).paths).toEqual(['src/app.py', 'src/app.ts']);
      expect((await find('**/*.py', { path: 'src' })).paths).toEqual(['src/app.py', 'src/lib/util.py']);
      expect((await find('src')).paths).toEqual(['src']);
    });

    it('truncates at the limit and rejects bad patterns', async () => {
      expect(await find('**', { limit: 2 })).toEqual({
        paths: ['.hidden', '.hidden/cfg.py'],
        truncated: true,
      });
      await expectFileOpError(run({ op: 'find', pattern: 'src/{a,b' }), 'INVALID_PATTERN');
      await expectFileOpError(run({ op: 'find', pattern: '[abc' }), 'INVALID_PATTERN');
      await expectFileOpError(run({ op: 'find', pattern: '' }), 'INVALID_PATTERN');
    });

    it('marks results truncated when the scan cap is hit', async () => {
      f.configure({ maxScanEntries: 3 });
      expect((await find('**')).truncated).toBe(true);
    });
  });
});
