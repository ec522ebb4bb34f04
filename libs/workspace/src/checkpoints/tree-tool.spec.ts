import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { TreeTool, TreeToolError } from './tree-tool';

// The tool keeps owners, so it runs as root like the engine that uses it.
if (process.getuid?.() !== 0) throw new Error('tree tool tests run as root');

/** Every entry under `dir` with what a checkpoint must keep: type, mode, owner, mtime, size/target/contents. */
function describeTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    const full = path.join(dir, rel);
    for (const name of execFileSync('ls', ['-A', full]).toString().split('\n').filter(Boolean).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(path.join(dir, r));
      const meta = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} ${st.mtimeMs}`;
      if (st.isSymbolicLink()) out[r] = `link ${readlinkSync(path.join(dir, r))} ${st.uid}:${st.gid}`;
      else if (st.isDirectory()) {
        out[r] = `dir ${meta}`;
        walk(r);
      } else if (st.isFile()) out[r] = `file ${meta} ${readFileSync(path.join(dir, r), 'latin1')}`;
      else out[r] = 'other';
    }
  };
  walk('');
  return out;
}

describe('TreeTool (real files, in its bubblewrap jail)', () => {
  let base: string;
  let tool: TreeTool;
  beforeAll(async () => {
    base = mkdtempSync(path.join(tmpdir(), 'tree-tool-'));
    tool = new TreeTool({ binds: [base] });
    await tool.start();
  });
  afterAll(() => {
    tool.close();
    rmSync(base, { recursive: true, force: true });
  });

  let n = 0;
  const fresh = () => {
    const dir = path.join(base, `t${n++}`);
    mkdirSync(dir);
    return dir;
  };

  /** A workspace with what agents leave: nested dirs, modes, links in and out, owners, an old mtime, a fifo. */
  const populate = (dir: string) => {
    mkdirSync(path.join(dir, 'src/lib'), { recursive: true });
    writeFileSync(path.join(dir, 'src/main.py'), 'print(1)\n');
    writeFileSync(path.join(dir, 'src/lib/util.py'), 'X = 1\n');
    writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho hi\n');
    chmodSync(path.join(dir, 'run.sh'), 0o750);
    mkdirSync(path.join(dir, 'private'));
    chmodSync(path.join(dir, 'private'), 0o700);
    writeFileSync(path.join(dir, 'private/key'), 'secret');
    chmodSync(path.join(dir, 'private/key'), 0o400);
    symlinkSync('src/main.py', path.join(dir, 'main-link'));
    symlinkSync('/etc/passwd', path.join(dir, 'outside-link'));
    symlinkSync('missing', path.join(dir, 'dangling'));
    chownSync(path.join(dir, 'src/main.py'), 10001, 10002);
    lchownSync(path.join(dir, 'main-link'), 10001, 10001);
    utimesSync(path.join(dir, 'src/lib/util.py'), new Date('2020-01-02'), new Date('2020-01-02'));
    execFileSync('mkfifo', [path.join(dir, 'pipe')]);
  };

  it('counts files (links included, the fifo not: a checkpoint does not keep it), directories and bytes', async () => {
    const dir = fresh();
    populate(dir);
    expect(await tool.count(dir)).toEqual({ files: 7, directories: 3, bytes: 9 + 6 + 18 + 6 });
  });

  it("prunes fifos and sockets from a tree (a fork's copy), leaving everything else and the directories' times", async () => {
    const dir = fresh();
    populate(dir);
    execFileSync('mkfifo', [path.join(dir, 'src/lib/pipe2')]);
    execFileSync('python3', [
      '-c',
      'import os, stat, sys; os.mknod(sys.argv[1], stat.S_IFSOCK | 0o600)',
      path.join(dir, 'sock'),
    ]);
    utimesSync(path.join(dir, 'src/lib'), new Date('2021-03-04'), new Date('2021-03-04'));
    const want = describeTree(dir);
    for (const special of ['pipe', 'sock', 'src/lib/pipe2']) {
      expect(want[special]).toBe('other');
      delete want[special];
    }
    expect(await tool.prune(dir)).toEqual({ dropped: 3 });
    expect(describeTree(dir)).toEqual(want);
    expect(await tool.prune(dir)).toEqual({ dropped: 0 });
  });

  it('copies a tree exactly: entries, modes, owners, times, links as links; fifos skipped', async () => {
    const src = fresh();
    const dst = fresh();
    populate(src);
    const stats = await tool.sync(src, dst, 'content');
    expect(stats).toMatchObject({ removed: 0, kept: 0, skipped: 1 });
    const want = describeTree(src);
    delete want.pipe;
    expect(describeTree(dst)).toEqual(want);
  });

  it('makes an existing tree match: removes extras, rewrites changes, replaces kinds, keeps what is equal', async () => {
    const src = fresh();
    const dst = fresh();
    populate(src);
    await tool.sync(src, dst, 'content');
    // What a failed action leaves: a half-written file, a deleted dir, new files, a file where a dir was.
    writeFileSync(path.join(dst, 'src/main.py'), 'print(2'); // half-written
    rmSync(path.join(dst, 'src/lib'), { recursive: true });
    writeFileSync(path.join(dst, 'src/lib'), 'a file now');
    mkdirSync(path.join(dst, 'node_modules/x'), { recursive: true });
    writeFileSync(path.join(dst, 'node_modules/x/index.js'), '');
    rmSync(path.join(dst, 'main-link'));
    mkdirSync(path.join(dst, 'main-link'));
    chmodSync(path.join(dst, 'run.sh'), 0o777);
    const stats = await tool.sync(src, dst, 'content');
    expect(stats.removed).toBe(3); // src/lib (file), node_modules, main-link (dir)
    expect(stats.kept).toBeGreaterThanOrEqual(3); // private/key, outside-link, dangling
    const want = describeTree(src);
    delete want.pipe;
    expect(describeTree(dst)).toEqual(want);
    // Nothing left to do the second time.
    expect(await tool.sync(src, dst, 'content')).toMatchObject({ copied: 0, removed: 0 });
  });

  it('never follows a link in the tree it writes: a link where a directory belongs is replaced, not entered', async () => {
    const src = fresh();
    const dst = fresh();
    const victim = fresh();
    mkdirSync(path.join(src, 'a'));
    writeFileSync(path.join(src, 'a/owned.txt'), 'checkpoint');
    symlinkSync(victim, path.join(dst, 'a')); // planted by code in the workspace
    await tool.sync(src, dst, 'content');
    expect(lstatSync(path.join(dst, 'a')).isDirectory()).toBe(true);
    expect(readFileSync(path.join(dst, 'a/owned.txt'), 'utf8')).toBe('checkpoint');
    expect(existsSync(path.join(victim, 'owned.txt'))).toBe(false);
    // A link where a file belongs is replaced too; its target is never written.
    writeFileSync(path.join(src, 'f'), 'mine');
    writeFileSync(path.join(victim, 'keep'), 'victim');
    symlinkSync(path.join(victim, 'keep'), path.join(dst, 'f'));
    await tool.sync(src, dst, 'content');
    expect(readFileSync(path.join(victim, 'keep'), 'utf8')).toBe('victim');
    expect(lstatSync(path.join(dst, 'f')).isFile()).toBe(true);
  });

  it('with trust "content", a file changed behind an unchanged size and mtime is still found', async () => {
    const src = fresh();
    const dst = fresh();
    writeFileSync(path.join(src, 'f'), 'aaaa');
    await tool.sync(src, dst, 'content');
    const { atime, mtime } = statSync(path.join(dst, 'f'));
    writeFileSync(path.join(dst, 'f'), 'bbbb');
    utimesSync(path.join(dst, 'f'), atime, mtime); // `touch -d`: only ctime tells
    await tool.sync(src, dst, 'content');
    expect(readFileSync(path.join(dst, 'f'), 'utf8')).toBe('aaaa');
  });

  it('sees only the directories it is given', async () => {
    const outside = mkdtempSync(path.join(tmpdir(), 'tree-tool-outside-'));
    try {
      writeFileSync(path.join(outside, 'f'), 'x');
      await expect(tool.count(outside)).rejects.toThrow(TreeToolError);
      await expect(tool.count(outside)).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('diffs two trees: added, removed, modified with unified diffs for small text, sizes, modes, links', async () => {
    const a = fresh();
    const b = fresh();
    populate(a);
    await tool.sync(a, b, 'content');
    writeFileSync(path.join(b, 'src/main.py'), 'print(1)\nprint(2)\n');
    rmSync(path.join(b, 'src/lib'), { recursive: true });
    mkdirSync(path.join(b, 'new'));
    writeFileSync(path.join(b, 'new/data.bin'), Buffer.from([0, 1, 2, 3]));
    chmodSync(path.join(b, 'run.sh'), 0o755);
    rmSync(path.join(b, 'dangling'));
    symlinkSync('elsewhere', path.join(b, 'dangling'));
    writeFileSync(path.join(a, 'blob'), Buffer.from([0, 0xff]));
    writeFileSync(path.join(b, 'blob'), Buffer.from([1, 0xff]));
    const limits = { maxEntries: 100, maxTextBytes: 1024, maxDiffBytes: 4096 };
    const diff = await tool.diff(a, b, 'content', limits);
    expect(diff.added).toEqual([
      { path: 'new', type: 'dir' },
      { path: 'new/data.bin', type: 'file', size: 4 },
    ]);
    expect(diff.removed).toEqual([
      { path: 'src/lib', type: 'dir' },
      { path: 'src/lib/util.py', type: 'file', size: 6 },
    ]);
    expect(diff.modified).toEqual([
      { path: 'blob', type: 'file', sizeBefore: 2, sizeAfter: 2, diffOmitted: 'binary' },
      { path: 'dangling', type: 'symlink', targetBefore: 'missing', targetAfter: 'elsewhere' },
      {
        path: 'run.sh',
        type: 'file',
        sizeBefore: 18,
        sizeAfter: 18,
        modeBefore: '0750',
        modeAfter: '0755',
        contentUnchanged: true,
      },
      {
        path: 'src/main.py',
        type: 'file',
        sizeBefore: 9,
        sizeAfter: 18,
        diff: '--- a/src/main.py\n+++ b/src/main.py\n@@ -1 +1,2 @@\n print(1)\n+print(2)\n',
      },
    ]);
    expect(diff.truncated).toBe(false);
    const cut = await tool.diff(a, b, 'content', { ...limits, maxEntries: 2 });
    expect(cut.truncated).toBe(true);
    expect(cut.added.length + cut.removed.length + cut.modified.length).toBe(2);
    const noBudget = await tool.diff(a, b, 'content', { ...limits, maxDiffBytes: 10 });
    expect(noBudget.modified.find((m) => m.path === 'src/main.py')).toMatchObject({ diffOmitted: 'budget' });
  });
});
