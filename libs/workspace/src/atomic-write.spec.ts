import {
  closeSync,
  constants as C,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeFileAtomic } from './atomic-write';
import * as content from './file-content';
import { FileOpError } from './workspace.errors';

describe('writeFileAtomic', () => {
  let tmp: string;
  let ws: string;
  let outside: string;
  let dir: number;
  const mine = { mode: 0o640 };
  const names = () => readdirSync(ws).sort();
  const read = (name: string) => readFileSync(path.join(ws, name), 'utf8');

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sy-atomic-'));
    ws = path.join(tmp, 'ws');
    outside = path.join(tmp, 'outside');
    mkdirSync(ws);
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'TOP SECRET\n');
    dir = openSync(ws, C.O_RDONLY | C.O_DIRECTORY);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    closeSync(dir);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('creates the file with exactly the mode asked, whatever the umask, and leaves no temp file', async () => {
    const umask = process.umask(0o077);
    try {
      await writeFileAtomic(dir, 'a.txt', Buffer.from('new'), { rel: 'a.txt', as: { mode: 0o664 } });
    } finally {
      process.umask(umask);
    }
    expect(read('a.txt')).toBe('new');
    expect(statSync(path.join(ws, 'a.txt')).mode & 0o777).toBe(0o664);
    expect(names()).toEqual(['a.txt']);
  });

  it('gives the file the owner asked (as root, someone else)', async () => {
    const uid = process.getuid!() === 0 ? 65534 : process.getuid!();
    const gid = process.getuid!() === 0 ? 65534 : process.getgid!();
    await writeFileAtomic(dir, 'a.txt', Buffer.from('x'), {
      rel: 'a.txt',
      as: { mode: 0o600, owner: { uid, gid } },
    });
    await writeFileAtomic(dir, 'b.txt', Buffer.from('x'), {
      rel: 'b.txt',
      as: { mode: 0o600, owner: { uid, gid } },
      exclusive: true,
    });
    for (const name of ['a.txt', 'b.txt']) {
      const st = statSync(path.join(ws, name));
      expect([st.uid, st.gid, st.mode & 0o777]).toEqual([uid, gid, 0o600]);
    }
  });

  it('replaces a file with a new inode: an open reader and a hard link keep the old content whole', async () => {
    writeFileSync(path.join(ws, 'a.txt'), 'old content');
    linkSync(path.join(ws, 'a.txt'), path.join(tmp, 'old-link'));
    const reader = openSync(path.join(ws, 'a.txt'), C.O_RDONLY);
    try {
      await writeFileAtomic(dir, 'a.txt', Buffer.from('new'), { rel: 'a.txt', as: mine });
      expect(readFileSync(reader, 'utf8')).toBe('old content');
    } finally {
      closeSync(reader);
    }
    expect(read('a.txt')).toBe('new');
    expect(readFileSync(path.join(tmp, 'old-link'), 'utf8')).toBe('old content');
    expect(names()).toEqual(['a.txt']);
  });

  it('never shows a partial file: mid-write the target is the old one, and a failed write leaves it so', async () => {
    writeFileSync(path.join(ws, 'a.txt'), 'old');
    const seen: string[] = [];
    jest.spyOn(content, 'writeFdAll').mockImplementation(async (fd, data) => {
      writeSync(fd, data, 0, Math.floor(data.length / 2));
      seen.push(read('a.txt'));
      throw Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
    });
    const committed = jest.fn();
    await expect(
      writeFileAtomic(dir, 'a.txt', Buffer.from('new content'), { rel: 'a.txt', as: mine, committed }),
    ).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(seen).toEqual(['old']);
    expect(read('a.txt')).toBe('old');
    expect(names()).toEqual(['a.txt']);
    expect(committed).not.toHaveBeenCalled();
  });

  it('tells `committed` once the new content is in place, not before', async () => {
    writeFileSync(path.join(ws, 'a.txt'), 'old');
    const atCommit: string[] = [];
    await writeFileAtomic(dir, 'a.txt', Buffer.from('new'), {
      rel: 'a.txt',
      as: mine,
      committed: () => atCommit.push(read('a.txt')),
    });
    expect(atCommit).toEqual(['new']);
  });

  it('leaves what is in the way as it was when the rename fails (a directory by that name)', async () => {
    mkdirSync(path.join(ws, 'd'));
    writeFileSync(path.join(ws, 'd', 'keep'), 'k');
    await expect(writeFileAtomic(dir, 'd', Buffer.from('x'), { rel: 'd', as: mine })).rejects.toThrow();
    expect(readdirSync(path.join(ws, 'd'))).toEqual(['keep']);
    expect(names()).toEqual(['d']);
  });

  it('exclusive: refuses a name that is taken (EEXIST), even by a dangling link, and leaves no temp file', async () => {
    writeFileSync(path.join(ws, 'a.txt'), 'old');
    symlinkSync('nowhere', path.join(ws, 'dangling'));
    for (const name of ['a.txt', 'dangling']) {
      const err = await writeFileAtomic(dir, name, Buffer.from('new'), {
        rel: name,
        as: mine,
        exclusive: true,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FileOpError);
      expect((err as FileOpError).code).toBe('EEXIST');
    }
    expect(read('a.txt')).toBe('old');
    expect(readlinkSync(path.join(ws, 'dangling'))).toBe('nowhere');
    expect(names()).toEqual(['a.txt', 'dangling']);
    await writeFileAtomic(dir, 'b.txt', Buffer.from('new'), { rel: 'b.txt', as: mine, exclusive: true });
    expect(read('b.txt')).toBe('new');
  });

  it('never writes through a link at the target name: the link is replaced, its target untouched', async () => {
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 's'));
    await writeFileAtomic(dir, 's', Buffer.from('pwned'), { rel: 's', as: mine });
    expect(lstatSync(path.join(ws, 's')).isFile()).toBe(true);
    expect(read('s')).toBe('pwned');
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
  });

  it('writes into the pinned directory even after its path is swapped for a link to outside', async () => {
    mkdirSync(path.join(ws, 'd'));
    const pinned = openSync(path.join(ws, 'd'), C.O_RDONLY | C.O_DIRECTORY);
    try {
      renameSync(path.join(ws, 'd'), path.join(ws, 'd.orig'));
      symlinkSync(outside, path.join(ws, 'd'));
      await writeFileAtomic(pinned, 'planted', Buffer.from('x'), { rel: 'd/planted', as: mine });
    } finally {
      closeSync(pinned);
    }
    expect(readdirSync(path.join(ws, 'd.orig'))).toEqual(['planted']);
    expect(readdirSync(outside)).toEqual(['secret.txt']);
  });
});
