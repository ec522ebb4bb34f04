import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { extract, type Headers, pack } from 'tar-stream';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';
import { fieldsOf } from '../support/error-body';

const MiB = 1024 * 1024;
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

interface Answer {
  status: number;
  headers: Headers_;
  body: Buffer;
  json: any;
}
type Headers_ = globalThis.Headers;

/** A tar built in memory: entries in order, each a file (`content`), a directory, a symlink or a hard link. */
async function tarOf(entries: Array<Headers & { content?: Buffer | string }>): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise((resolve) => p.on('end', resolve));
  for (const { content, ...header } of entries) {
    await new Promise<void>((resolve, reject) =>
      p.entry(header, content ?? '', (err) => (err ? reject(err) : resolve())),
    );
  }
  p.finalize();
  await ended;
  return Buffer.concat(chunks);
}

/** The entries of a tar: name → content (files), `dir` or `-> target` (links). */
async function entriesOf(tar: Buffer): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const ex = extract();
  ex.on('entry', (h: Headers, stream: Readable, next: () => void) => {
    const parts: Buffer[] = [];
    stream.on('data', (c: Buffer) => parts.push(c));
    stream.on('end', () => {
      out[h.name] =
        h.type === 'directory'
          ? 'dir'
          : h.type === 'symlink'
            ? `-> ${h.linkname}`
            : Buffer.concat(parts).toString();
      next();
    });
  });
  const done = new Promise((resolve, reject) => {
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(tar);
  await done;
  return out;
}

/** `size` bytes of a repeated random MiB, as a stream, hashed as they go: a big body without holding it. */
function bigBody(size: number): { stream: Readable; sha256: () => string } {
  const block = randomBytes(MiB);
  const hash = createHash('sha256');
  let sent = 0;
  const stream = new Readable({
    read() {
      if (sent >= size) return void this.push(null);
      const chunk = block.subarray(0, Math.min(MiB, size - sent));
      // Each MiB differs from the last, so a file that repeats a block is caught.
      chunk.writeUInt32BE(sent / MiB, 0);
      hash.update(chunk);
      sent += chunk.length;
      this.push(Buffer.from(chunk));
    },
  });
  return { stream, sha256: () => hash.digest('hex') };
}

describe('file transfer (Docker backend, real engine process)', () => {
  let engine: EngineProcess;
  let dataDir: string;
  let sid: string;

  const url = (p: string) => `${engine.baseUrl}${p}`;
  const content = (s: string, p: string, extra = '') =>
    url(`/v1/sessions/${s}/files/content?path=${encodeURIComponent(p)}${extra}`);
  const archive = (s: string, p?: string) =>
    url(`/v1/sessions/${s}/files/archive${p === undefined ? '' : `?path=${encodeURIComponent(p)}`}`);
  const ws = (s: string, ...rel: string[]) => path.join(dataDir, 'workspaces', s, ...rel);

  async function call(
    method: string,
    target: string,
    body?: Buffer | Readable,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    // A stream goes as one (`duplex: 'half'`, which undici needs and the DOM types do not know).
    const init: RequestInit & { duplex?: 'half' } = {
      method,
      headers: body ? { 'content-type': 'application/octet-stream', ...headers } : headers,
      ...(body instanceof Readable
        ? { body: Readable.toWeb(body) as ReadableStream, duplex: 'half' }
        : { body }),
    };
    const res = await fetch(target, init);
    const buf = Buffer.from(await res.arrayBuffer());
    let json: unknown;
    if (res.headers.get('content-type')?.includes('json')) json = JSON.parse(buf.toString());
    return { status: res.status, headers: res.headers, body: buf, json };
  }
  const action = async (s: string, body: Record<string, unknown>) => {
    const res = await call('POST', url(`/v1/sessions/${s}/actions`), Buffer.from(JSON.stringify(body)), {
      'content-type': 'application/json',
    });
    return res;
  };
  const createSession = async (body: Record<string, unknown> = {}) => {
    const res = await call('POST', url('/v1/sessions'), Buffer.from(JSON.stringify(body)), {
      'content-type': 'application/json',
    });
    expect(res.status).toBe(201);
    return res.json.id as string;
  };
  const getAction = async (s: string, id: string) =>
    (await call('GET', url(`/v1/sessions/${s}/actions/${id}`))).json;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-transfer-'));
    engine = await EngineProcess.start(dataDir, await freePort(), {
      SWITCHYARD_MAX_FILE_BYTES: String(64 * 1024),
      SWITCHYARD_MAX_WORKSPACE_BYTES: String(352 * MiB),
    });
    sid = await createSession();
  }, 60_000);
  afterAll(async () => {
    await engine?.stop('SIGTERM');
    if (dataDir) removeDataDir(dataDir);
  });

  it('uploads and downloads a 32 MiB binary file intact, recorded as file actions with READ/WROTE edges', async () => {
    const data = randomBytes(32 * MiB);
    const up = await call('PUT', content(sid, 'data/big.bin'), data);
    expect(up.status).toBe(200);
    expect(up.json).toEqual({
      path: 'data/big.bin',
      size: data.length,
      sha256: sha256(data),
      actionId: expect.stringMatching(/^act_/),
    });
    expect(sha256(readFileSync(ws(sid, 'data/big.bin')))).toBe(sha256(data));

    const down = await call('GET', content(sid, 'data/big.bin'));
    expect(down.status).toBe(200);
    expect(down.headers.get('content-type')).toBe('application/octet-stream');
    expect(down.headers.get('content-length')).toBe(String(data.length));
    expect(down.headers.get('accept-ranges')).toBe('bytes');
    expect(sha256(down.body)).toBe(sha256(data));

    const upload = await getAction(sid, up.json.actionId);
    expect(upload).toMatchObject({
      type: 'file',
      status: 'succeeded',
      input: { type: 'file', op: 'upload', path: 'data/big.bin' },
      output: { size: data.length, sha256: sha256(data) },
      files: [expect.objectContaining({ path: 'data/big.bin', access: 'write' })],
    });
    const downloadId = down.headers.get('x-switchyard-action-id')!;
    expect(await getAction(sid, downloadId)).toMatchObject({
      status: 'succeeded',
      input: { op: 'download' },
      output: { size: data.length, bytes: data.length, sha256: sha256(data) },
      files: [expect.objectContaining({ path: 'data/big.bin', access: 'read' })],
    });
    const lineage = await call('GET', url(`/v1/sessions/${sid}/files/lineage?path=data/big.bin`));
    expect(lineage.status).toBe(200);
    expect(JSON.stringify(lineage.json)).toContain(up.json.actionId);
    expect(JSON.stringify(lineage.json)).toContain(downloadId);
  });

  it('Range: 206 with content-range, an end past the file cut to it, 416 past the end', async () => {
    const data = randomBytes(1000);
    expect((await call('PUT', content(sid, 'r.bin'), data)).status).toBe(200);
    const part = await call('GET', content(sid, 'r.bin'), undefined, { range: 'bytes=10-19' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 10-19/1000');
    expect(part.body.equals(data.subarray(10, 20))).toBe(true);
    const tail = await call('GET', content(sid, 'r.bin'), undefined, { range: 'bytes=990-5000' });
    expect(tail.status).toBe(206);
    expect(tail.headers.get('content-range')).toBe('bytes 990-999/1000');
    expect(tail.body.equals(data.subarray(990))).toBe(true);
    const past = await call('GET', content(sid, 'r.bin'), undefined, { range: 'bytes=1000-' });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe('bytes */1000');
    expect(past.json.error.code).toBe('RANGE_NOT_SATISFIABLE');
  });

  it('refuses: overwrite=false on an existing file (409), traversal and a missing path (400 naming path), 404s', async () => {
    expect((await call('PUT', content(sid, 'keep.txt'), Buffer.from('old'))).status).toBe(200);
    const exists = await call('PUT', content(sid, 'keep.txt', '&overwrite=false'), Buffer.from('new'));
    expect(exists.status).toBe(409);
    expect(exists.json.error.code).toBe('FILE_EXISTS');
    expect(readFileSync(ws(sid, 'keep.txt'), 'utf8')).toBe('old');
    expect((await call('PUT', content(sid, 'fresh.txt', '&overwrite=false'), Buffer.from('n'))).status).toBe(
      200,
    );

    for (const p of ['../outside.txt', '/etc/passwd', 'a/../../x']) {
      const bad = await call('PUT', content(sid, p), Buffer.from('x'));
      expect(bad.status).toBe(400);
      expect(fieldsOf(bad.json)).toEqual(['path']);
    }
    const traversal = await call('GET', content(sid, '../../etc/passwd'));
    expect(traversal.status).toBe(400);
    expect(fieldsOf(traversal.json)).toEqual(['path']);
    const noPath = await call('PUT', url(`/v1/sessions/${sid}/files/content`), Buffer.from('x'));
    expect(noPath.status).toBe(400);
    expect(fieldsOf(noPath.json)).toEqual(['path']);

    const missing = await call('GET', content(sid, 'nope.bin'));
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('FILE_NOT_FOUND');
    expect((await call('GET', content('ses_nope', 'x'))).status).toBe(404);
  });

  it('archives: a gzip tar up and a tar down round trip; a hostile tar is refused with nothing written', async () => {
    const tar = await tarOf([
      { name: 'src/', type: 'directory' },
      { name: 'src/main.py', content: 'print("hi")\n', mode: 0o755 },
      { name: './src/data/blob.bin', content: Buffer.from([0, 1, 2, 255]) },
      { name: 'src/link', type: 'symlink', linkname: 'main.py' },
      { name: 'src/copy.py', type: 'link', linkname: 'src/main.py' },
    ]);
    const up = await call('PUT', archive(sid, 'proj'), gzipSync(tar), {
      'content-type': 'application/x-tar',
    });
    expect(up.status).toBe(200);
    expect(up.json).toMatchObject({ path: 'proj', files: 3, directories: 1, bytes: 12 + 4 + 12 });
    expect(readFileSync(ws(sid, 'proj/src/copy.py'), 'utf8')).toBe('print("hi")\n');

    const down = await call('GET', archive(sid, 'proj'));
    expect(down.status).toBe(200);
    expect(down.headers.get('content-type')).toBe('application/x-tar');
    expect(await entriesOf(down.body)).toEqual({
      'src/': 'dir',
      'src/copy.py': 'print("hi")\n',
      'src/data/': 'dir',
      'src/data/blob.bin': Buffer.from([0, 1, 2, 255]).toString(),
      'src/link': '-> main.py',
      'src/main.py': 'print("hi")\n',
    });

    for (const hostile of [
      [
        { name: 'good.txt', content: 'ok' },
        { name: '../x', content: 'escaped' },
      ],
      [
        { name: 'good.txt', content: 'ok' },
        { name: 'out', type: 'symlink' as const, linkname: '../../../etc' },
      ],
      [
        { name: 'good.txt', content: 'ok' },
        { name: '/abs.txt', content: 'x' },
      ],
      [
        { name: 'good.txt', content: 'ok' },
        { name: 'fifo', type: 'fifo' as const },
      ],
      [
        { name: 'l', type: 'symlink' as const, linkname: '.' },
        { name: 'l/through.txt', content: 'x' },
      ],
    ]) {
      const bad = await call('PUT', archive(sid, 'landing'), await tarOf(hostile));
      expect(bad.status).toBe(400);
      expect(fieldsOf(bad.json)).toEqual(['body']);
      expect(existsSync(ws(sid, 'landing'))).toBe(false);
    }
    const garbage = await call('PUT', archive(sid), randomBytes(4096));
    expect(garbage.status).toBe(400);
    expect(garbage.json.error.code).toBe('ARCHIVE_INVALID');
    // Nothing of any refused archive anywhere, staging directories included.
    expect(readdirSync(ws(sid)).filter((n) => n.startsWith('.switchyard') || n === 'good.txt')).toEqual([]);
    expect(readdirSync(ws(sid, 'proj'))).toEqual(['src']);
  });

  it('what was transferred is there for code in every tier (subprocess, pooled)', async () => {
    const data = randomBytes(256 * 1024);
    expect((await call('PUT', content(sid, 'shared/in.bin'), data)).status).toBe(200);
    for (const [i, tier] of ['subprocess', 'pooled'].entries()) {
      const res = await action(sid, {
        type: 'code',
        language: 'python',
        tier,
        code:
          'import hashlib; print(hashlib.sha256(open("shared/in.bin","rb").read()).hexdigest())\n' +
          `open("shared/out-${i}.txt","w").write("from tier ${i}")`,
      });
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ status: 'succeeded', tier });
      expect(res.json.stdout.trim()).toBe(sha256(data));
      const back = await call('GET', content(sid, `shared/out-${i}.txt`));
      expect(back.body.toString()).toBe(`from tier ${i}`);
    }
  }, 60_000);

  it('file actions carry binary as base64: write, append past the whole-file cap, read; bad base64 is a 400', async () => {
    const chunk = randomBytes(40 * 1024);
    const w = await action(sid, {
      type: 'file',
      op: 'write',
      path: 'b64/x.bin',
      content: chunk.toString('base64'),
      encoding: 'base64',
    });
    expect(w.json).toMatchObject({ status: 'succeeded', output: { size: chunk.length } });
    // Three appends make 160 KiB, over the 64 KiB whole-file cap: appends are bounded by the quota only.
    for (let i = 0; i < 3; i++) {
      const a = await action(sid, {
        type: 'file',
        op: 'write',
        path: 'b64/x.bin',
        mode: 'append',
        content: chunk.toString('base64'),
        encoding: 'base64',
      });
      expect(a.json.status).toBe('succeeded');
    }
    expect(readFileSync(ws(sid, 'b64/x.bin')).equals(Buffer.concat([chunk, chunk, chunk, chunk]))).toBe(true);
    const small = Buffer.from([0, 159, 146, 150, 10]);
    await action(sid, {
      type: 'file',
      op: 'write',
      path: 'b64/s.bin',
      content: small.toString('base64'),
      encoding: 'base64',
    });
    const r = await action(sid, { type: 'file', op: 'read', path: 'b64/s.bin', encoding: 'base64' });
    expect(r.json.output).toMatchObject({ encoding: 'base64', content: small.toString('base64'), size: 5 });
    const text = await action(sid, { type: 'file', op: 'read', path: 'keep.txt', encoding: 'base64' });
    expect(text.json.output.content).toBe(Buffer.from('old').toString('base64'));
    const big = await action(sid, { type: 'file', op: 'read', path: 'b64/x.bin', encoding: 'base64' });
    expect(big.json).toMatchObject({ status: 'failed', error: { code: 'FILE_TOO_LARGE' } });
    const bad = await action(sid, {
      type: 'file',
      op: 'write',
      path: 'b64/y.bin',
      content: 'not base64!',
      encoding: 'base64',
    });
    expect(bad.status).toBe(400);
    expect(fieldsOf(bad.json)).toEqual(['content']);
    expect(existsSync(ws(sid, 'b64/y.bin'))).toBe(false);
    // The transfer ops are not action bodies.
    const smuggled = await action(sid, { type: 'file', op: 'upload', path: 'z.bin' });
    expect(smuggled.status).toBe(400);
    expect(fieldsOf(smuggled.json)).toEqual(['op']);
  });

  it('a policy deny is a 403 in the error format, recorded as a denied action with its reason; an ask is a 403 too', async () => {
    const denied = await createSession({
      policy: { rules: [{ effect: 'deny', match: { tool: ['file_upload', 'file_download_archive'] } }] },
    });
    const up = await call('PUT', content(denied, 'x.bin'), randomBytes(1024));
    expect(up.status).toBe(403);
    expect(up.json.error).toMatchObject({
      code: 'POLICY_DENIED',
      details: { actionId: expect.stringMatching(/^act_/) },
    });
    expect(up.json.error.message).toContain('file_upload');
    expect(existsSync(ws(denied, 'x.bin'))).toBe(false);
    const record = await getAction(denied, up.json.error.details.actionId);
    expect(record).toMatchObject({ type: 'file', status: 'denied', input: { op: 'upload', path: 'x.bin' } });
    expect(record.error.message).toContain('file_upload');
    expect((await call('GET', archive(denied))).status).toBe(403);
    // An ask cannot hold a stream: refused at once, the action cancelled.
    const asked = await createSession({
      policy: { rules: [{ effect: 'ask', match: { tool: 'file_download' } }] },
    });
    expect((await call('PUT', content(asked, 'a.bin'), Buffer.from('a'))).status).toBe(200);
    const ask = await call('GET', content(asked, 'a.bin'));
    expect(ask.status).toBe(403);
    expect(ask.json.error.code).toBe('APPROVAL_REQUIRED');
    expect(await getAction(asked, ask.json.error.details.actionId)).toMatchObject({ status: 'cancelled' });
    // What the policy leaves alone still works.
    expect(
      (await call('PUT', archive(denied, 'd'), await tarOf([{ name: 'a.txt', content: 'a' }]))).status,
    ).toBe(200);
  });

  it('a client that aborts mid-upload leaves the old file intact and no temporary file', async () => {
    expect((await call('PUT', content(sid, 'abort/target.bin'), Buffer.from('old content'))).status).toBe(
      200,
    );
    const target = new URL(content(sid, 'abort/target.bin'));
    const req = http.request({
      method: 'PUT',
      host: target.hostname,
      port: target.port,
      path: `${target.pathname}${target.search}`,
    });
    req.on('error', () => undefined);
    req.write(randomBytes(4 * MiB));
    const tmpFiles = () => readdirSync(ws(sid, 'abort')).filter((n) => n.endsWith('.tmp'));
    for (let i = 0; i < 200 && tmpFiles().length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(tmpFiles()).toHaveLength(1); // the upload is streaming into its temporary file
    req.destroy();
    for (let i = 0; i < 200 && tmpFiles().length > 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(tmpFiles()).toEqual([]);
    expect(readFileSync(ws(sid, 'abort/target.bin'), 'utf8')).toBe('old content');
    // The action's end is recorded once its stream has unwound: looked for until it shows.
    const aborted = async () =>
      ((await call('GET', url(`/v1/sessions/${sid}/actions?limit=1000`))).json.actions as any[]).find(
        (a) => a.inputSummary === 'upload abort/target.bin' && !['succeeded', 'running'].includes(a.status),
      );
    let record = await aborted();
    for (let i = 0; i < 200 && !record; i++) {
      await new Promise((r) => setTimeout(r, 25));
      record = await aborted();
    }
    expect(record).toMatchObject({
      // The client gone, the engine cancels the transfer's action.
      status: 'cancelled',
      error: { code: 'CANCELLED' },
    });
  });

  it('engine memory stays flat while 256 MiB go up and down; past the quota is a 413 with nothing left', async () => {
    const rss = () =>
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${engine.pid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 50);
    try {
      const body = bigBody(256 * MiB);
      const up = await call('PUT', content(sid, 'mem/big.bin'), body.stream);
      expect(up.status).toBe(200);
      expect(up.json).toMatchObject({ size: 256 * MiB, sha256: body.sha256() });
      const res = await fetch(content(sid, 'mem/big.bin'));
      const hash = createHash('sha256');
      let got = 0;
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        hash.update(chunk);
        got += chunk.length;
      }
      expect(got).toBe(256 * MiB);
      expect(hash.digest('hex')).toBe(up.json.sha256);
    } finally {
      clearInterval(sampler);
    }
    // The size moved was 512 MiB; the engine grew by a small fraction of it (buffers of about a MiB per transfer).
    expect(peak - before).toBeLessThan(96 * MiB);

    // 352 MiB quota, ~290 MiB used: a 200 MiB upload passes it a third of the way.
    const over = bigBody(200 * MiB);
    const full = await call('PUT', content(sid, 'mem/over.bin'), over.stream);
    expect(full.status).toBe(413);
    expect(full.json.error.code).toBe('WORKSPACE_FULL');
    expect(existsSync(ws(sid, 'mem/over.bin'))).toBe(false);
    expect(readdirSync(ws(sid, 'mem'))).toEqual(['big.bin']);
  }, 60_000);
});
