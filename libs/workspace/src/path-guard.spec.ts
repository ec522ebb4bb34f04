import { constants as C } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { InvalidInputError, NotFoundError } from '@switchyard/common';
import { readDirVerified } from './dir-listing';
import { assertPlainFile, openDirInside, openFileIn } from './fd-opens';
import { isInside, realPathInside, resolveInside } from './path-guard';
import { FileOpError, PathRejectedError } from './workspace.errors';

const ROOT = '/srv/ws/s1';

function rejection(fn: () => unknown): PathRejectedError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PathRejectedError);
    return err as PathRejectedError;
  }
  throw new Error('expected a PathRejectedError');
}

describe('resolveInside', () => {
  it('normalizes ., .. that stays inside, repeated and trailing slashes', () => {
    expect(resolveInside(ROOT, 'a/./b//c/', 'path')).toEqual({ rel: 'a/b/c', abs: '/srv/ws/s1/a/b/c' });
    expect(resolveInside(ROOT, 'a/../b', 'path')).toEqual({ rel: 'b', abs: '/srv/ws/s1/b' });
    expect(resolveInside(ROOT, '.', 'path')).toEqual({ rel: '', abs: ROOT });
  });

  it('rejects traversal, naming the field and the path', () => {
    for (const p of ['..', '../x', './../x', 'a/../../x', 'a/b/../../../x']) {
      const err = rejection(() => resolveInside(ROOT, p, 'to'));
      expect(err.code).toBe('PATH_ESCAPE');
      expect(err.details).toEqual({ field: 'to', path: p });
      expect(err.kind).toBe('invalid_input');
      expect(err).toBeInstanceOf(InvalidInputError);
    }
  });

  it.each([
    ['/etc/passwd', 'PATH_ABSOLUTE'],
    ['//etc', 'PATH_ABSOLUTE'],
    ['a\0b', 'PATH_NUL'],
    ['a\tb', 'PATH_CONTROL_CHAR'],
    ['a\x7fb', 'PATH_CONTROL_CHAR'],
    ['..\\x', 'PATH_BACKSLASH'],
    ['a\\b', 'PATH_BACKSLASH'],
    ['%2e%2e', 'PATH_ENCODED_TRAVERSAL'],
    ['%2E%2E%2Fetc', 'PATH_ENCODED_TRAVERSAL'],
    ['%2fetc%2fpasswd', 'PATH_ENCODED_TRAVERSAL'],
    ['a%5cb', 'PATH_ENCODED_TRAVERSAL'],
    ['a%00b', 'PATH_ENCODED_TRAVERSAL'],
    ['%252e%252e/x', 'PATH_ENCODED_TRAVERSAL'],
    ['%c0%af', 'PATH_ENCODED_TRAVERSAL'],
    ['%u002e%u002e/x', 'PATH_ENCODED_TRAVERSAL'],
  ])('rejects %j with %s', (p, code) => {
    expect(rejection(() => resolveInside(ROOT, p, 'path')).code).toBe(code);
  });

  it.each([
    ['a\x85b', 'NEL'],
    ['a\u2028b', 'line separator'],
    ['a\u2029b', 'paragraph separator'],
    ['a\x9bb', 'C1 CSI'],
  ])('rejects %j (%s) as a control character', (p) => {
    expect(rejection(() => resolveInside(ROOT, p, 'path')).code).toBe('PATH_CONTROL_CHAR');
  });

  it.each([
    ['\u200B', 'zero width space'],
    ['\u200C', 'zero width non-joiner'],
    ['\u200D', 'zero width joiner'],
    ['\u200E', 'left-to-right mark'],
    ['\u200F', 'right-to-left mark'],
    ['\u202A', 'left-to-right embedding'],
    ['\u202B', 'right-to-left embedding'],
    ['\u202C', 'pop directional formatting'],
    ['\u202D', 'left-to-right override'],
    ['\u202E', 'right-to-left override'],
    ['\u2066', 'left-to-right isolate'],
    ['\u2067', 'right-to-left isolate'],
    ['\u2068', 'first strong isolate'],
    ['\u2069', 'pop directional isolate'],
    ['\uFEFF', 'byte order mark'],
    ['\u061C', 'arabic letter mark'],
    ['\u180E', 'mongolian vowel separator'],
    ['\u2060', 'word joiner'],
    ['\u00AD', 'soft hyphen'],
    ['\uFE0F', 'variation selector 16'],
    ['\u3164', 'hangul filler'],
    ['\u{E0041}', 'tag latin capital A'],
  ])('rejects an invisible %j (%s) anywhere in a path, naming the field and the code point', (c) => {
    for (const p of [`${c}a.txt`, `dir/a${c}b.txt`, `a.txt${c}`, `${c}/x`]) {
      const err = rejection(() => resolveInside(ROOT, p, 'to'));
      expect(err.code).toBe('PATH_INVISIBLE_CHAR');
      expect(err.details).toEqual({ field: 'to', path: p });
      const hex = c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
      expect(err.message).toContain(`U+${hex}`);
    }
  });

  it('keeps visible non-ASCII names: accents, scripts, emoji, spaces', () => {
    for (const p of [
      'résumé.txt',
      'данные/файл',
      '数据.csv',
      'עברית.md',
      'كتاب',
      '🚀.txt',
      'a b',
      'a\u00A0b',
    ]) {
      expect(resolveInside(ROOT, p, 'path').rel).toBe(p);
    }
  });

  it('keeps percent signs that cannot decode to traversal, literally', () => {
    // Nothing in the file API decodes paths, so these are just odd file names inside the root.
    for (const p of ['100%', '%zz', 'a%2fb', '%41%42', 'x/%2e', 'r%C3%A9sum%C3%A9', '~/x', 'C:x']) {
      const { abs } = resolveInside(ROOT, p, 'path');
      expect(abs).toBe(path.join(ROOT, p));
      expect(isInside(ROOT, abs)).toBe(true);
    }
  });

  it('enforces the path and segment length in bytes', () => {
    expect(rejection(() => resolveInside(ROOT, 'a'.repeat(4097), 'path')).code).toBe('PATH_TOO_LONG');
    expect(resolveInside(ROOT, `${'a'.repeat(255)}/${'b'.repeat(255)}`, 'path').rel).toHaveLength(511);
    expect(rejection(() => resolveInside(ROOT, 'é'.repeat(128), 'path')).code).toBe('PATH_TOO_LONG'); // 256 bytes
    expect(rejection(() => resolveInside(ROOT, 'abcdef', 'path', { maxPathLength: 5 })).code).toBe(
      'PATH_TOO_LONG',
    );
    const long = rejection(() => resolveInside(ROOT, 'z'.repeat(5000), 'path'));
    expect((long.details.path as string).length).toBeLessThan(300); // echoed back shortened
  });

  it('handles empty paths and the root according to the options', () => {
    expect(rejection(() => resolveInside(ROOT, '', 'path')).code).toBe('PATH_EMPTY');
    expect(resolveInside(ROOT, '', 'path', { allowEmpty: true })).toEqual({ rel: '', abs: ROOT });
    expect(rejection(() => resolveInside(ROOT, 'a/..', 'path', { rejectRoot: true })).code).toBe(
      'PATH_IS_ROOT',
    );
    expect(
      rejection(() => resolveInside(ROOT, '', 'path', { allowEmpty: true, rejectRoot: true })).code,
    ).toBe('PATH_EMPTY');
  });

  it('refuses non-strings', () => {
    expect(() => resolveInside(ROOT, 42, 'path')).toThrow(InvalidInputError);
    expect(() => resolveInside(ROOT, undefined, 'path')).toThrow(InvalidInputError);
  });
});

