import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { extractTo, packDirectory } from './local-tar';

/** A tar made of the given entries, as a stream. */
function tarOf(
  entries: Array<{ name: string; type?: 'file' | 'directory' | 'symlink'; body?: string }>,
): Readable {
  const pack = tar.pack();
  for (const e of entries) {
    if (e.type === 'symlink') pack.entry({ name: e.name, type: 'symlink', linkname: '/etc/passwd' });
    else if (e.type === 'directory') pack.entry({ name: e.name, type: 'directory' });
    else pack.entry({ name: e.name }, e.body ?? '');
  }
  pack.finalize();
  return pack;
}

describe('local tar streams (files.upload/download of a directory)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'local-tar-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('packs a directory and extracts it back the same: files, empty directories, modes', async () => {
    const src = path.join(dir, 'src');
    mkdirSync(path.join(src, 'a', 'b'), { recursive: true });
    mkdirSync(path.join(src, 'empty'));
    writeFileSync(path.join(src, 'top.txt'), 'top\n');
    writeFileSync(path.join(src, 'a', 'b', 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
    symlinkSync('/etc/passwd', path.join(src, 'link'));
    const summary = await extractTo(path.join(dir, 'out'), packDirectory(src));
    expect(summary).toEqual({ files: 2, directories: 3, bytes: 14 });
    expect(readdirSync(path.join(dir, 'out')).sort()).toEqual(['a', 'empty', 'top.txt']); // the link is left out
    expect(readFileSync(path.join(dir, 'out', 'a', 'b', 'run.sh'), 'utf8')).toBe('#!/bin/sh\n');
    expect(readFileSync(path.join(dir, 'out', 'top.txt'), 'utf8')).toBe('top\n');
  });

  it.each([
    ['a parent escape', [{ name: '../evil.txt' }], 'outside the destination'],
    ['a nested escape', [{ name: 'ok/../../evil.txt' }], 'outside the destination'],
    ['an absolute name', [{ name: '/tmp/evil.txt' }], 'outside the destination'],
    ['a link', [{ name: 'link', type: 'symlink' as const }], 'only files and directories'],
  ])('refuses %s and writes nothing outside', async (_what, entries, message) => {
    await expect(extractTo(path.join(dir, 'out'), tarOf(entries))).rejects.toThrow(message);
    expect(readdirSync(dir)).toEqual(['out']);
  });

  it('extracts a tar whose first entry is the directory itself ("./")', async () => {
    const summary = await extractTo(
      path.join(dir, 'out'),
      tarOf([
        { name: './', type: 'directory' },
        { name: './x/y.txt', body: 'y' },
      ]),
    );
    expect(summary).toEqual({ files: 1, directories: 1, bytes: 1 });
    expect(readFileSync(path.join(dir, 'out', 'x', 'y.txt'), 'utf8')).toBe('y');
  });
});
