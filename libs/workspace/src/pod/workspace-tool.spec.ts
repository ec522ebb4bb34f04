/**
 * The pod's workspace tool, bundled for real (`buildPodTools` into a temp dir) and run as the engine will run it: a
 * fresh `node` per request, the request on stdin. Each answer is compared with what the host backend does on an
 * identical directory (`FileOperations.execute`, `WorkspaceManager.snapshot`/`changedPaths`/`usageBytes`,
 * `WorkspaceFiles` for raw bytes): same outputs, same touched files, same errors once revived (class, code, message,
 * details, kind). The same bundle inside the sandbox image: workspace-tool.image.spec.ts.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { WorkspaceFiles } from '@switchyard/browser';
import { FileOperations } from '../file-operations.service';
import { WorkspaceManager } from '../workspace-manager.service';
import { resolveWorkspaceOptions } from '../workspace.options';
import {
  changedPaths,
  reviveError,
  snapshotFromWire,
  type WorkspaceToolAnswer,
  WorkspaceToolError,
  type WorkspaceToolRequest,
} from './workspace-tool.protocol';
import {
  fromAnswer,
  LIMITS,
  opOf,
  type Result,
  ROWS,
  seed as seedIn,
  settle,
  treeOf as treeIn,
} from './workspace-tool.table.testing';
import { type BuiltTool, buildTool, runTool } from './workspace-tool.testing';

describe('pod workspace tool (host node)', () => {
  let tmp: string;
  let tool: BuiltTool;
  const run = (req: WorkspaceToolRequest) => runTool(tool.file, req);
  const seed = (name: string) => seedIn(tmp, name);
  const treeOf = (ws: string) => treeIn(tmp, ws);

  beforeAll(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-podtool-')));
    tool = buildTool(path.join(tmp, 'bundle'));
  });
  afterAll(() => fs.rm(tmp, { recursive: true, force: true }));

  it('answers every file op as FileOperations.execute does on an identical tree', async () => {
    // `host` gets the host backend, `pod` the tool. Names of one length: symlink sizes (their targets') show in list.
    const host = await seed('host');
    const pod = await seed('pod1');
    let previous: Result = { ok: true, value: undefined };
    const expected = new Set<string>();
    for (const row of ROWS) {
      const op = opOf(row, previous);
      const limits = { ...LIMITS, ...row.limits };
      const files = new FileOperations(resolveWorkspaceOptions({ root: tmp, limits, ...row.options }));
      const want = await settle(files.execute(host, op));
      const { answer, exitCode, stderr } = await run({
        op: 'file',
        root: pod,
        request: op,
        limits,
        ...(row.options ? { options: row.options } : {}),
      });
      const got = fromAnswer(answer, (a) => a.outcome);
      expect({ row: row.name, exitCode, stderr, result: got }).toEqual({
        row: row.name,
        exitCode: 0,
        stderr: '',
        result: want,
      });
      // The table says what each row exercises; a row that drifted (passing when it should be refused) fails here.
      expect({ row: row.name, outcome: want.ok ? 'ok' : want.error.code }).toEqual({
        row: row.name,
        outcome: row.expect,
      });
      expected.add(row.expect);
      previous = want;
    }
    // Every op, and the main refusals, were exercised.
    const ops = new Set(ROWS.map((r) => (typeof r.op === 'function' ? 'list' : r.op.op)));
    expect([...ops].sort()).toEqual(
      ['chmod', 'delete', 'edit', 'find', 'grep', 'list', 'mkdir', 'move', 'read', 'stat', 'write'].sort(),
    );
    const refusals = [
      'PATH_ESCAPE',
      'PATH_ABSOLUTE',
      'PATH_SYMLINK_ESCAPE',
      'PATH_HARDLINK',
      'FILE_TOO_LARGE',
    ];
    refusals.push('WORKSPACE_FULL', 'EDIT_NOT_FOUND', 'INVALID_PATTERN', 'INVALID_CURSOR', 'INVALID_INPUT');
    for (const code of refusals) expect(expected).toContain(code);
    expect(await treeOf(pod)).toEqual(await treeOf(host));
  }, 180_000); // some 80 cold node starts: slow on a loaded host

  it('takes the snapshot WorkspaceManager.snapshot takes, and changedPaths diffs them the same way', async () => {
    const ws = await seed('snap');
    const manager = new WorkspaceManager(resolveWorkspaceOptions({ root: path.dirname(ws) }));
    const snap = async (maxEntries?: number) => {
      const { answer } = await run({ op: 'snapshot', root: ws, ...(maxEntries ? { maxEntries } : {}) });
      if (!answer.ok) throw reviveError(answer);
      return (answer as WorkspaceToolAnswer<'snapshot'> & { ok: true }).snapshot;
    };
    const before = await snap();
    expect(snapshotFromWire(before)).toEqual(await manager.snapshot('ws'));
    expect(before.entries.map(([p]) => p)).toContain('sub/deeper/d.py');
    expect(before.partial).toBe(false);
    const smallBefore = await snap(3);
    const small = new WorkspaceManager(
      resolveWorkspaceOptions({ root: path.dirname(ws), snapshotMaxEntries: 3 }),
    );
    expect(snapshotFromWire(smallBefore)).toEqual(await small.snapshot('ws'));
    expect(smallBefore.partial).toBe(true);

    // What a code action does behind the file API's back.
    const code =
      'echo changed >> a.txt && rm big.txt && mkdir -p out && echo new > out/n.txt && touch src/main.py';
    execFileSync('sh', ['-c', code], { cwd: ws });
    const after = await snap();
    const smallAfter = await snap(3);
    expect(changedPaths(before, after)).toEqual(['a.txt', 'big.txt', 'out/n.txt', 'src/main.py']);
    expect(changedPaths(before, after)).toEqual(
      manager.changedPaths(snapshotFromWire(before), snapshotFromWire(after)),
    );
    // Partial snapshots only compare what both cover.
    for (const [b, a] of [
      [smallBefore, after],
      [before, smallAfter],
      [smallBefore, smallAfter],
    ] as const) {
      expect(changedPaths(b, a)).toEqual(manager.changedPaths(snapshotFromWire(b), snapshotFromWire(a)));
    }
    // The first three entries (a.txt, big.txt, bin.dat): out/n.txt and src/main.py lie past what it saw.
    expect(changedPaths(smallBefore, after)).toEqual(['a.txt', 'big.txt']);
  });

  it('reads and writes raw bytes as WorkspaceFiles does', async () => {
    const hostWs = await seed('bytes-hst/root');
    const podWs = await seed('bytes-pod/root');
    // WorkspaceFiles.write measures usage by session id: `<root>/<id>` is `<tmp>/bytes-hst/root/ws`.
    const limits = { ...LIMITS, maxWorkspaceBytes: 64 * 1024 };
    const options = resolveWorkspaceOptions({ root: path.dirname(hostWs), limits });
    const files = new WorkspaceFiles(new WorkspaceManager(options), options);
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0xff]);

    const writes: [string, Buffer][] = [
      ['shots/one.png', png],
      ['a.txt', Buffer.from('replaced')],
      ['inlink', Buffer.from('through an inside link')],
      ['esc', png],
      ['../x.png', png],
      ['/abs.png', png],
      ['sub', png],
      ['full.bin', Buffer.alloc(60 * 1024)],
    ];
    for (const [p, bytes] of writes) {
      const want = await settle(files.write('ws', hostWs, p, bytes));
      const { answer } = await run({
        op: 'writeBytes',
        root: podWs,
        path: p,
        base64: bytes.toString('base64'),
        limits,
        maxBytes: 1024 * 1024,
      });
      const got = fromAnswer(answer, (a) => a.realRel);
      expect({ p, got }).toEqual({ p, got: want });
      if (answer.ok) expect(answer).toMatchObject({ size: bytes.length });
    }
    expect(await treeOf(podWs)).toEqual(await treeOf(hostWs));

    const reads = ['shots/one.png', 'bin.dat', 'inlink', 'esc', 'hard', 'nope', 'sub', '../x', 'big.txt'];
    for (const p of reads) {
      const want = await settle(files.read(hostWs, p, 4096));
      const { answer } = await run({ op: 'readBytes', root: podWs, path: p, maxBytes: 4096 });
      const got = fromAnswer(answer, (a) => ({
        buffer: Buffer.from(a.base64 as string, 'base64'),
        name: a.name,
        realRel: a.realRel,
      }));
      expect({ p, got }).toEqual({ p, got: want });
    }
    // The cap defaults to limits.maxFileBytes.
    const { answer: capped } = await run({
      op: 'readBytes',
      root: podWs,
      path: 'big.txt',
      limits: { maxFileBytes: 10 },
    });
    expect(capped.ok ? undefined : capped.error).toMatchObject({
      name: 'FileOpError',
      code: 'FILE_TOO_LARGE',
    });
    const { answer: read } = await run({ op: 'readBytes', root: podWs, path: 'shots/one.png' });
    expect(read).toEqual({
      ok: true,
      base64: png.toString('base64'),
      size: png.length,
      name: 'one.png',
      realRel: 'shots/one.png',
    });
  });

  it('caps and places writeBytes as asked', async () => {
    const ws = await seed('bytes-caps');
    const tooBig = await run({ op: 'writeBytes', root: ws, path: 'x.bin', base64: 'AAAA', maxBytes: 2 });
    expect(tooBig.answer).toEqual({
      ok: false,
      error: {
        name: 'FileOpError',
        code: 'FILE_TOO_LARGE',
        message: 'x.bin would be 3 bytes, over the 2-byte cap',
        details: { path: 'x.bin', size: 3, cap: 2 },
        kind: 'payload_too_large',
      },
    });
    const noParent = await run({
      op: 'writeBytes',
      root: ws,
      path: 'no/such/x.bin',
      base64: 'AAAA',
      mkdirs: false,
    });
    expect(noParent.answer).toMatchObject({ ok: false, error: { name: 'FileOpError', code: 'ENOENT' } });
    await expect(fs.access(path.join(ws, 'no'))).rejects.toThrow();
    const made = await run({ op: 'writeBytes', root: ws, path: 'no/such/x.bin', base64: 'AAAA' });
    expect(made.answer).toEqual({ ok: true, size: 3, realRel: 'no/such/x.bin' });
    expect(await fs.readFile(path.join(ws, 'no/such/x.bin'))).toEqual(Buffer.from([0, 0, 0]));
    const notBase64 = await run({ op: 'writeBytes', root: ws, path: 'x.bin', base64: 'not base64!' });
    expect(notBase64.answer).toMatchObject({
      ok: false,
      error: { name: 'WorkspaceToolError', code: 'BAD_REQUEST' },
    });
  });

  it('moves megabytes through its stdin and stdout', async () => {
    const ws = await seed('large');
    const bytes = Buffer.alloc(3 * 1024 * 1024 + 7);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) & 0xff;
    const big = { maxBytes: 4 * 1024 * 1024, limits: { maxWorkspaceBytes: 64 * 1024 * 1024 } };
    const write = await run({
      op: 'writeBytes',
      root: ws,
      path: 'big.bin',
      base64: bytes.toString('base64'),
      ...big,
    });
    expect(write.answer).toEqual({ ok: true, size: bytes.length, realRel: 'big.bin' });
    const read = await run({ op: 'readBytes', root: ws, path: 'big.bin', ...big });
    expect(read.answer.ok).toBe(true);
    const back = Buffer.from((read.answer as { base64: string }).base64, 'base64');
    expect(back.equals(bytes)).toBe(true);
  });

  it('measures usage as the workspace cap does', async () => {
    const ws = await seed('usage');
    const manager = new WorkspaceManager(resolveWorkspaceOptions({ root: path.dirname(ws) }));
    const { answer } = await run({ op: 'usage', root: ws });
    const files = execFileSync('find', [ws, '-type', 'f'], { encoding: 'utf8' }).trim().split('\n').length;
    expect(answer).toEqual({ ok: true, bytes: await manager.usageBytes('ws'), files, partial: false });
    const { answer: partial } = await run({ op: 'usage', root: ws, maxScanEntries: 3 });
    expect(partial).toMatchObject({ ok: true, partial: true });
  });

  it('answers what it cannot do, with exit code 0', async () => {
    const notJson = await runTool(tool.file, 'not json');
    expect(notJson.exitCode).toBe(0);
    expect(notJson.answer).toMatchObject({
      ok: false,
      error: { name: 'WorkspaceToolError', code: 'BAD_REQUEST' },
    });
    const err = reviveError(notJson.answer as Extract<WorkspaceToolAnswer, { ok: false }>);
    expect(err).toBeInstanceOf(WorkspaceToolError);

    const unknown = await runTool(tool.file, JSON.stringify({ op: 'format' }));
    expect(unknown.answer).toMatchObject({
      ok: false,
      error: { name: 'WorkspaceToolError', code: 'BAD_REQUEST' },
    });
    const relativeRoot = await run({ op: 'usage', root: 'ws' });
    expect(relativeRoot.answer).toMatchObject({ ok: false, error: { name: 'WorkspaceToolError' } });
    const noLimits = await run({
      op: 'file',
      root: tmp,
      request: { op: 'list' },
    } as unknown as WorkspaceToolRequest);
    expect(noLimits.answer).toMatchObject({ ok: false, error: { name: 'WorkspaceToolError' } });
    const badLimits = await run({
      op: 'file',
      root: tmp,
      request: { op: 'list' },
      limits: { ...LIMITS, maxFileBytes: -1 },
    });
    expect(badLimits.answer).toMatchObject({
      ok: false,
      error: { name: 'InvalidInputError', details: { field: 'workspace.limits.maxFileBytes' } },
    });

    // A missing workspace: the host's NotFoundError.
    const missing = path.join(tmp, 'missing');
    const want = await settle(
      new FileOperations(resolveWorkspaceOptions({ root: tmp })).execute(missing, { op: 'list' }),
    );
    const { answer } = await run({ op: 'file', root: missing, request: { op: 'list' }, limits: LIMITS });
    expect(fromAnswer(answer, (a) => a.outcome)).toEqual(want);
    expect(want).toMatchObject({ ok: false, error: { class: 'NotFoundError', kind: 'not_found' } });
    const snapMissing = await run({ op: 'snapshot', root: missing });
    expect(snapMissing.answer).toMatchObject({ ok: false, error: { name: 'NotFoundError' } });
  });

  it('is one small self-contained file: no package but the Nest shim, no reflect-metadata', async () => {
    expect(tool.bytes).toBeLessThan(100 * 1024);
    expect(tool.inputs.filter((i) => i.includes('node_modules'))).toEqual([]);
    expect(tool.inputs).toContain('libs/workspace/src/pod/nest-shim.ts');
    const text = await fs.readFile(tool.file, 'utf8');
    expect(text).not.toMatch(/reflect-metadata|@nestjs/);
    const requires = new Set([...text.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]));
    for (const r of requires) expect(r).toMatch(/^node:/);
  });
});
