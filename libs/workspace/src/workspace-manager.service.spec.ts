import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { InvalidInputError } from '@switchyard/common';
import { isMountPoint, loopsBackedBy } from './mount-table';
import { WorkspaceManager } from './workspace-manager.service';
import { LoopImageQuota, WorkspaceQuota } from './workspace-quota';
import { WorkspaceUsage } from './workspace-usage';
import { resolveWorkspaceOptions, type WorkspaceModuleOptions } from './workspace.options';

const isRoot = process.getuid?.() === 0;

describe('WorkspaceManager', () => {
  let tmp: string;
  let root: string;
  const make = (o: Partial<WorkspaceModuleOptions> = {}) =>
    new WorkspaceManager(resolveWorkspaceOptions({ root, ...o }));

  beforeEach(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-wsm-')));
    root = path.join(tmp, 'data/workspaces');
  });
  afterEach(() => fs.rm(tmp, { recursive: true, force: true }));

  describe('create', () => {
    it('makes <root>/<id> idempotently and keeps the data dir non-listable by others', async () => {
      const wm = make({ sandboxUid: null });
      const dir = await wm.create('s-1');
      expect(dir).toBe(path.join(root, 's-1'));
      expect(await wm.create('s-1')).toBe(dir);
      expect((await fs.stat(dir)).mode & 0o777).toBe(0o700);
      expect((await fs.stat(root)).mode & 0o777).toBe(0o711);
    });

    it('tightens a data dir that group/others could read or write', async () => {
      await fs.mkdir(root, { recursive: true });
      await fs.chmod(root, 0o777);
      await make({ sandboxUid: null, dirMode: 0o777 }).create('s');
      expect((await fs.stat(root)).mode & 0o777).toBe(0o711);
      expect((await fs.stat(path.join(root, 's'))).mode & 0o777).toBe(0o777); // umask does not interfere
    });

    it('hands the directory to the sandbox uid when running as root, else leaves the owner alone', async () => {
      const dir = await make({ sandboxUid: 65534, sandboxGid: 65534 }).create('s');
      const st = await fs.stat(dir);
      if (isRoot) {
        expect([st.uid, st.gid]).toEqual([65534, 65534]);
      } else {
        expect(st.uid).toBe(process.getuid!());
      }
      const kept = await make({ sandboxUid: null }).create('t');
      expect((await fs.stat(kept)).uid).toBe(process.getuid!());
    });

    it('makes the session’s home inside it, owned like the workspace, and keeps one that is there', async () => {
      const wm = make({ sandboxUid: 65534, sandboxGid: 65534 });
      const dir = await wm.create('s');
      const home = await fs.lstat(path.join(dir, '.home'));
      expect(home.isDirectory()).toBe(true);
      expect(home.mode & 0o777).toBe(0o700);
      expect(home.uid).toBe(isRoot ? 65534 : process.getuid!());
      await fs.writeFile(path.join(dir, '.home', '.profile'), 'kept');
      await wm.create('s');
      expect(await fs.readFile(path.join(dir, '.home', '.profile'), 'utf8')).toBe('kept');
      // A link the session's code put in its place is left alone, never followed.
      await fs.rm(path.join(dir, '.home'), { recursive: true });
      const target = path.join(tmp, 'elsewhere');
      await fs.mkdir(target, { mode: 0o755 });
      await fs.chmod(target, 0o755);
      await fs.symlink(target, path.join(dir, '.home'));
      await wm.create('s');
      expect((await fs.lstat(path.join(dir, '.home'))).isSymbolicLink()).toBe(true);
      expect((await fs.stat(target)).mode & 0o777).toBe(0o755);
    });

    it('refuses a session path that is a file or a link', async () => {
      const wm = make({ sandboxUid: null });
      await fs.mkdir(root, { recursive: true });
      await fs.writeFile(path.join(root, 'f'), '');
      await expect(wm.create('f')).rejects.toThrow(/not a directory/);
      const target = path.join(tmp, 'target');
      await fs.mkdir(target, { mode: 0o755 });
      await fs.chmod(target, 0o755);
      await fs.symlink(target, path.join(root, 'l'));
      await expect(wm.create('l')).rejects.toThrow(/not a directory/);
      expect((await fs.stat(target)).mode & 0o777).toBe(0o755); // no chmod through the link
    });
  });

  describe('dirOf / remove', () => {
    it.each(['', '..', '../x', 'a/b', 'a b', 'x'.repeat(129), 'é'])('refuses session id %j', (id) => {
      expect(() => make().dirOf(id)).toThrow(InvalidInputError);
    });

    it('removes a workspace recursively and idempotently, never through links', async () => {
      const wm = make({ sandboxUid: null });
      const outside = path.join(tmp, 'outside');
      await fs.mkdir(outside);
      await fs.writeFile(path.join(outside, 'keep'), 'k');
      const dir = await wm.create('s');
      await fs.mkdir(path.join(dir, 'a/b'), { recursive: true });
      await fs.writeFile(path.join(dir, 'a/b/f'), 'x');
      await fs.symlink(outside, path.join(dir, 'a/out'));
      await wm.remove('s');
      await wm.remove('s');
      expect(await fs.readdir(root)).toEqual([]);
      expect(await fs.readdir(outside)).toEqual(['keep']);
      await expect(make().remove('../x')).rejects.toBeInstanceOf(InvalidInputError);
      await make({ root: path.join(tmp, 'never-created') }).remove('s'); // no data dir yet: fine
    });
  });

  describe('usage, snapshot, changedPaths', () => {
    it('works when the data dir is reached through a symlink', async () => {
      await fs.mkdir(path.join(tmp, 'real-data'));
      await fs.symlink(path.join(tmp, 'real-data'), path.join(tmp, 'data-link'));
      const wm = new WorkspaceManager(
        resolveWorkspaceOptions({ root: path.join(tmp, 'data-link'), sandboxUid: null }),
      );
      const dir = await wm.create('s');
      await fs.writeFile(path.join(dir, 'f'), 'abc');
      expect(await wm.usageBytes('s')).toBe(3);
      expect([...(await wm.snapshot('s')).entries.keys()]).toEqual(['f']);
    });

    it('leaves the session’s home out of snapshots: what an action installed is not a file of its work', async () => {
      const wm = make({ sandboxUid: null });
      const dir = await wm.create('s');
      const before = await wm.snapshot('s');
      await fs.mkdir(path.join(dir, '.home', '.local'), { recursive: true });
      await fs.writeFile(path.join(dir, '.home', '.local', 'pkg.py'), 'x');
      await fs.writeFile(path.join(dir, 'work.txt'), 'y');
      const after = await wm.snapshot('s');
      expect([...after.entries.keys()]).toEqual(['work.txt']);
      expect(wm.changedPaths(before, after)).toEqual(['work.txt']);
    });

    it('sums file sizes', async () => {
      const wm = make({ sandboxUid: null });
      const dir = await wm.create('s');
      await fs.writeFile(path.join(dir, 'a'), 'x'.repeat(10));
      await fs.mkdir(path.join(dir, 'd'));
      await fs.writeFile(path.join(dir, 'd/b'), 'y'.repeat(5));
      expect(await wm.usageBytes('s')).toBe(15);
    });

    it('reports added, modified and deleted files (and links), not directories', async () => {
      const wm = make({ sandboxUid: null });
      const dir = await wm.create('s');
      await fs.writeFile(path.join(dir, 'same'), '1');
      await fs.writeFile(path.join(dir, 'mod'), '1');
      await fs.writeFile(path.join(dir, 'gone'), '1');
      const before = await wm.snapshot('s');
      expect(before.partial).toBe(false);
      expect([...before.entries.keys()]).toEqual(['gone', 'mod', 'same']);

      await fs.writeFile(path.join(dir, 'mod'), '22');
      await fs.rm(path.join(dir, 'gone'));
      await fs.mkdir(path.join(dir, 'new-dir'));
      await fs.writeFile(path.join(dir, 'new-dir/file'), '');
      await fs.symlink('same', path.join(dir, 'link'));
      const after = await wm.snapshot('s');
      expect(wm.changedPaths(before, after)).toEqual(['gone', 'link', 'mod', 'new-dir/file']);
      expect(wm.changedPaths(after, after)).toEqual([]);
    });

    it('caps a snapshot and compares partial ones only over what both cover', async () => {
      const wm = make({ sandboxUid: null, snapshotMaxEntries: 3 });
      const dir = await wm.create('s');
      for (const f of ['b', 'c', 'd', 'e', 'f']) await fs.writeFile(path.join(dir, f), '1');
      const before = await wm.snapshot('s');
      expect(before.partial).toBe(true);
      expect([...before.entries.keys()]).toEqual(['b', 'c', 'd']);
      await fs.writeFile(path.join(dir, 'a'), 'new'); // pushes d out of the capped window
      await fs.writeFile(path.join(dir, 'c'), 'changed');
      const after = await wm.snapshot('s');
      expect([...after.entries.keys()]).toEqual(['a', 'b', 'c']);
      // d is not reported as deleted: it only slid past the cap.
      expect(wm.changedPaths(before, after)).toEqual(['a', 'c']);
    });
  });

  describe('with a quota', () => {
    /** Records what the manager asks; `recover` resolves when the test says so. */
    class FakeQuota extends WorkspaceQuota {
      readonly mode = 'loop' as const;
      readonly calls: string[] = [];
      recovered!: () => void;
      private readonly recovery = new Promise<void>((resolve) => (this.recovered = resolve));
      capped = true;
      async recover(): Promise<void> {
        this.calls.push('recover');
        await this.recovery;
      }
      async provision(id: string): Promise<void> {
        this.calls.push(`provision ${id}`);
      }
      async release(id: string): Promise<boolean> {
        this.calls.push(`release ${id}`);
        return this.capped;
      }
      async close(): Promise<void> {
        this.calls.push('close');
      }
    }

    it('creates nothing before the start-up recovery is done, and leaves capped removals to the quota', async () => {
      const quota = new FakeQuota();
      const wm = new WorkspaceManager(resolveWorkspaceOptions({ root, sandboxUid: null }), undefined, quota);
      const creating = wm.create('s');
      await new Promise((r) => setTimeout(r, 20));
      await expect(fs.stat(path.join(root, 's'))).rejects.toThrow(/ENOENT/);
      quota.recovered();
      const dir = await creating;
      expect(quota.calls).toEqual(['recover', 'provision s']);
      await wm.remove('s');
      expect(await fs.readdir(dir)).toEqual(['.home']); // still there (its home only): the quota removes it
      quota.capped = false; // never capped: the manager removes it
      await wm.remove('s');
      await expect(fs.stat(dir)).rejects.toThrow(/ENOENT/);
      await wm.onApplicationShutdown();
      expect(quota.calls.slice(2)).toEqual(['release s', 'release s', 'close']);
    });

    it('removes a capped workspace at once, and the same id made again starts empty', async () => {
      const options = resolveWorkspaceOptions({
        root,
        sandboxUid: null,
        limits: { maxWorkspaceBytes: 16 << 20 },
      });
      const quota = new LoopImageQuota({
        root,
        imageDir: options.imageDir,
        bytes: options.limits.maxWorkspaceBytes,
        owner: null,
        poolSize: 1,
        fs: 'btrfs',
      });
      const wm = new WorkspaceManager(options, new WorkspaceUsage(), quota);
      await wm.onModuleInit();
      try {
        const dir = await wm.create('s');
        expect(isMountPoint(dir)).toBe(true);
        await fs.writeFile(path.join(dir, 'old.txt'), 'old');
        await wm.remove('s');
        await expect(fs.stat(dir)).rejects.toThrow(/ENOENT/); // gone when remove resolves
        expect(await wm.create('s')).toBe(dir);
        expect(await fs.readdir(dir)).toEqual(['.home']); // nothing but the session's (empty) home
        expect(isMountPoint(dir)).toBe(true);
        await wm.remove('s');
      } finally {
        await wm.onApplicationShutdown(); // unmounts what is left, so that the data dir can go
      }
      expect(isMountPoint(root)).toBe(false);
      for (let i = 0; i < 100 && loopsBackedBy(options.imageDir).length > 0; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(loopsBackedBy(options.imageDir)).toEqual([]);
    });
  });
});
