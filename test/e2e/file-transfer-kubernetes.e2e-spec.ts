import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { extract, pack } from 'tar-stream';
import { EngineHarness } from '../support/engine-harness';
import { SANDBOX_BACKENDS } from '../support/sandbox-backends';

jest.setTimeout(60_000);

const MiB = 2 ** 20;
const kubernetes = SANDBOX_BACKENDS.find((b) => b.name === 'kubernetes');

/**
 * The file transfer API on the Kubernetes backend, through the HTTP API: a session's /workspace is a volume of its
 * pod, so every byte goes through an exec in the pod (streamed both ways) and every path is walked there. A binary
 * file up and down (sha256 compared, by range too), seen by code in the pod; a directory round trip as a tar
 * (gzip too); a hostile tar and a path leading out refused with nothing written.
 */
describe('file transfer on the Kubernetes backend', () => {
  let engine: EngineHarness;
  let sid: string;
  const data = randomBytes(32 * MiB);
  const sha256 = createHash('sha256').update(data).digest('hex');
  const url = (what: string, query: string) => `${engine.baseUrl}/v1/sessions/${sid}/files/${what}?${query}`;
  const put = (
    what: string,
    query: string,
    body: Buffer | Readable,
    contentType = 'application/octet-stream',
  ) =>
    fetch(url(what, query), {
      method: 'PUT',
      headers: { 'content-type': contentType },
      body: body instanceof Readable ? (Readable.toWeb(body) as ReadableStream) : body,
      duplex: 'half',
    });
  const get = (what: string, query: string, headers: Record<string, string> = {}) =>
    fetch(url(what, query), { headers });
  const bash = async (code: string): Promise<string> => {
    const r = await engine.action(sid, {
      type: 'code',
      language: 'bash',
      code,
      tier: 'pooled',
      timeoutMs: 20_000,
    });
    expect(r).toMatchObject({ status: 'succeeded', exitCode: 0 });
    return (r as { stdout: string }).stdout;
  };

  beforeAll(async () => {
    if (!kubernetes) throw new Error('SWITCHYARD_TEST_BACKENDS leaves out kubernetes: this suite needs it');
    engine = await EngineHarness.start(await kubernetes.env());
    sid = await engine.createSession();
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it('uploads 32 MiB as a stream and downloads it whole and by range, byte for byte', async () => {
    const up = await put('content', 'path=data/big.bin', Readable.from(pieces(data, 256 * 1024)));
    expect(up.status).toBe(200);
    expect(await up.json()).toEqual({
      path: 'data/big.bin',
      size: data.length,
      sha256,
      actionId: expect.stringMatching(/^act_/) as string,
    });

    const down = await get('content', 'path=data/big.bin');
    expect(down.status).toBe(200);
    expect(down.headers.get('content-length')).toBe(String(data.length));
    expect(down.headers.get('accept-ranges')).toBe('bytes');
    expect(down.headers.get('x-switchyard-action-id')).toMatch(/^act_/);
    expect(
      createHash('sha256')
        .update(Buffer.from(await down.arrayBuffer()))
        .digest('hex'),
    ).toBe(sha256);

    const part = await get('content', 'path=data/big.bin', { range: 'bytes=1000-1999' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 1000-1999/${data.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(data.subarray(1000, 2000))).toBe(true);
    const past = await get('content', 'path=data/big.bin', { range: `bytes=${data.length}-` });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe(`bytes */${data.length}`);
  });

  it('puts the file where code in the pod sees it, and refuses what the contract refuses', async () => {
    expect(await bash('sha256sum data/big.bin | cut -d" " -f1; stat -c %s data/big.bin')).toBe(
      `${sha256}\n${data.length}\n`,
    );
    const exists = await put('content', 'path=data/big.bin&overwrite=false', Buffer.from('x'));
    expect(exists.status).toBe(409);
    expect(((await exists.json()) as { error: { code: string } }).error.code).toBe('FILE_EXISTS');
    const missing = await get('content', 'path=nope.bin');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('FILE_NOT_FOUND');
    const climbing = await get('content', 'path=../etc/passwd');
    expect(climbing.status).toBe(400);
    expect(await climbing.json()).toMatchObject({
      error: { code: 'PATH_ESCAPE', fields: [{ path: 'path' }] },
    });
    // A link the code made, leading out of /workspace: walked in the pod and refused, both ways.
    await bash('ln -s /etc out');
    const viaLink = await get('content', 'path=out/passwd');
    expect(viaLink.status).toBe(400);
    expect(((await viaLink.json()) as { error: { code: string } }).error.code).toBe('PATH_SYMLINK_ESCAPE');
    expect((await put('content', 'path=out/evil', Buffer.from('x'))).status).toBe(400);
  });

  it('keeps the old file and leaves no temporary file when the client goes away mid-upload', async () => {
    let sent = false;
    async function* halfThenHang(): AsyncGenerator<Buffer> {
      for (let i = 0; i < 8; i++) yield Buffer.alloc(MiB, 7);
      sent = true;
      await new Promise(() => undefined);
    }
    const abort = new AbortController();
    const upload = fetch(url('content', 'path=data/big.bin'), {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: Readable.toWeb(Readable.from(halfThenHang())) as ReadableStream,
      duplex: 'half',
      signal: abort.signal,
    }).catch((err: Error) => err);
    while (!sent) await new Promise((resolve) => setTimeout(resolve, 20));
    abort.abort();
    expect(await upload).toMatchObject({ name: 'AbortError' });
    // A code action waits for the upload to let go of the session's pod: by then it has cleaned up.
    expect(await bash("sha256sum data/big.bin | cut -d' ' -f1; find . -name '.switchyard-*'")).toBe(
      `${sha256}\n`,
    );
  });

  it('round-trips a directory as a tar (gzip too) and refuses a hostile one, writing nothing', async () => {
    await bash(
      'mkdir -p proj/src && printf alpha > proj/src/a.txt && printf beta > proj/b.txt && ln -s src/a.txt proj/l',
    );
    const out = await get('archive', 'path=proj');
    expect(out.status).toBe(200);
    expect(out.headers.get('content-type')).toContain('application/x-tar');
    const tar = Buffer.from(await out.arrayBuffer());
    expect(await entriesOf(tar)).toEqual(['b.txt', 'l', 'src/', 'src/a.txt']);

    const plain = await put('archive', 'path=copy', tar, 'application/x-tar');
    expect(plain.status).toBe(200);
    expect(await plain.json()).toMatchObject({ path: 'copy', files: 3, directories: 1, bytes: 9 });
    const gzipped = await put('archive', 'path=copy-gz', gzipSync(tar), 'application/gzip');
    expect(gzipped.status).toBe(200);
    expect(await bash('cat copy/src/a.txt copy/b.txt copy/l copy-gz/src/a.txt')).toBe('alphabetaalphaalpha');

    const hostile = await tarOf([
      { name: 'fine.txt', content: 'ok' },
      { name: 'x/../../escape.txt', content: 'out' },
    ]);
    const refused = await put('archive', 'path=h', hostile, 'application/x-tar');
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({
      error: { code: 'PATH_ESCAPE', fields: [{ path: 'body' }] },
    });
    const linkOut = await put('archive', '', await tarOf([{ name: 'l2', linkname: '/etc/passwd' }]));
    expect(linkOut.status).toBe(400);
    expect(((await linkOut.json()) as { error: { code: string } }).error.code).toBe('PATH_SYMLINK_ESCAPE');
    // Nothing of either: no directory h, no link, no upload left half done.
    expect(await bash("ls -A | grep -vx .home; find . -name '.switchyard-*'")).toBe(
      'copy\ncopy-gz\ndata\nout\nproj\n',
    );
  });
});

function* pieces(data: Buffer, size: number): Generator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

async function tarOf(entries: Array<{ name: string; content?: string; linkname?: string }>): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise((resolve) => p.on('end', resolve));
  for (const e of entries) {
    if (e.linkname !== undefined) p.entry({ name: e.name, type: 'symlink', linkname: e.linkname });
    else p.entry({ name: e.name, mode: 0o644 }, e.content ?? '');
  }
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

async function entriesOf(tar: Buffer): Promise<string[]> {
  const names: string[] = [];
  const ex = extract();
  ex.on('entry', (header, stream, next) => {
    names.push(header.type === 'directory' && !header.name.endsWith('/') ? `${header.name}/` : header.name);
    stream.on('end', next);
    stream.resume();
  });
  const done = new Promise((resolve, reject) => {
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(tar);
  await done;
  return names.sort();
}
