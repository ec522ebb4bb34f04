/**
 * PodTransfers, the file transfer API on a session pod, with the pod stood in for by the host: each exec runs the real
 * transfer program (libs/workspace/src/pod/file-transfer.py) under the host's python3 with a temporary directory as
 * its /workspace, its stdio wired the way a streamed exec wires it (stdin ended when the connection drops). What is
 * checked is the engine's side: framing, the first line, refusals as the host's errors, aborts, and the lock.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { FileOpError, PathRejectedError, WORKSPACE_TOOL_ROOT } from '@switchyard/workspace';
import type { ExecStream } from '@switchyard/sandbox';
import { PodTransfers } from './pod-transfers';

const PROGRAM = fs.readFileSync(
  path.resolve(__dirname, '../../../../../libs/workspace/src/pod/file-transfer.py'),
  'utf8',
);

/** A streamed exec of `argv` on this host, /workspace being `root`. */
function hostExec(argv: string[], root: string, closed: string[]): ExecStream {
  const args = argv.slice(1).map((a) => (a === WORKSPACE_TOOL_ROOT ? root : a));
  const child = spawn(argv[0], args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  stdin.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  child.stdout.pipe(stdout);
  child.stderr.pipe(stderr);
  let dropped = false;
  const exit = new Promise<{ exitCode: number }>((resolve, reject) =>
    child.on('close', (code) => (dropped ? reject(new Error('dropped')) : resolve({ exitCode: code ?? -1 }))),
  );
  exit.catch(() => undefined);
  return {
    stdin,
    stdout,
    stderr,
    exit,
    close: () => {
      if (dropped) return;
      dropped = true;
      closed.push(argv[5]);
      stdin.end();
      child.stdout.unpipe(stdout);
      stdout.end();
    },
  };
}

describe('PodTransfers (the file transfer API through a session pod)', () => {
  let root: string;
  let transfers: PodTransfers;
  let closed: string[];
  /** The session's lock, as `SessionPods.serialise` keeps it: each holder waits for the one before. */
  let lock: Promise<unknown>;
  const exclusive = <T>(_sessionId: string, fn: () => Promise<T>): Promise<T> => {
    const next = lock.then(fn);
    lock = next.catch(() => undefined);
    return next;
  };

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'pod-transfers-'));
    closed = [];
    lock = Promise.resolve();
    transfers = new PodTransfers(
      {
        execStream: (_sessionId: string, argv: string[]) => Promise.resolve(hostExec(argv, root, closed)),
        exclusive,
      },
      PROGRAM,
      { maxWorkspaceBytes: 64 * 2 ** 20, maxPathLength: 4096, maxArchiveEntries: 1000 },
    );
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('uploads a body as it arrives and downloads it whole or by range', async () => {
    const data = randomBytes(6 * 2 ** 20 + 3);
    const written = await transfers.writeStream('s', 'dir/big.bin', Readable.from(pieces(data, 65_536)), {
      overwrite: true,
    });
    expect(written).toEqual({
      path: 'dir/big.bin',
      realPath: 'dir/big.bin',
      size: data.length,
      sha256: createHash('sha256').update(data).digest('hex'),
    });
    const whole = await transfers.readStream('s', 'dir/big.bin');
    expect({ size: whole.size, start: whole.start, end: whole.end }).toEqual({
      size: data.length,
      start: 0,
      end: data.length - 1,
    });
    expect((await readAll(whole.stream)).equals(data)).toBe(true);
    const part = await transfers.readStream('s', 'dir/big.bin', { start: 100, end: 199 });
    expect((await readAll(part.stream)).equals(data.subarray(100, 200))).toBe(true);
  });

  it('refuses as the host does, before any byte flows', async () => {
    fs.writeFileSync(path.join(root, 'f'), 'x');
    fs.symlinkSync('/etc', path.join(root, 'out'));
    await expect(transfers.readStream('s', '../x')).rejects.toMatchObject({
      code: 'PATH_ESCAPE',
      details: { field: 'path' },
    });
    await expect(transfers.readStream('s', 'nope')).rejects.toEqual(expect.any(FileOpError));
    await expect(transfers.readStream('s', 'nope')).rejects.toMatchObject({
      code: 'FILE_NOT_FOUND',
      kind: 'not_found',
    });
    await expect(transfers.readStream('s', 'f', { start: 1 })).rejects.toMatchObject({
      code: 'RANGE_NOT_SATISFIABLE',
      details: { size: 1 },
    });
    await expect(transfers.readStream('s', 'f', { start: 3, end: 1 })).rejects.toMatchObject({
      details: { field: 'range' },
    });
    await expect(transfers.readStream('s', 'out/passwd')).rejects.toEqual(expect.any(PathRejectedError));
    await expect(
      transfers.writeStream('s', 'f', Readable.from([Buffer.from('new')]), { overwrite: false }),
    ).rejects.toMatchObject({ code: 'FILE_EXISTS', kind: 'conflict' });
    await expect(transfers.archiveOut('s', 'f')).rejects.toMatchObject({ code: 'ENOTDIR' });
    expect(fs.readFileSync(path.join(root, 'f'), 'utf8')).toBe('x');
  });

  it('leaves the old file and no temporary file when the client goes away mid-upload, and answers its error', async () => {
    fs.writeFileSync(path.join(root, 'f'), 'old');
    const body = new PassThrough();
    const writing = transfers.writeStream('s', 'f', body, { overwrite: true });
    body.write(randomBytes(300_000));
    setImmediate(() => body.destroy(new Error('client went away')));
    await expect(writing).rejects.toThrow('client went away');
    expect(fs.readdirSync(root)).toEqual(['f']);
    expect(fs.readFileSync(path.join(root, 'f'), 'utf8')).toBe('old');
  });

  it('holds the session lock until the upload answered, so nothing else sees half of it', async () => {
    const body = new PassThrough();
    const order: string[] = [];
    const upload = transfers
      .writeStream('s', 'f', body, { overwrite: true })
      .then(() => order.push('upload'));
    // Queued behind the upload, as a checkpoint or a code action would be.
    const next = exclusive('s', () =>
      Promise.resolve(order.push(`after: ${fs.readdirSync(root).join(',')}`)),
    );
    body.write(Buffer.alloc(1000));
    while (!fs.readdirSync(root).some((n) => n.startsWith('.switchyard-upload-'))) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(order).toEqual([]);
    body.end(Buffer.alloc(1000));
    await Promise.all([upload, next]);
    expect(order).toEqual(['upload', 'after: f']);
  });

  it('round-trips a directory as a tar, counting what it extracted, and refuses a hostile archive', async () => {
    fs.mkdirSync(path.join(root, 'src/sub'), { recursive: true });
    fs.writeFileSync(path.join(root, 'src/a.txt'), 'alpha');
    fs.writeFileSync(path.join(root, 'src/sub/b.txt'), 'beta!');
    const tar = await readAll(await transfers.archiveOut('s', 'src'));
    const r = await transfers.archiveIn('s', 'copy', Readable.from([tar]));
    expect(r).toEqual({ path: 'copy', files: 2, directories: 1, bytes: 10 });
    expect(fs.readFileSync(path.join(root, 'copy/sub/b.txt'), 'utf8')).toBe('beta!');
    const hostile = Buffer.alloc(1024);
    hostile.write('../../escape.txt', 0);
    hostile.write('0000644\0', 100);
    hostile.write('00000000000\0', 124);
    hostile.write('00000000000\0', 136);
    hostile.write('0', 156);
    hostile.write('ustar\0' + '00', 257);
    hostile.write('        ', 148);
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += hostile[i];
    hostile.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    await expect(transfers.archiveIn('s', '', Readable.from([hostile]))).rejects.toMatchObject({
      code: 'PATH_ESCAPE',
      details: { field: 'body', path: '../../escape.txt' },
    });
  });

  it('drops the connection of a download its reader abandoned', async () => {
    fs.writeFileSync(path.join(root, 'big'), Buffer.alloc(8 * 2 ** 20));
    const r = await transfers.readStream('s', 'big');
    r.stream.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toEqual(['read']);
  });
});

function* pieces(data: Buffer, size: number): Generator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}