describe('isInside', () => {
  it('does not confuse sibling prefixes', () => {
    expect(isInside('/a/ws', '/a/ws')).toBe(true);
    expect(isInside('/a/ws', '/a/ws/x')).toBe(true);
    expect(isInside('/a/ws', '/a/ws2/x')).toBe(false);
    expect(isInside('/', '/etc')).toBe(true);
  });
});

describe('on disk', () => {
  let tmp: string;
  let ws: string;
  let outside: string;

  beforeEach(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-guard-')));
    ws = path.join(tmp, 'ws');
    outside = path.join(tmp, 'outside');
    await fs.mkdir(path.join(ws, 'real/sub'), { recursive: true });
    await fs.writeFile(path.join(ws, 'real/f.txt'), 'inside');
    await fs.mkdir(outside);
    await fs.writeFile(path.join(outside, 'f.txt'), 'outside');
  });
  afterEach(() => fs.rm(tmp, { recursive: true, force: true }));

  describe('realPathInside', () => {
    it('resolves an existing path and reports a missing tail without stat', async () => {
      const hit = await realPathInside(ws, 'real/f.txt', 'path');
      expect(hit).toMatchObject({
        rel: 'real/f.txt',
        realRoot: ws,
        real: path.join(ws, 'real/f.txt'),
        realRel: 'real/f.txt',
      });
      expect(hit.stat?.isFile()).toBe(true);
      const miss = await realPathInside(ws, 'real/new/deeper.txt', 'path');
      expect(miss).toMatchObject({ realRel: 'real/new/deeper.txt', stat: undefined });
    });

    it('follows one vetted hop of an inside link, mid-path or final, and can stop before the final one', async () => {
      await fs.symlink('real', path.join(ws, 'alias'));
      await fs.symlink('real/f.txt', path.join(ws, 'flink'));
      expect((await realPathInside(ws, 'alias/sub/x', 'path')).realRel).toBe('real/sub/x');
      expect((await realPathInside(ws, 'flink', 'path')).realRel).toBe('real/f.txt');
      await fs.symlink('..', path.join(ws, 'real/up')); // to the root itself: still inside
      expect((await realPathInside(ws, 'real/up/real/f.txt', 'path')).realRel).toBe('real/f.txt');
      const link = await realPathInside(ws, 'flink', 'path', { followFinal: false });
      expect(link.realRel).toBe('flink');
      expect(link.stat?.isSymbolicLink()).toBe(true);
    });

    it('works when the workspace root itself is reached through a link', async () => {
      await fs.symlink(ws, path.join(tmp, 'ws-link'));
      const rp = await realPathInside(path.join(tmp, 'ws-link'), 'real/f.txt', 'path');
      expect(rp.realRoot).toBe(ws);
      expect(rp.realRel).toBe('real/f.txt');
    });

    it.each([
      [
        'an absolute link out',
        () => fs.symlink('/etc', path.join(ws, 'l')),
        'l/passwd',
        'PATH_SYMLINK_ESCAPE',
      ],
      [
        'a relative link out',
        () => fs.symlink('../outside', path.join(ws, 'l')),
        'l/f.txt',
        'PATH_SYMLINK_ESCAPE',
      ],
      ['ln -s .. up', () => fs.symlink('..', path.join(ws, 'l')), 'l/outside/f.txt', 'PATH_SYMLINK_ESCAPE'],
      [
        'a link to a missing outside path',
        () => fs.symlink('/nonexistent/x', path.join(ws, 'l')),
        'l',
        'PATH_SYMLINK_ESCAPE',
      ],
      ['a dangling link', () => fs.symlink('nowhere', path.join(ws, 'l')), 'l', 'PATH_SYMLINK_DANGLING'],
      [
        'a link through a file',
        () => fs.symlink('real/f.txt/x', path.join(ws, 'l')),
        'l',
        'PATH_SYMLINK_DANGLING',
      ],
      [
        'a dangling link mid-path',
        () => fs.symlink('nowhere', path.join(ws, 'l')),
        'l/new.txt',
        'PATH_SYMLINK_DANGLING',
      ],
      [
        'a link to a link',
        async () => {
          await fs.symlink('real', path.join(ws, 'a1'));
          await fs.symlink('a1', path.join(ws, 'l'));
        },
        'l/f.txt',
        'PATH_SYMLINK_CHAIN',
      ],
      [
        'a link through a linked directory',
        async () => {
          await fs.symlink('real', path.join(ws, 'a1'));
          await fs.symlink('a1/f.txt', path.join(ws, 'l'));
        },
        'l',
        'PATH_SYMLINK_CHAIN',
      ],
    ])('refuses %s', async (_name, setup, p, code) => {
      await setup();
      const err = await realPathInside(ws, p, 'path').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PathRejectedError);
      expect((err as PathRejectedError).code).toBe(code);
      expect((err as PathRejectedError).message).toMatch(/symlink l/);
    });

    it('lets the link itself be addressed when the final hop is not followed', async () => {
      await fs.symlink('/etc/passwd', path.join(ws, 'l'));
      expect((await realPathInside(ws, 'l', 'path', { followFinal: false })).stat?.isSymbolicLink()).toBe(
        true,
      );
    });

    it('reports a file used as a directory and a missing workspace', async () => {
      const err = await realPathInside(ws, 'real/f.txt/x', 'path').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FileOpError);
      expect((err as FileOpError).code).toBe('ENOTDIR');
      await expect(realPathInside(path.join(tmp, 'gone'), 'x', 'path')).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('openDirInside / openFileIn (check-then-use races)', () => {
    it('refuses a directory swapped for a link after it was vetted', async () => {
      const rp = await realPathInside(ws, 'real/f.txt', 'path');
      await fs.rename(path.join(ws, 'real'), path.join(ws, 'real.orig'));
      await fs.symlink(outside, path.join(ws, 'real'));
      const err = await openDirInside(rp.realRoot, 'real', 'path').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PathRejectedError);
      expect((err as PathRejectedError).code).toBe('PATH_SYMLINK_ESCAPE');
    });

    it('refuses a final component swapped for a link (O_NOFOLLOW)', async () => {
      await realPathInside(ws, 'real/f.txt', 'path');
      await fs.rm(path.join(ws, 'real/f.txt'));
      await fs.symlink(path.join(outside, 'f.txt'), path.join(ws, 'real/f.txt'));
      const dir = await openDirInside(ws, 'real', 'path');
      try {
        const err = await openFileIn(dir, 'f.txt', C.O_RDONLY, 'path', 'real/f.txt').catch((e: unknown) => e);
        expect((err as PathRejectedError).code).toBe('PATH_SYMLINK_ESCAPE');
      } finally {
        await dir.close();
      }
    });

    it('keeps working on the directory it opened even if its path is swapped afterwards', async () => {
      const dir = await openDirInside(ws, 'real', 'path');
      try {
        await fs.rename(path.join(ws, 'real'), path.join(ws, 'real.orig'));
        await fs.symlink(outside, path.join(ws, 'real'));
        const h = await openFileIn(dir, 'f.txt', C.O_RDONLY, 'path', 'real/f.txt');
        expect(await h.readFile('utf8')).toBe('inside');
        await h.close();
      } finally {
        await dir.close();
      }
    });

    it('creates missing directories with the requested mode', async () => {
      const dir = await openDirInside(ws, 'n1/n2', 'path', { mode: 0o751 });
      await dir.close();
      expect((await fs.stat(path.join(ws, 'n1/n2'))).mode & 0o777).toBe(0o751);
      expect((await fs.stat(path.join(ws, 'n1'))).mode & 0o777).toBe(0o751);
    });
  });

  describe('assertPlainFile', () => {
    it('refuses hardlinked files, directories and FIFOs', async () => {
      await fs.link(path.join(outside, 'f.txt'), path.join(ws, 'hard'));
      const dir = await openDirInside(ws, '', 'path');
      try {
        const h = await openFileIn(dir, 'hard', C.O_RDONLY, 'path', 'hard');
        await expect(assertPlainFile(h, 'path', 'hard')).rejects.toMatchObject({ code: 'PATH_HARDLINK' });
        await h.close();
        const d = await openFileIn(dir, 'real', C.O_RDONLY, 'path', 'real');
        await expect(assertPlainFile(d, 'path', 'real')).rejects.toMatchObject({ code: 'EISDIR' });
        await d.close();
      } finally {
        await dir.close();
      }
    });
  });

  describe('readDirVerified', () => {
    it('lists sorted entries with lstat, links not followed', async () => {
      await fs.symlink(outside, path.join(ws, 'real/zlink'));
      const entries = await readDirVerified(path.join(ws, 'real'));
      expect(entries?.map((e) => [e.name, e.stat.isSymbolicLink()])).toEqual([
        ['f.txt', false],
        ['sub', false],
        ['zlink', true],
      ]);
    });

    it('refuses a directory reached through a link (a swapped intermediate component)', async () => {
      await fs.symlink('real', path.join(ws, 'alias'));
      await fs.symlink(outside, path.join(ws, 'out'));
      expect(await readDirVerified(path.join(ws, 'alias/sub'))).toBeUndefined();
      expect(await readDirVerified(path.join(ws, 'out'))).toBeUndefined();
      expect(await readDirVerified(path.join(ws, 'missing'))).toBeUndefined();
    });
  });
});
