/**
 * file-transfer.py, the file transfer API's program in a Kubernetes session pod, run as the engine runs it (a fresh
 * `python3 -I -S`, the op in argv, framed bytes on stdin, a JSON line and bytes on stdout) with the host's python3 on
 * a temporary root standing for /workspace: what each op refuses, and what it leaves behind when it refuses.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';

const SCRIPT = path.join(__dirname, 'file-transfer.py');

interface Run {
  status: number | null;
  /** The first line of stdout, parsed. */
  answer: Record<string, unknown> & {
    ok: boolean;
    error?: { code: string; message: string } & Record<string, unknown>;
  };
  /** What followed it. */
  rest: Buffer;
  stderr: string;
}

function run(args: string[], stdin: Buffer = Buffer.alloc(0)): Run {
  const r = spawnSync('python3', ['-I', '-S', SCRIPT, ...args], { input: stdin, timeout: 30_000 });
  const nl = r.stdout.indexOf(0x0a);
  return {
    status: r.status,
    answer: JSON.parse(r.stdout.subarray(0, nl).toString('utf8')) as Run['answer'],
    rest: r.stdout.subarray(nl + 1),
    stderr: r.stderr.toString('utf8'),
  };
}

/** The upload as the engine frames it: pieces, then the last (empty) frame unless `cut`. */
function framed(data: Buffer, { cut = false, piece = 7000 } = {}): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at < data.length; at += piece) {
    const chunk = data.subarray(at, at + piece);
    const header = Buffer.alloc(4);
    header.writeUInt32BE(chunk.length);
    parts.push(header, chunk);
  }
  if (!cut) parts.push(Buffer.alloc(4));
  return Buffer.concat(parts);
}

type Entry = {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device';
  content?: string;
  linkname?: string;
};

async function tarOf(entries: Entry[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise((resolve) => p.on('end', resolve));
  for (const e of entries) {
    const content = e.content ?? '';
    p.entry(
      {
        name: e.name,
        type: e.type ?? 'file',
        mode: 0o644,
        ...(e.linkname !== undefined && { linkname: e.linkname }),
      },
      e.type === undefined || e.type === 'file' ? content : undefined,
    );
  }
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

/** Every entry under `dir`, relative, sorted (`/` after directories). */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      out.push(e.isDirectory() ? `${r}/` : e.isSymbolicLink() ? `${r}@` : r);
      if (e.isDirectory()) walk(r);
    }
  };
  walk('');
  return out.sort();
}

