import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { type Headers, pack } from 'tar-stream';
import { expectFileOpError, expectRejected, failure, useFileOpsFixture } from '../file-ops/file-ops.testing';
import { FileOpError } from '../workspace.errors';
import { resolveWorkspaceOptions } from '../workspace.options';
import { rangeWithin } from './file-read-stream';
import { WorkspaceTransfers } from './workspace-transfers.service';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const read = async (s: Readable) => {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return Buffer.concat(parts);
};

async function tarOf(entries: Array<Headers & { content?: string }>): Promise<Buffer> {
  const p = pack();
  const done = read(p);
  for (const { content, ...header } of entries) {
    await new Promise<void>((resolve, reject) =>
      p.entry(header, content ?? '', (err) => (err ? reject(err) : resolve())),
    );
  }
  p.finalize();
  return done;
}

/** A body that sends `first` and then fails, as a client going away mid-upload does. */
function brokenBody(first: Buffer): Readable {
  let sent = false;
  const body = new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(first);
      } else {
        this.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
      }
    },
  });
  // The error reaches the writer through its reads; the HTTP edge listens for it on the request too.
  body.on('error', () => undefined);
  return body;
}

describe('WorkspaceTransfers', () => {
  const f = useFileOpsFixture();
  let t: WorkspaceTransfers;
  const configure = (maxWorkspaceBytes = 1024 * 1024) => {
    t = new WorkspaceTransfers(resolveWorkspaceOptions({ root: f.tmp, limits: { maxWorkspaceBytes } }));
  };
  beforeEach(() => configure());
  const leftovers = () =>
    fs
      .readdirSync(f.ws, { recursive: true })
      .map(String)
      .filter((n) => n.includes('.switchyard-'));

  describe('rangeWithin', () => {
    it('cuts an end past the file, refuses a start at or past its end', () => {
      expect(rangeWithin(undefined, 10, 'f')).toEqual({ start: 0, end: 9 });
      expect(rangeWithin({ start: 3 }, 10, 'f')).toEqual({ start: 3, end: 9 });
      expect(rangeWithin({ start: 3, end: 100 }, 10, 'f')).toEqual({ start: 3, end: 9 });
      expect(rangeWithin({ start: 9, end: 9 }, 10, 'f')).toEqual({ start: 9, end: 9 });
      for (const [start, size] of [
        [10, 10],
        [0, 0],
      ]) {
        const err = (() => {
          try {
            rangeWithin({ start }, size, 'f');
          } catch (e) {
            return e as FileOpError;
          }
        })();
        expect(err).toBeInstanceOf(FileOpError);
        expect(err?.code).toBe('RANGE_NOT_SATISFIABLE');
        expect(err?.details.size).toBe(size);
      }
    });
  });

  describe('files', () => {
    it('writes a stream atomically with its sha256 and reads ranges of it back', async () => {
      const data = Buffer.from('0123456789'.repeat(1000));
      const out = await t.writeFile(
        f.ws,
        'a/b/c.bin',
        Readable.from([data.subarray(0, 7), data.subarray(7)]),
        {
          overwrite: true,
        },
      );
      expect(out).toMatchObject({ path: 'a/b/c.bin', size: data.length, sha256: sha(data) });
      expect(fs.readFileSync(path.join(f.ws, 'a/b/c.bin')).equals(data)).toBe(true);
      const whole = await t.readFile(f.ws, 'a/b/c.bin');
      expect(whole).toMatchObject({ size: data.length, start: 0, end: data.length - 1 });
      expect((await read(whole.stream)).equals(data)).toBe(true);
      const part = await t.readFile(f.ws, 'a/b/c.bin', { start: 5, end: 14 });
      expect((await read(part.stream)).toString()).toBe('5678901234');
      await expectFileOpError(t.readFile(f.ws, 'a/b/c.bin', { start: data.length }), 'RANGE_NOT_SATISFIABLE');
      await t.writeFile(f.ws, 'empty', Readable.from([]), { overwrite: true });
      expect((await read((await t.readFile(f.ws, 'empty')).stream)).length).toBe(0);
      expect(leftovers()).toEqual([]);
    });

    it('refuses missing files, directories, traversal and symlinks out, like the path guard', async () => {
      await expectFileOpError(t.readFile(f.ws, 'nope'), 'FILE_NOT_FOUND');
      await f.put('plain.txt', 'x');
      await expectFileOpError(t.readFile(f.ws, 'plain.txt/below'), 'NOT_A_DIRECTORY');
      await expectFileOpError(
        t.writeFile(f.ws, 'plain.txt/below', Readable.from(['x']), { overwrite: true }),
        'NOT_A_DIRECTORY',
      );
      fs.mkdirSync(path.join(f.ws, 'dir'));
      await expectFileOpError(t.readFile(f.ws, 'dir'), 'NOT_A_FILE');
      await expectFileOpError(
        t.writeFile(f.ws, 'dir', Readable.from(['x']), { overwrite: true }),
        'NOT_A_FILE',
      );
      await expectRejected(t.readFile(f.ws, '../outside/secret.txt'), 'PATH_ESCAPE');
      fs.symlinkSync(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'out'));
      fs.symlinkSync(f.outside, path.join(f.ws, 'outdir'));
      await expectRejected(t.readFile(f.ws, 'out'), 'PATH_SYMLINK_ESCAPE');
      await expectRejected(
        t.writeFile(f.ws, 'out', Readable.from(['x']), { overwrite: true }),
        'PATH_SYMLINK_ESCAPE',
      );
      await expectRejected(
        t.writeFile(f.ws, 'outdir/new', Readable.from(['x']), { overwrite: true }),
        'PATH_SYMLINK_ESCAPE',
      );
      fs.linkSync(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'hard'));
      await expectRejected(t.readFile(f.ws, 'hard'), 'PATH_HARDLINK');
      expect(fs.readFileSync(path.join(f.outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET\n');
      expect(fs.readdirSync(f.outside)).toEqual(['secret.txt']);
    });

    it('overwrite false refuses an existing file; a broken body or the quota leave the old file and no temp file', async () => {
      await f.put('keep.txt', 'old');
      await expectFileOpError(
        t.writeFile(f.ws, 'keep.txt', Readable.from(['new']), { overwrite: false }),
        'FILE_EXISTS',
      );
      const broken = await failure(
        t.writeFile(f.ws, 'keep.txt', brokenBody(Buffer.alloc(256 * 1024)), { overwrite: true }),
      );
      expect(broken.message).toBe('aborted');
      configure(64 * 1024);
      await expectFileOpError(
        t.writeFile(f.ws, 'keep.txt', Readable.from([Buffer.alloc(40 * 1024), Buffer.alloc(40 * 1024)]), {
          overwrite: true,
        }),
        'WORKSPACE_FULL',
      );
      expect(await f.get('keep.txt')).toBe('old');
      expect(leftovers()).toEqual([]);
    });
  });

  describe('archives', () => {
    it('extracts a tar and a gzip tar (told by magic bytes), and packs a directory back', async () => {
      const tar = await tarOf([
        { name: './d/', type: 'directory' },
        { name: 'd/x.sh', content: 'echo x\n', mode: 0o755 },
        { name: 'd/l', type: 'symlink', linkname: 'x.sh' },
        { name: 'd/up', type: 'symlink', linkname: '../top.txt' },
        { name: 'top.txt', content: 'top' },
        { name: 'd/h', type: 'link', linkname: 'd/x.sh' },
      ]);
      expect(await t.extractArchive(f.ws, 'in', Readable.from([tar]))).toEqual({
        path: 'in',
        files: 3,
        directories: 1,
        bytes: 7 + 3 + 7,
      });
      expect(fs.readlinkSync(path.join(f.ws, 'in/d/up'))).toBe('../top.txt');
      expect(fs.statSync(path.join(f.ws, 'in/d/h')).nlink).toBe(1);
      expect(fs.statSync(path.join(f.ws, 'in/d/x.sh')).mode & 0o100).toBe(0o100);
      // The same again, gzipped, one byte at a time: merged over what is there.
      const gz = gzipSync(tar);
      await t.extractArchive(f.ws, 'in', Readable.from([...gz].map((b) => Buffer.from([b]))));
      const packed = await t.packDirectory(f.ws, 'in');
      const names: string[] = [];
      const { extract } = await import('tar-stream');
      const ex = extract();
      ex.on('entry', (h: Headers, s: Readable, next: () => void) => {
        names.push(`${h.type}:${h.name}`);
        s.resume();
        s.on('end', next);
      });
      await new Promise((resolve, reject) => {
        ex.on('finish', resolve);
        ex.on('error', reject);
        packed.stream.pipe(ex);
      });
      expect(names).toEqual([
        'directory:d/',
        'file:d/h',
        'symlink:d/l',
        'symlink:d/up',
        'file:d/x.sh',
        'file:top.txt',
      ]);
      expect(leftovers()).toEqual([]);
    });

    it.each([
      ['an absolute name', [{ name: '/etc/evil', content: 'x' }], 'PATH_ABSOLUTE'],
      [
        '..',
        [
          { name: 'ok.txt', content: 'x' },
          { name: 'a/../../evil', content: 'x' },
        ],
        'PATH_ESCAPE',
      ],
      [
        'a symlink out',
        [
          { name: 'ok.txt', content: 'x' },
          { name: 'l', type: 'symlink', linkname: '../../outside' },
        ],
        'PATH_SYMLINK_ESCAPE',
      ],
      [
        'an absolute symlink',
        [{ name: 'l', type: 'symlink', linkname: '/etc/passwd' }],
        'PATH_SYMLINK_ESCAPE',
      ],
      [
        'an entry through a link of the archive',
        [
          { name: 'l', type: 'symlink', linkname: '.' },
          { name: 'l/x', content: 'x' },
        ],
        'PATH_SYMLINK_ESCAPE',
      ],
      [
        'a hard link to outside the archive',
        [{ name: 'h', type: 'link', linkname: '../outside/secret.txt' }],
        'PATH_ESCAPE',
      ],
      [
        'a fifo',
        [
          { name: 'ok.txt', content: 'x' },
          { name: 'p', type: 'fifo' },
        ],
        'ARCHIVE_INVALID',
      ],
      ['a device', [{ name: 'dev', type: 'character-device', devmajor: 1, devminor: 3 }], 'ARCHIVE_INVALID'],
      ['a control character', [{ name: 'a\nb', content: 'x' }], 'PATH_CONTROL_CHAR'],
    ] as Array<[string, Array<Headers & { content?: string }>, string]>)(
      'refuses %s and writes nothing',
      async (_what, entries, code) => {
        const err = await failure(t.extractArchive(f.ws, 'dest', Readable.from([await tarOf(entries)])));
        expect(err.code).toBe(code);
        expect(fs.readdirSync(f.ws)).toEqual([]);
        expect(fs.readdirSync(f.outside)).toEqual(['secret.txt']);
      },
    );

    it('refuses a body that is no tar, an archive over the quota, and a file over a directory', async () => {
      await expectFileOpError(
        t.extractArchive(f.ws, '', Readable.from([Buffer.from('x'.repeat(2000))])),
        'ARCHIVE_INVALID',
      );
      configure(1000);
      await expectFileOpError(
        t.extractArchive(
          f.ws,
          '',
          Readable.from([await tarOf([{ name: 'big', content: 'x'.repeat(5000) }])]),
        ),
        'WORKSPACE_FULL',
      );
      configure();
      fs.mkdirSync(path.join(f.ws, 'taken'));
      await expectFileOpError(
        t.extractArchive(f.ws, '', Readable.from([await tarOf([{ name: 'taken', content: 'x' }])])),
        'NOT_A_FILE',
      );
      expect(leftovers()).toEqual([]);
    });

    it('packs without following links and without hard-linked files or the session home', async () => {
      await f.put('a.txt', 'a');
      await f.put('sub/empty.txt', '');
      await f.put('.home/pkg.py', 'x');
      fs.symlinkSync(f.outside, path.join(f.ws, 'out'));
      fs.linkSync(path.join(f.outside, 'secret.txt'), path.join(f.ws, 'hard'));
      const tar = await read((await t.packDirectory(f.ws, '')).stream);
      expect(tar.includes(Buffer.from('TOP SECRET'))).toBe(false);
      expect(tar.includes(Buffer.from('pkg.py'))).toBe(false);
      expect(tar.includes(Buffer.from('a.txt'))).toBe(true);
      expect(tar.includes(Buffer.from('sub/empty.txt'))).toBe(true);
      await expectFileOpError(t.packDirectory(f.ws, 'a.txt'), 'NOT_A_DIRECTORY');
      await expectRejected(t.packDirectory(f.ws, 'out'), 'PATH_SYMLINK_ESCAPE');
    });
  });
});
