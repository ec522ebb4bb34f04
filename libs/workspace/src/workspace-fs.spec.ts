import { constants as C } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { compareSegments, diskUsage, removeEntry, walk, type WalkState } from './workspace-fs';

describe('workspace-fs', () => {
  let tmp: string;
  let outside: string;

  beforeEach(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-wsfs-')));
    outside = path.join(tmp, 'outside');
    await fs.mkdir(outside);
    await fs.writeFile(path.join(outside, 'keep.txt'), 'keep');
  });
  afterEach(() => fs.rm(tmp, { recursive: true, force: true }));

  const collect = async (start: string, opts: Parameters<typeof walk>[1]) => {
    const state: WalkState = { scanned: 0, partial: false };
    const rels: string[] = [];
    for await (const e of walk(start, opts, state)) rels.push(e.rel);
    return { rels, state };
  };

  it('walks depth-first in segment order, resumes after a cursor and stops at the cap', async () => {
    const root = path.join(tmp, 'w');
    for (const f of ['a/x', 'a/y/z', 'a-b', 'b']) {
      await fs.mkdir(path.dirname(path.join(root, f)), { recursive: true });
      await fs.writeFile(path.join(root, f), '');
    }
    const all = await collect(root, { recursive: true, maxEntries: 100 });
    expect(all.rels).toEqual(['a', 'a/x', 'a/y', 'a/y/z', 'a-b', 'b']);
    expect([...all.rels].sort((p, q) => compareSegments(p.split('/'), q.split('/')))).toEqual(all.rels);
    expect((await collect(root, { recursive: true, maxEntries: 100, after: ['a', 'y'] })).rels).toEqual([
      'a/y/z',
      'a-b',
      'b',
    ]);
    const capped = await collect(root, { recursive: true, maxEntries: 3 });
    expect(capped.rels).toEqual(['a', 'a/x', 'a/y']);
    expect(capped.state.partial).toBe(true);
  });

  it('counts regular files only for usage, never through links', async () => {
    const root = path.join(tmp, 'u');
    await fs.mkdir(path.join(root, 'd'), { recursive: true });
    await fs.writeFile(path.join(root, 'd/f'), 'x'.repeat(100));
    await fs.writeFile(path.join(outside, 'big'), 'y'.repeat(10_000));
    await fs.symlink(outside, path.join(root, 'ext'));
    expect(await diskUsage(root, 1000)).toEqual({ bytes: 100, partial: false });
  });

  describe('removeEntry', () => {
    const withDir = async (dir: string, fn: (h: fs.FileHandle) => Promise<void>) => {
      const h = await fs.open(dir, C.O_RDONLY | C.O_DIRECTORY);
      try {
        await fn(h);
      } finally {
        await h.close();
      }
    };

    it('removes a tree deeper than the open-fd bound, and nothing a link inside points to', async () => {
      let deep = path.join(tmp, 'victim');
      for (let i = 0; i < 80; i++) deep = path.join(deep, `d${i}`);
      await fs.mkdir(deep, { recursive: true });
      await fs.writeFile(path.join(deep, 'leaf'), 'x');
      await fs.symlink(outside, path.join(tmp, 'victim/d0/link-to-outside'));
      await fs.symlink(path.join(outside, 'keep.txt'), path.join(deep, 'file-link'));
      await withDir(tmp, (h) => removeEntry(h, 'victim', 'victim'));
      expect((await fs.readdir(tmp)).sort()).toEqual(['outside']); // moved-up subtrees are gone too
      expect(await fs.readFile(path.join(outside, 'keep.txt'), 'utf8')).toBe('keep');
    });

    it('removes files and links, and is quiet about missing names', async () => {
      await fs.writeFile(path.join(tmp, 'f'), '');
      await fs.symlink(outside, path.join(tmp, 'l'));
      await withDir(tmp, async (h) => {
        await removeEntry(h, 'f', 'f');
        await removeEntry(h, 'l', 'l');
        await removeEntry(h, 'never-existed', 'never-existed');
      });
      expect(await fs.readdir(tmp)).toEqual(['outside']);
      expect(await fs.readdir(outside)).toEqual(['keep.txt']);
    });
  });
});
