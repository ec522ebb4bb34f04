import { execFileSync } from 'node:child_process';
import {
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  FileOpError,
  PathRejectedError,
  resolveWorkspaceOptions,
  WorkspaceManager,
} from '@switchyard/workspace';
import { WorkspaceFiles } from './workspace-files';

describe('WorkspaceFiles', () => {
  let tmp: string;
  let outside: string;
  let ws: string;
  let files: WorkspaceFiles;
  const sid = 'ses_files';

  beforeEach(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sy-browser-files-'));
    outside = path.join(tmp, 'outside');
    mkdirSync(outside);
    const options = resolveWorkspaceOptions({
      root: path.join(tmp, 'workspaces'),
      limits: { maxWorkspaceBytes: 4096 },
      sandboxUid: 10001,
      sandboxGid: 10001,
    });
    const manager = new WorkspaceManager(options);
    ws = await manager.create(sid);
    files = new WorkspaceFiles(manager, options);
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  const rejection = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
    } catch (err) {
      if (err instanceof PathRejectedError || err instanceof FileOpError) return err.code;
      throw err;
    }
    throw new Error('expected a refusal');
  };

  describe('write', () => {
    it('creates parents and the file with the workspace owner and mode, atomically', async () => {
      const real = await files.write(sid, ws, 'shots/deep/a.png', Buffer.from('png-bytes'));
      expect(real).toBe('shots/deep/a.png');
      const file = path.join(ws, 'shots/deep/a.png');
      expect(readFileSync(file, 'utf8')).toBe('png-bytes');
      const root = statSync(ws);
      for (const p of [file, path.join(ws, 'shots'), path.join(ws, 'shots/deep')]) {
        const st = statSync(p);
        expect([st.uid, st.gid]).toEqual([root.uid, root.gid]);
      }
      expect(statSync(file).mode & 0o777).toBe(root.mode & 0o666);
      expect(statSync(path.join(ws, 'shots')).mode & 0o777).toBe(root.mode & 0o777);
      expect(readdirSync(path.join(ws, 'shots/deep'))).toEqual(['a.png']);
    });

    it('replaces a file (new inode, so a hard link elsewhere keeps its content)', async () => {
      writeFileSync(path.join(ws, 'a.png'), 'old');
      linkSync(path.join(ws, 'a.png'), path.join(outside, 'linked'));
      await files.write(sid, ws, 'a.png', Buffer.from('new'));
      expect(readFileSync(path.join(ws, 'a.png'), 'utf8')).toBe('new');
      expect(readFileSync(path.join(outside, 'linked'), 'utf8')).toBe('old');
    });

    it('refuses traversal, absolute paths and the root', async () => {
      expect(await rejection(files.write(sid, ws, '../x.png', Buffer.from('x')))).toBe('PATH_ESCAPE');
      expect(await rejection(files.write(sid, ws, '/etc/x.png', Buffer.from('x')))).toBe('PATH_ABSOLUTE');
      expect(await rejection(files.write(sid, ws, '.', Buffer.from('x')))).toBe('PATH_IS_ROOT');
      expect(readdirSync(tmp).sort()).toEqual(['outside', 'workspaces']);
    });

    it('never follows a link out of the workspace, in a parent or as the file itself', async () => {
      symlinkSync(outside, path.join(ws, 'out'));
      symlinkSync(path.join(outside, 'target.png'), path.join(ws, 'shot.png'));
      expect(await rejection(files.write(sid, ws, 'out/x.png', Buffer.from('x')))).toBe(
        'PATH_SYMLINK_ESCAPE',
      );
      expect(await rejection(files.write(sid, ws, 'shot.png', Buffer.from('x')))).toBe('PATH_SYMLINK_ESCAPE');
      expect(readdirSync(outside)).toEqual([]);
    });

    it('follows a link that stays inside', async () => {
      mkdirSync(path.join(ws, 'real'));
      symlinkSync('real', path.join(ws, 'alias'));
      expect(await files.write(sid, ws, 'alias/x.png', Buffer.from('x'))).toBe('real/x.png');
      expect(lstatSync(path.join(ws, 'real/x.png')).isFile()).toBe(true);
    });

    it('refuses a directory in the way and a write over the workspace cap', async () => {
      mkdirSync(path.join(ws, 'dir'));
      expect(await rejection(files.write(sid, ws, 'dir', Buffer.from('x')))).toBe('EISDIR');
      expect(await rejection(files.write(sid, ws, 'big.bin', Buffer.alloc(5000)))).toBe('WORKSPACE_FULL');
      // Nothing written: the directory in the way and the session's home (`.home`) are all there is.
      expect(readdirSync(ws).sort()).toEqual(['.home', 'dir']);
    });
  });

  describe('read', () => {
    it('reads a regular file with its name and real path', async () => {
      mkdirSync(path.join(ws, 'in'));
      writeFileSync(path.join(ws, 'in/hello.txt'), 'hello');
      expect(await files.read(ws, 'in/hello.txt', 100)).toEqual({
        buffer: Buffer.from('hello'),
        name: 'hello.txt',
        realRel: 'in/hello.txt',
      });
    });

    it('refuses what it must not read', async () => {
      writeFileSync(path.join(outside, 'secret'), 'secret');
      symlinkSync(path.join(outside, 'secret'), path.join(ws, 'link'));
      linkSync(path.join(outside, 'secret'), path.join(ws, 'hard'));
      writeFileSync(path.join(ws, 'big'), 'x'.repeat(200));
      mkdirSync(path.join(ws, 'dir'));
      execFileSync('mkfifo', [path.join(ws, 'fifo')]);
      expect(await rejection(files.read(ws, 'link', 100))).toBe('PATH_SYMLINK_ESCAPE');
      expect(await rejection(files.read(ws, 'hard', 100))).toBe('PATH_HARDLINK');
      expect(await rejection(files.read(ws, 'big', 100))).toBe('FILE_TOO_LARGE');
      expect(await rejection(files.read(ws, 'dir', 100))).toBe('EISDIR');
      expect(await rejection(files.read(ws, 'fifo', 100))).toBe('NOT_REGULAR_FILE');
      expect(await rejection(files.read(ws, 'missing', 100))).toBe('ENOENT');
      expect(await rejection(files.read(ws, '../outside/secret', 100))).toBe('PATH_ESCAPE');
    });
  });
});
