import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { InvalidInputError } from '@switchyard/common';
import type { FileOp, GrepOp } from './file-op.types';
import { FileOperations } from './file-operations.service';
import * as guard from './path-guard';
import { FileOpError, PathRejectedError } from './workspace.errors';
import { resolveWorkspaceOptions, type WorkspaceModuleOptions } from './workspace.options';

describe('FileOperations', () => {
  let tmp: string;
  let ws: string;
  let outside: string;
  let ops: FileOperations;

  const make = (overrides: Partial<WorkspaceModuleOptions> = {}) =>
    new FileOperations(resolveWorkspaceOptions({ root: tmp, ...overrides }));
  const run = (op: FileOp) => ops.execute(ws, op);
  const put = async (rel: string, content: string | Buffer) => {
    await fs.mkdir(path.dirname(path.join(ws, rel)), { recursive: true });
    await fs.writeFile(path.join(ws, rel), content);
  };
  const get = (rel: string) => fs.readFile(path.join(ws, rel), 'utf8');
  /** Resolves to the error the promise rejected with, failing the test if it resolved. */
  const failure = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (err) {
      return err as Error & { code: string; details: Record<string, unknown> };
    }
    throw new Error('expected a rejection');
  };
  const expectFileOpError = async (p: Promise<unknown>, code: string) => {
    const err = await failure(p);
    expect(err).toBeInstanceOf(FileOpError);
    expect(err.code).toBe(code);
    return err as FileOpError;
  };
  const expectRejected = async (p: Promise<unknown>, code: string) => {
    const err = await failure(p);
    expect(err).toBeInstanceOf(PathRejectedError);
    expect(err.code).toBe(code);
    return err as PathRejectedError;
  };

  beforeEach(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'sy-fileops-'));
    ws = path.join(tmp, 'ws');
    outside = path.join(tmp, 'outside');
    await fs.mkdir(ws);
    await fs.mkdir(outside);
    await fs.writeFile(path.join(outside, 'secret.txt'), 'TOP SECRET\n');
    ops = make();
  });
  afterEach(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });

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
      ops = make({ limits: { maxFileBytes: 1024 } });
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
      ops = make({ limits: { maxFileBytes: 16 } });
      await put('blob', Buffer.alloc(100));
      await expectFileOpError(run({ op: 'read', path: 'blob', offset: 1 }), 'FILE_TOO_LARGE');
    });

    it('reports missing files, directories and bad windows', async () => {
      await expectFileOpError(run({ op: 'read', path: 'nope.txt' }), 'ENOENT');
      await fs.mkdir(path.join(ws, 'd'));
      await expectFileOpError(run({ op: 'read', path: 'd' }), 'EISDIR');
      await put('f', 'x');
      await expectFileOpError(run({ op: 'read', path: 'f/g' }), 'ENOTDIR');
      const err = await failure(run({ op: 'read', path: 'f', offset: 0 }));
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe('offset');
    });

    it('refuses FIFOs without blocking', async () => {
      const { execFileSync } = await import('node:child_process');
      execFileSync('mkfifo', [path.join(ws, 'pipe')]);
      await expectFileOpError(run({ op: 'read', path: 'pipe' }), 'NOT_REGULAR_FILE');
    });
  });

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
      await fs.chmod(path.join(ws, 'run.sh'), 0o750);
      await run({ op: 'write', path: 'run.sh', content: 'echo bye\n' });
      expect((await fs.stat(path.join(ws, 'run.sh'))).mode & 0o777).toBe(0o750);
      expect(await fs.readdir(ws)).toEqual(['run.sh']);
    });

    it('gives new files the bits of the workspace root', async () => {
      await fs.chmod(ws, 0o750);
      await run({ op: 'write', path: 'n/new.txt', content: 'x' });
      expect((await fs.stat(path.join(ws, 'n/new.txt'))).mode & 0o777).toBe(0o640);
      expect((await fs.stat(path.join(ws, 'n'))).mode & 0o777).toBe(0o750);
    });

    it('enforces the per-file cap, appends included', async () => {
      ops = make({ limits: { maxFileBytes: 10 } });
      const err = await expectFileOpError(
        run({ op: 'write', path: 'f', content: 'x'.repeat(11) }),
        'FILE_TOO_LARGE',
      );
      expect(err.message).toMatch(/over the 10 B file cap/);
      await run({ op: 'write', path: 'f', content: 'x'.repeat(6) });
      await expectFileOpError(
        run({ op: 'write', path: 'f', content: 'y'.repeat(5), mode: 'append' }),
        'FILE_TOO_LARGE',
      );
      expect(await get('f')).toBe('xxxxxx');
    });

    it('enforces the workspace cap, counting what an overwrite replaces', async () => {
      ops = make({ limits: { maxWorkspaceBytes: 100 } });
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
      await fs.mkdir(path.join(ws, 'd'));
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
      ops = make({ limits: { maxFileBytes: 20 } });
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

  describe('list', () => {
    beforeEach(async () => {
      await put('b.txt', '12345');
      await put('a/x.txt', 'x');
      await put('a/y/z.txt', 'zz');
      await put('a-b', '');
      await fs.symlink('a', path.join(ws, 'link'));
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
      ops = make({ maxScanEntries: 3 });
      expect((await find('**')).truncated).toBe(true);
    });
  });

  describe('grep', () => {
    beforeEach(async () => {
      await put('a.py', 'import os\nprint("hello")\n');
      await put('src/b.py', 'def Hello():\n    return 1\r\n');
      await put('src/c.ts', 'const hello = 1;\n');
      await put('bin.dat', Buffer.from('hello\0world'));
    });
    const grep = async (pattern: string, extra: Partial<GrepOp> = {}) =>
      (await run({ op: 'grep', pattern, ...extra })).output;

    it('returns path:line:text, skipping binary files', async () => {
      const out = await run({ op: 'grep', pattern: 'hello' });
      expect(out.output).toEqual({
        matches: ['a.py:2:print("hello")', 'src/c.ts:1:const hello = 1;'],
        truncated: false,
      });
      expect(out.touched).toEqual([
        { path: 'a.py', access: 'read' },
        { path: 'src/c.ts', access: 'read' },
      ]);
    });

    it('supports ignoreCase, a name glob, a path glob, a sub path and a single file', async () => {
      expect((await grep('hello', { ignoreCase: true, glob: '*.py' })).matches).toEqual([
        'a.py:2:print("hello")',
        'src/b.py:1:def Hello():',
      ]);
      expect((await grep('.', { glob: 'src/*.ts' })).matches).toEqual(['src/c.ts:1:const hello = 1;']);
      expect((await grep('return', { path: 'src' })).matches).toEqual(['src/b.py:2:    return 1']);
      expect((await grep('^import', { path: 'a.py' })).matches).toEqual(['a.py:1:import os']);
    });

    it('caps matches and line text', async () => {
      await put('long.txt', `${'x'.repeat(2000)}\n`.repeat(5));
      const out = await grep('x', { limit: 3 });
      expect(out.truncated).toBe(true);
      expect(out.matches).toHaveLength(3);
      expect((out.matches as string[])[0]).toBe(`long.txt:1:${'x'.repeat(500)}`);
    });

    it('skips files over the cap', async () => {
      ops = make({ limits: { maxFileBytes: 30 } });
      await put('big.txt', `hello ${'y'.repeat(50)}`);
      expect((await grep('hello')).matches).toEqual(['a.py:2:print("hello")', 'src/c.ts:1:const hello = 1;']);
    });

    it('rejects invalid and over-long patterns, and stops catastrophic backtracking', async () => {
      await expectFileOpError(run({ op: 'grep', pattern: '(' }), 'INVALID_PATTERN');
      await expectFileOpError(run({ op: 'grep', pattern: 'a'.repeat(1001) }), 'INVALID_PATTERN');
      await put('redos.txt', `${'a'.repeat(40)}!\n`);
      ops = make({ grepFileTimeoutMs: 100 });
      const started = Date.now();
      const err = await expectFileOpError(
        run({ op: 'grep', pattern: '^(a+)+$', path: 'redos.txt' }),
        'INVALID_PATTERN',
      );
      expect(err.message).toMatch(/catastrophic backtracking/);
      expect(Date.now() - started).toBeLessThan(2000);
    });

    it('matches off the event loop: a backtracking pattern holds its grep, never the timers of everything else', async () => {
      await put('redos.txt', `${'a'.repeat(40)}!\n`);
      ops = make({ grepFileTimeoutMs: 1000 });
      // A tick every 10 ms while the grep backtracks for its whole second: the longest gap between ticks is the
      // longest time the event loop was held.
      let last = Date.now();
      let longest = 0;
      const ticker = setInterval(() => {
        const now = Date.now();
        longest = Math.max(longest, now - last);
        last = now;
      }, 10);
      try {
        await expectFileOpError(
          run({ op: 'grep', pattern: '^(a+)+$', path: 'redos.txt' }),
          'INVALID_PATTERN',
        );
      } finally {
        clearInterval(ticker);
      }
      expect(longest).toBeLessThan(100);
      // The next grep still works (a fresh worker replaces the one that was stopped).
      await put('ok.txt', 'find me\n');
      expect((await run({ op: 'grep', pattern: 'find', path: 'ok.txt' })).output.matches).toEqual([
        'ok.txt:1:find me',
      ]);
    });
  });

  describe('stat', () => {
    it('describes files, directories and links (not their targets)', async () => {
      await put('f.txt', 'abc');
      await fs.chmod(path.join(ws, 'f.txt'), 0o640);
      await fs.symlink('/etc/passwd', path.join(ws, 'out'));
      const f = (await run({ op: 'stat', path: 'f.txt' })).output;
      expect(f).toMatchObject({ path: 'f.txt', type: 'file', size: 3, mode: '0640' });
      expect(new Date(f.mtime as string).getTime()).toBeGreaterThan(0);
      expect((await run({ op: 'stat', path: '.' })).output).toMatchObject({ path: '', type: 'dir' });
      expect((await run({ op: 'stat', path: 'out' })).output).toMatchObject({ type: 'symlink', size: 11 });
      await expectFileOpError(run({ op: 'stat', path: 'nope' }), 'ENOENT');
    });
  });

  describe('mkdir', () => {
    it('is recursive and idempotent', async () => {
      expect((await run({ op: 'mkdir', path: 'a/b/c' })).output).toEqual({ path: 'a/b/c', created: true });
      expect((await run({ op: 'mkdir', path: 'a/b/c' })).output).toEqual({ path: 'a/b/c', created: false });
      expect((await fs.stat(path.join(ws, 'a/b/c'))).isDirectory()).toBe(true);
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
      await fs.mkdir(path.join(ws, 'd'));
      await expectFileOpError(run({ op: 'move', path: 'd', to: 'd/inner' }), 'INVALID_MOVE');
      await expectFileOpError(run({ op: 'move', path: 'missing', to: 'x' }), 'ENOENT');
      await expectRejected(run({ op: 'move', path: 'b', to: '../b' }), 'PATH_ESCAPE');
      await expectRejected(run({ op: 'move', path: 'b', to: '.' }), 'PATH_IS_ROOT');
    });

    it('moves a link without following it', async () => {
      await fs.symlink(path.join(outside, 'secret.txt'), path.join(ws, 'evil'));
      await run({ op: 'move', path: 'evil', to: 'renamed' });
      expect(await fs.readlink(path.join(ws, 'renamed'))).toBe(path.join(outside, 'secret.txt'));
      expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });
  });

  describe('delete', () => {
    it('deletes files; directories only with recursive', async () => {
      await put('f', '');
      await put('full/x', '');
      await fs.mkdir(path.join(ws, 'empty'));
      expect((await run({ op: 'delete', path: 'f' })).output).toEqual({ path: 'f', deleted: true });
      await expectFileOpError(run({ op: 'delete', path: 'empty' }), 'EISDIR');
      await expectFileOpError(run({ op: 'delete', path: 'full' }), 'ENOTEMPTY');
      await run({ op: 'delete', path: 'full', recursive: true });
      await run({ op: 'delete', path: 'empty', recursive: true });
      expect(await fs.readdir(ws)).toEqual([]);
      await expectFileOpError(run({ op: 'delete', path: 'f' }), 'ENOENT');
    });

    it('never deletes the workspace root', async () => {
      for (const p of ['.', 'a/..', './']) {
        await expectRejected(run({ op: 'delete', path: p, recursive: true }), 'PATH_IS_ROOT');
      }
      await expectRejected(run({ op: 'delete', path: '', recursive: true }), 'PATH_EMPTY');
      expect((await fs.stat(ws)).isDirectory()).toBe(true);
    });

    it('deletes links, never what they point to, even inside a recursive delete', async () => {
      await fs.symlink(outside, path.join(ws, 'outlink'));
      await fs.mkdir(path.join(ws, 'd'));
      await fs.symlink(outside, path.join(ws, 'd/inner-link'));
      await run({ op: 'delete', path: 'd', recursive: true });
      await run({ op: 'delete', path: 'outlink' });
      expect(await fs.readdir(ws)).toEqual([]);
      expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });
  });

  describe('path traversal (SECURITY #9)', () => {
    const writeTo = (p: string) => run({ op: 'write', path: p, content: 'pwned' });

    it.each([
      ['../x', '../x', 'PATH_ESCAPE'],
      ['./../x', './../x', 'PATH_ESCAPE'],
      ['a/../../x', 'a/../../x', 'PATH_ESCAPE'],
      ['/etc/passwd', '/etc/passwd', 'PATH_ABSOLUTE'],
      ['a NUL byte', 'a\0b', 'PATH_NUL'],
      ['..\\..\\x', '..\\..\\x', 'PATH_BACKSLASH'],
      ['%2e%2e/x', '%2e%2e/x', 'PATH_ENCODED_TRAVERSAL'],
      ['..%2fx', '..%2fx', 'PATH_ENCODED_TRAVERSAL'],
      ['double-encoded %252e%252e%252fx', '%252e%252e%252fx', 'PATH_ENCODED_TRAVERSAL'],
      ['overlong UTF-8 %c0%ae%c0%ae/x', '%c0%ae%c0%ae/x', 'PATH_ENCODED_TRAVERSAL'],
      ['a newline', 'a\nb', 'PATH_CONTROL_CHAR'],
      ['a 5000-char path', 'x'.repeat(5000), 'PATH_TOO_LONG'],
      ['a 256-byte segment', `${'y'.repeat(256)}/f`, 'PATH_TOO_LONG'],
    ])('%s is rejected for reads and writes', async (_label, p, code) => {
      const err = await expectRejected(writeTo(p), code);
      expect(err.kind).toBe('invalid_input');
      expect(err.details.field).toBe('path');
      await expectRejected(run({ op: 'read', path: p }), code);
      expect(await fs.readdir(tmp)).toEqual(['outside', 'ws']);
    });

    it('accepts a/../b, and treats names that only look encoded literally', async () => {
      await writeTo('a/../b');
      expect(await get('b')).toBe('pwned');
      await writeTo('100%.txt');
      await writeTo('%41');
      expect(await get('%41')).toBe('pwned'); // not decoded to "A"
    });

    it('applies the configured path length', async () => {
      ops = make({ limits: { maxPathLength: 10 } });
      await expectRejected(writeTo('abcdefghijk'), 'PATH_TOO_LONG');
    });
  });

  describe('symlink and hardlink escapes (SECURITY #8)', () => {
    it('ln -s /etc/passwd x: read and write through x are refused', async () => {
      await fs.symlink('/etc/passwd', path.join(ws, 'x'));
      await expectRejected(run({ op: 'read', path: 'x' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'write', path: 'x', content: 'pwned' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(
        run({ op: 'edit', path: 'x', find: 'root', replace: 'pwned' }),
        'PATH_SYMLINK_ESCAPE',
      );
    });

    it('a link to an outside file the workspace can write is not followed by write/append', async () => {
      await fs.symlink(path.join(outside, 'secret.txt'), path.join(ws, 's'));
      for (const mode of ['overwrite', 'append', 'create'] as const) {
        await expect(run({ op: 'write', path: 's', content: 'pwned', mode })).rejects.toBeInstanceOf(
          PathRejectedError,
        );
      }
      expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });

    it('dangling links are refused', async () => {
      await fs.symlink('does-not-exist', path.join(ws, 'dangling'));
      await expectRejected(run({ op: 'read', path: 'dangling' }), 'PATH_SYMLINK_DANGLING');
      await expectRejected(run({ op: 'write', path: 'dangling', content: 'x' }), 'PATH_SYMLINK_DANGLING');
      await expect(fs.access(path.join(ws, 'does-not-exist'))).rejects.toThrow();
    });

    it('ln -s .. up: up/… is refused for every op', async () => {
      await fs.symlink('..', path.join(ws, 'up'));
      await expectRejected(run({ op: 'read', path: 'up/outside/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'write', path: 'up/outside/new', content: 'x' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'list', path: 'up' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'grep', pattern: 'SECRET', path: 'up/outside' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'find', pattern: '**', path: 'up' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'mkdir', path: 'up/made' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'delete', path: 'up/outside/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(
        run({ op: 'move', path: 'up/outside/secret.txt', to: 'stolen' }),
        'PATH_SYMLINK_ESCAPE',
      );
      await expectRejected(run({ op: 'stat', path: 'up/outside/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      expect(await fs.readdir(outside)).toEqual(['secret.txt']);
    });

    it('a link to a link is refused, even when both stay inside', async () => {
      await put('real.txt', 'ok');
      await fs.symlink('real.txt', path.join(ws, 'l1'));
      await fs.symlink('l1', path.join(ws, 'l2'));
      expect((await run({ op: 'read', path: 'l1' })).output.content).toBe('ok');
      await expectRejected(run({ op: 'read', path: 'l2' }), 'PATH_SYMLINK_CHAIN');
    });

    it('a symlinked directory in the middle of a path: inside is followed, outside refused', async () => {
      await put('real/f.txt', 'inside');
      await fs.symlink('real', path.join(ws, 'alias'));
      await fs.symlink(outside, path.join(ws, 'ext'));
      const out = await run({ op: 'read', path: 'alias/f.txt' });
      expect(out.output.content).toBe('inside');
      expect(out.touched).toEqual([{ path: 'real/f.txt', access: 'read' }]); // the real file, for the graph
      await run({ op: 'write', path: 'alias/g.txt', content: 'g' });
      expect(await get('real/g.txt')).toBe('g');
      await expectRejected(run({ op: 'read', path: 'ext/secret.txt' }), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(run({ op: 'write', path: 'ext/planted', content: 'x' }), 'PATH_SYMLINK_ESCAPE');
      expect(await fs.readdir(outside)).toEqual(['secret.txt']);
    });

    it('walks never follow links: list, find and grep do not see outside files', async () => {
      await fs.symlink(outside, path.join(ws, 'ext'));
      await fs.symlink(path.join(outside, 'secret.txt'), path.join(ws, 'sec'));
      const listed = (await run({ op: 'list', recursive: true })).output.entries as { path: string }[];
      expect(listed.map((e) => e.path)).toEqual(['ext', 'sec']);
      expect((await run({ op: 'find', pattern: '**/secret*' })).output.paths).toEqual([]);
      expect((await run({ op: 'grep', pattern: 'SECRET' })).output.matches).toEqual([]);
    });

    it('a hardlink to an outside file is neither read nor written', async () => {
      await fs.link(path.join(outside, 'secret.txt'), path.join(ws, 'hard'));
      const err = await expectRejected(run({ op: 'read', path: 'hard' }), 'PATH_HARDLINK');
      expect(err.message).toMatch(/2 hard links/);
      await expectRejected(run({ op: 'write', path: 'hard', content: 'pwned' }), 'PATH_HARDLINK');
      await expectRejected(
        run({ op: 'write', path: 'hard', content: 'pwned', mode: 'append' }),
        'PATH_HARDLINK',
      );
      await expectRejected(run({ op: 'edit', path: 'hard', find: 'TOP', replace: 'pwned' }), 'PATH_HARDLINK');
      expect((await run({ op: 'grep', pattern: 'SECRET' })).output.matches).toEqual([]);
      expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
      // Deleting the link only removes the workspace's name for it.
      await run({ op: 'delete', path: 'hard' });
      expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });

    describe('a directory swapped for a link to outside right after the path was vetted', () => {
      beforeEach(async () => {
        await put('d/secret.txt', 'inside\n');
        await fs.writeFile(path.join(outside, 'other.txt'), 'outside\n');
        const original = guard.realPathInside;
        let swapped = false;
        jest.spyOn(guard, 'realPathInside').mockImplementation(async (...args) => {
          const vetted = await original(...args);
          if (!swapped) {
            swapped = true;
            await fs.rename(path.join(ws, 'd'), path.join(ws, 'd.orig'));
            await fs.symlink(outside, path.join(ws, 'd'));
          }
          return vetted;
        });
      });
      afterEach(() => jest.restoreAllMocks());

      it.each<[string, FileOp]>([
        ['read', { op: 'read', path: 'd/secret.txt' }],
        ['overwrite', { op: 'write', path: 'd/secret.txt', content: 'pwned' }],
        ['append', { op: 'write', path: 'd/secret.txt', content: 'pwned', mode: 'append' }],
        ['create', { op: 'write', path: 'd/new.txt', content: 'pwned', mode: 'create' }],
        ['edit', { op: 'edit', path: 'd/secret.txt', find: 'inside', replace: 'pwned' }],
        ['mkdir', { op: 'mkdir', path: 'd/sub' }],
        ['delete', { op: 'delete', path: 'd/secret.txt' }],
        ['move', { op: 'move', path: 'd/secret.txt', to: 'moved' }],
      ])('%s is refused and nothing outside changes', async (_name, op) => {
        await expectRejected(run(op), 'PATH_SYMLINK_ESCAPE');
        expect((await fs.readdir(outside)).sort()).toEqual(['other.txt', 'secret.txt']);
        expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
      });
    });

    it('a final component swapped for a link after the check is not followed (O_NOFOLLOW)', async () => {
      await put('f.txt', 'inside\n');
      const original = guard.realPathInside;
      jest.spyOn(guard, 'realPathInside').mockImplementation(async (...args) => {
        const vetted = await original(...args);
        await fs.rm(path.join(ws, 'f.txt'));
        await fs.symlink(path.join(outside, 'secret.txt'), path.join(ws, 'f.txt'));
        return vetted;
      });
      try {
        await expectRejected(run({ op: 'read', path: 'f.txt' }), 'PATH_SYMLINK_ESCAPE');
        await fs.rm(path.join(ws, 'f.txt'));
        await fs.writeFile(path.join(ws, 'f.txt'), 'inside\n');
        await expectRejected(
          run({ op: 'write', path: 'f.txt', content: 'pwned', mode: 'append' }),
          'PATH_SYMLINK_ESCAPE',
        );
      } finally {
        jest.restoreAllMocks();
      }
      expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
    });

    it('survives code swapping a directory for a link to outside while reads and writes run', async () => {
      // A racing "attacker" flips d between a real directory and a link to outside as fast as it can.
      await fs.mkdir(path.join(ws, 'real'));
      await fs.writeFile(path.join(ws, 'real/secret.txt'), 'inside\n');
      const { spawn } = await import('node:child_process');
      const script = `cd '${ws}'; while :; do ln -sfn '${outside}' d.tmp && mv -T d.tmp d; ln -sfn real d.tmp && mv -T d.tmp d; done`;
      await fs.symlink('real', path.join(ws, 'd'));
      // Own process group, so the kill below also reaches the ln/mv it is running at that moment.
      const racer = spawn('sh', ['-c', script], { stdio: 'ignore', detached: true });
      const exited = new Promise((resolve) => racer.once('exit', resolve));
      try {
        const seen = new Set<string>();
        for (let i = 0; i < 300; i++) {
          const r = await run({ op: 'read', path: 'd/secret.txt' }).catch((e: Error) => e);
          seen.add(r instanceof Error ? r.name : String(r.output.content));
          await run({ op: 'write', path: 'd/w.txt', content: `${i}` }).catch(() => undefined);
        }
        expect(seen.has('inside\n')).toBe(true); // the race really ran both ways
        expect(seen.has('TOP SECRET\n')).toBe(false);
        expect(await fs.readdir(outside)).toEqual(['secret.txt']);
      } finally {
        process.kill(-racer.pid!, 'SIGKILL');
        await exited;
      }
    });
  });
});