describe('file-transfer.py (the pod side of the file transfer API)', () => {
  let base: string;
  let ws: string;

  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'file-transfer-'));
    ws = path.join(base, 'workspace');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(base, 'secret'), 'outside');
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  describe('read', () => {
    beforeEach(() => fs.writeFileSync(path.join(ws, 'f.bin'), Buffer.from('0123456789')));

    it('announces the size, then streams the whole file or an inclusive range cut to the file', () => {
      const whole = run(['read', ws, 'f.bin', '-1', '-1']);
      expect(whole.answer).toMatchObject({ ok: true, size: 10, start: 0, end: 9 });
      expect(whole.rest.toString()).toBe('0123456789');
      const range = run(['read', ws, 'f.bin', '2', '40']);
      expect(range.answer).toMatchObject({ ok: true, size: 10, start: 2, end: 9 });
      expect(range.rest.toString()).toBe('23456789');
      expect(run(['read', ws, 'f.bin', '3', '4']).rest.toString()).toBe('34');
    });

    it('refuses before any byte: a missing file, a directory, a range past the end, a link leading out', () => {
      fs.mkdirSync(path.join(ws, 'd'));
      fs.symlinkSync(base, path.join(ws, 'out'));
      fs.symlinkSync('../secret', path.join(ws, 'up'));
      const codes = [
        run(['read', ws, 'nope', '-1', '-1']),
        run(['read', ws, 'd', '-1', '-1']),
        run(['read', ws, 'f.bin', '10', '-1']),
        run(['read', ws, 'out/secret', '-1', '-1']),
        run(['read', ws, 'up', '-1', '-1']),
      ].map((r) => [r.answer.error?.code, r.rest.length]);
      expect(codes).toEqual([
        ['FILE_NOT_FOUND', 0],
        ['NOT_A_FILE', 0],
        ['RANGE_NOT_SATISFIABLE', 0],
        ['PATH_SYMLINK_ESCAPE', 0],
        ['PATH_SYMLINK_ESCAPE', 0],
      ]);
      expect(run(['read', ws, 'f.bin', '10', '-1']).answer.error).toMatchObject({ size: 10 });
    });

    it('follows a link that stays inside', () => {
      fs.mkdirSync(path.join(ws, 'real'));
      fs.writeFileSync(path.join(ws, 'real', 'x'), 'inside');
      fs.symlinkSync('real', path.join(ws, 'alias'));
      fs.symlinkSync(path.join(ws, 'real', 'x'), path.join(ws, 'abs'));
      expect(run(['read', ws, 'alias/x', '-1', '-1']).rest.toString()).toBe('inside');
      expect(run(['read', ws, 'abs', '-1', '-1']).rest.toString()).toBe('inside');
    });
  });

  describe('write', () => {
    const data = Buffer.from(Array.from({ length: 50_000 }, (_, i) => i % 251));

    it('makes the parents, writes atomically and answers the size and sha256', () => {
      const r = run(['write', ws, 'a/b/c.bin', '1', String(10 ** 6)], framed(data));
      expect(r.answer).toEqual({
        ok: true,
        size: data.length,
        sha256: createHash('sha256').update(data).digest('hex'),
        realPath: 'a/b/c.bin',
      });
      expect(fs.readFileSync(path.join(ws, 'a/b/c.bin')).equals(data)).toBe(true);
      expect(tree(ws)).toEqual(['a/', 'a/b/', 'a/b/c.bin']);
    });

    it('keeps the old file and no temporary file when the upload is cut off or over the quota', () => {
      fs.writeFileSync(path.join(ws, 'f'), 'old');
      const cut = run(['write', ws, 'f', '1', String(10 ** 6)], framed(data, { cut: true }));
      expect([cut.status, cut.answer.error?.code]).toEqual([3, 'ABORTED']);
      const over = run(['write', ws, 'f', '1', String(data.length - 1)], framed(data));
      expect(over.answer.error).toMatchObject({ code: 'WORKSPACE_FULL', path: 'f', cap: data.length - 1 });
      expect(fs.readFileSync(path.join(ws, 'f'), 'utf8')).toBe('old');
      expect(tree(ws)).toEqual(['f']);
    });

    it('counts the file it replaces as freed, and what else the workspace holds as used', () => {
      fs.writeFileSync(path.join(ws, 'f'), Buffer.alloc(1000));
      fs.writeFileSync(path.join(ws, 'g'), Buffer.alloc(500));
      expect(run(['write', ws, 'f', '1', '1500'], framed(Buffer.alloc(1000))).answer.ok).toBe(true);
      expect(run(['write', ws, 'f', '1', '1500'], framed(Buffer.alloc(1001))).answer.error?.code).toBe(
        'WORKSPACE_FULL',
      );
    });

    it('refuses an existing file without overwrite, a directory, and a link leading out', () => {
      fs.writeFileSync(path.join(ws, 'f'), 'old');
      fs.mkdirSync(path.join(ws, 'd'));
      fs.symlinkSync(base, path.join(ws, 'out'));
      fs.symlinkSync('../secret', path.join(ws, 'up'));
      const codes = ['f', 'd', 'out/secret', 'up', 'out/new'].map(
        (p) => run(['write', ws, p, p === 'f' ? '0' : '1', '1000000'], framed(data)).answer.error?.code,
      );
      expect(codes).toEqual([
        'FILE_EXISTS',
        'NOT_A_FILE',
        'PATH_SYMLINK_ESCAPE',
        'PATH_SYMLINK_ESCAPE',
        'PATH_SYMLINK_ESCAPE',
      ]);
      expect(fs.readFileSync(path.join(base, 'secret'), 'utf8')).toBe('outside');
      expect(fs.readdirSync(base).sort()).toEqual(['secret', 'workspace']);
    });
  });

  describe('tar-out', () => {
    it('answers, then tars the directory with entries relative to it', () => {
      fs.mkdirSync(path.join(ws, 'd/sub'), { recursive: true });
      fs.writeFileSync(path.join(ws, 'd/sub/x'), 'x');
      fs.symlinkSync('sub/x', path.join(ws, 'd/l'));
      const r = run(['tar-out', ws, 'd']);
      expect(r.answer).toEqual({ ok: true });
      const list = spawnSync('tar', ['-t'], { input: r.rest }).stdout.toString().trim().split('\n').sort();
      expect(list).toEqual(['l', 'sub/', 'sub/x']);
      // From the root: not the session's home, a fifo, a hard-linked file or an upload in flight.
      fs.mkdirSync(path.join(ws, '.home'));
      fs.writeFileSync(path.join(ws, '.home/rc'), 'rc');
      spawnSync('mkfifo', [path.join(ws, 'd/fifo')]);
      fs.writeFileSync(path.join(ws, 'twice'), 't');
      fs.linkSync(path.join(ws, 'twice'), path.join(ws, 'twice2'));
      fs.writeFileSync(path.join(ws, '.switchyard-upload-0123.f'), 'partial');
      const all = run(['tar-out', ws, '']);
      const names = spawnSync('tar', ['-t'], { input: all.rest }).stdout.toString().trim().split('\n').sort();
      expect(names).toEqual(['d/', 'd/l', 'd/sub/', 'd/sub/x']);
      expect(run(['tar-out', ws, 'nope']).answer.error?.code).toBe('FILE_NOT_FOUND');
      expect(run(['tar-out', ws, 'd/sub/x']).answer.error?.code).toBe('ENOTDIR');
    });
  });

  describe('tar-in', () => {
    const tarIn = (dir: string, body: Buffer, quota = 10 ** 6) =>
      run(['tar-in', ws, dir, String(quota), '1000'], framed(body));

    it('extracts files, directories and inside links into a directory it makes, counting them; gzip too', async () => {
      const body = await tarOf([
        { name: 'top/', type: 'directory' },
        { name: 'top/a.txt', content: 'hello' },
        { name: './top/sub/b.txt', content: 'world!' },
        { name: 'top/l', type: 'symlink', linkname: 'a.txt' },
        { name: 'top/h', type: 'link', linkname: 'top/a.txt' },
      ]);
      const r = tarIn('in', body);
      expect(r.answer).toEqual({ ok: true, files: 4, directories: 1, bytes: 16 });
      expect(tree(ws)).toEqual([
        'in/',
        'in/top/',
        'in/top/a.txt',
        'in/top/h',
        'in/top/l@',
        'in/top/sub/',
        'in/top/sub/b.txt',
      ]);
      expect(fs.readFileSync(path.join(ws, 'in/top/l'), 'utf8')).toBe('hello');
      // The hard link became a copy, as on the host (the file API refuses hard-linked files).
      expect([
        fs.readFileSync(path.join(ws, 'in/top/h'), 'utf8'),
        fs.statSync(path.join(ws, 'in/top/h')).nlink,
      ]).toEqual(['hello', 1]);
      expect(tarIn('', gzipSync(body)).answer).toMatchObject({ ok: true, files: 4 });
      expect(fs.existsSync(path.join(ws, 'top/sub/b.txt'))).toBe(true);
    });

    it.each([
      ['an absolute name', [{ name: '/etc/evil', content: 'x' }], 'PATH_ABSOLUTE'],
      ['a name climbing out', [{ name: 'a/../../evil', content: 'x' }], 'PATH_ESCAPE'],
      [
        'a link leading out',
        [{ name: 'l', type: 'symlink', linkname: '../../../../secret' }],
        'PATH_SYMLINK_ESCAPE',
      ],
      [
        'an absolute link leading out',
        [{ name: 'l', type: 'symlink', linkname: '/etc/passwd' }],
        'PATH_SYMLINK_ESCAPE',
      ],
      [
        'a file written through a link of the archive',
        [
          { name: 'l', type: 'symlink', linkname: '.' },
          { name: 'l/x', content: 'x' },
        ],
        'ARCHIVE_INVALID',
      ],
      ['a fifo', [{ name: 'p', type: 'fifo' }], 'ARCHIVE_INVALID'],
      ['a device', [{ name: 'c', type: 'character-device' }], 'ARCHIVE_INVALID'],
      [
        'a hard link to a file outside the archive',
        [{ name: 'h', type: 'link', linkname: 'etc/passwd' }],
        'ARCHIVE_INVALID',
      ],
    ] as Array<[string, Entry[], string]>)(
      'refuses %s and leaves nothing of the archive',
      async (_what, entries, code) => {
        const body = await tarOf([{ name: 'first.txt', content: 'kept?' }, ...entries]);
        const r = tarIn('made/for/it', body);
        expect(r.answer.error?.code).toBe(code);
        expect(tree(ws)).toEqual([]);
        expect(fs.readdirSync(base).sort()).toEqual(['secret', 'workspace']);
      },
    );

    it('refuses what is not a tar, a cut-off upload and an archive over the quota, leaving nothing', async () => {
      const body = await tarOf([{ name: 'big', content: 'x'.repeat(5000) }]);
      expect(tarIn('', Buffer.from('not a tar at all'.repeat(100))).answer.error?.code).toBe(
        'ARCHIVE_INVALID',
      );
      expect(tarIn('', body, 4999).answer.error?.code).toBe('WORKSPACE_FULL');
      const cut = run(['tar-in', ws, '', '1000000', '1000'], framed(body.subarray(0, 3000), { cut: true }));
      expect(cut.answer.error?.code).toBe('ABORTED');
      expect(tree(ws)).toEqual([]);
    });

    it('merges into what is there: files replaced, directories kept, a file never over a directory', async () => {
      fs.mkdirSync(path.join(ws, 'd'));
      fs.writeFileSync(path.join(ws, 'd/old'), 'old');
      fs.writeFileSync(path.join(ws, 'd/f'), 'before');
      expect(tarIn('', await tarOf([{ name: 'd/f', content: 'after' }])).answer.ok).toBe(true);
      expect(tree(ws)).toEqual(['d/', 'd/f', 'd/old']);
      expect(fs.readFileSync(path.join(ws, 'd/f'), 'utf8')).toBe('after');
      expect(tarIn('', await tarOf([{ name: 'd', content: 'file' }])).answer.error?.code).toBe('EISDIR');
      expect(tree(ws)).toEqual(['d/', 'd/f', 'd/old']);
    });
  });
});
