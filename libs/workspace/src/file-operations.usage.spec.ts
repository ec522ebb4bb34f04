import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Test } from '@nestjs/testing';
import { SYNC_IO_BYTES } from './file-content';
import type { FileOp } from './file-op.types';
import { FileOperations } from './file-operations.service';
import { readDirVerified } from './dir-listing';
import { FileOpError } from './workspace.errors';
import { WorkspaceManager } from './workspace-manager.service';
import { WorkspaceModule } from './workspace.module';
import { resolveWorkspaceOptions, type WorkspaceModuleOptions } from './workspace.options';
import * as wsfs from './workspace-fs';
import { WorkspaceUsage } from './workspace-usage';

/** The workspace cap against a maintained count (no walk per write), and the sync/async I/O split. */
describe('FileOperations: workspace usage and I/O paths', () => {
  let tmp: string;
  let ws: string;
  let ops: FileOperations;
  let walks: jest.SpyInstance;
  const make = (overrides: Partial<WorkspaceModuleOptions> = {}) =>
    new FileOperations(resolveWorkspaceOptions({ root: tmp, ...overrides }));
  const run = (op: FileOp) => ops.execute(ws, op);
  const write = (p: string, n: number, mode?: 'overwrite' | 'append' | 'create') =>
    run({ op: 'write', path: p, content: 'x'.repeat(n), mode });
  const full = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(FileOpError);
    expect((err as FileOpError).code).toBe('WORKSPACE_FULL');
  };

  beforeEach(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-usage-ops-')));
    ws = path.join(tmp, 'ws');
    await fs.mkdir(ws);
    walks = jest.spyOn(wsfs, 'diskUsage');
    // A frozen clock: the count never ages out in the middle of a test.
    const now = performance.now();
    jest.spyOn(performance, 'now').mockReturnValue(now);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await fs.rm(tmp, { recursive: true, force: true });
    await fs.rm(`${tmp}.images`, { recursive: true, force: true }); // capped workspaces' images
  });

  it("keeps the count exact through the API's own writes, edits, moves and deletes, walking once", async () => {
    ops = make({ limits: { maxWorkspaceBytes: 1000 } });
    await fs.writeFile(path.join(ws, 'before'), 'b'.repeat(100)); // there before the first write: walked
    await write('a', 50); // 150
    await write('a', 20); // overwrite: 120
    await write('a', 30, 'append'); // 150
    await write('d/b', 200, 'create'); // 350
    await run({ op: 'edit', path: 'd/b', find: 'x'.repeat(200), replace: 'x'.repeat(190) }); // 340
    await write('c', 60); // 400
    await run({ op: 'move', path: 'c', to: 'a', overwrite: true }); // replaces a (50): 350
    await run({ op: 'move', path: 'd/b', to: 'e/b' }); // 350
    await fs.symlink('a', path.join(ws, 'link'));
    await run({ op: 'delete', path: 'link' }); // links count for nothing: 350
    await run({ op: 'delete', path: 'before' }); // 250
    await run({ op: 'mkdir', path: 'empty/dir' }); // 250
    expect(walks).toHaveBeenCalledTimes(1);
    expect((await wsfs.diskUsage(ws, 1000)).bytes).toBe(250);
    await full(write('new', 751));
    await write('new', 750);
    await full(write('new', 1, 'append'));
  });

  it('does not count refused or failed writes', async () => {
    ops = make({ limits: { maxWorkspaceBytes: 100, maxFileBytes: 80 } });
    await write('a', 50);
    await expect(write('a', 5, 'create')).rejects.toMatchObject({ code: 'EEXIST' });
    await expect(write('big', 81)).rejects.toMatchObject({ code: 'FILE_TOO_LARGE' });
    await full(write('b', 51));
    await fs.writeFile(path.join(ws, 'plain'), 'p');
    await fs.mkdir(path.join(ws, 'dir'));
    await expect(write('dir', 5)).rejects.toMatchObject({ code: 'EISDIR' });
    await fs.writeFile(path.join(tmp, 'out'), '');
    await fs.link(path.join(tmp, 'out'), path.join(ws, 'hard'));
    await expect(write('hard', 5)).rejects.toMatchObject({ code: 'PATH_HARDLINK' });
    // The API's own count (50) plus nothing: the write of the plain file behind its back is not seen yet.
    await write('b', 50);
    await full(write('c', 1));
    expect(walks).toHaveBeenCalledTimes(1);
  });

  it('re-measures after markUsageStale, so changes made behind its back count', async () => {
    ops = make({ limits: { maxWorkspaceBytes: 100 } });
    await write('a', 10);
    await fs.writeFile(path.join(ws, 'by-code'), 'c'.repeat(80)); // what a code action would do
    ops.markUsageStale(ws);
    await full(write('b', 11));
    await write('b', 10);
    expect(walks).toHaveBeenCalledTimes(2);
  });

  it('re-measures after a recursive delete, whose size only a walk can tell', async () => {
    ops = make({ limits: { maxWorkspaceBytes: 100 } });
    await write('t/a', 40);
    await write('t/b/c', 40);
    await run({ op: 'delete', path: 't', recursive: true });
    await write('all', 100);
    expect(walks).toHaveBeenCalledTimes(2);
  });

  it('lets concurrent writes fill the workspace exactly, never past its cap', async () => {
    ops = make({ limits: { maxWorkspaceBytes: 100 } });
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => write(`f${i}`, 20)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    for (const r of results) {
      if (r.status === 'rejected') expect((r.reason as FileOpError).code).toBe('WORKSPACE_FULL');
    }
    expect((await wsfs.diskUsage(ws, 1000)).bytes).toBe(100);
  });

  it('shares one count between the manager and the file API; a snapshot (taken around code) marks it stale', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [WorkspaceModule.forRoot({ root: tmp, sandboxUid: null, limits: { maxWorkspaceBytes: 100 } })],
    }).compile();
    const manager = moduleRef.get(WorkspaceManager);
    const files = moduleRef.get(FileOperations);
    expect(moduleRef.get(WorkspaceUsage)).toBeInstanceOf(WorkspaceUsage);
    const dir = await manager.create('s');
    await files.execute(dir, { op: 'write', path: 'a', content: 'x'.repeat(10) });
    await manager.snapshot('s');
    await fs.writeFile(path.join(dir, 'by-code'), 'c'.repeat(80));
    await manager.snapshot('s');
    await full(files.execute(dir, { op: 'write', path: 'b', content: 'x'.repeat(11) }));
    await fs.writeFile(path.join(dir, 'more'), 'm'.repeat(5));
    manager.markUsageStale('s');
    await full(files.execute(dir, { op: 'write', path: 'b', content: 'x'.repeat(6) }));
    await files.execute(dir, { op: 'write', path: 'b', content: 'x'.repeat(5) });
    await moduleRef.close();
  });

  it('writes, reads and edits content past the sync I/O size through the threadpool, intact', async () => {
    ops = make();
    const big = Array.from({ length: 3 * SYNC_IO_BYTES }, (_, i) => String.fromCharCode(97 + (i % 26))).join(
      '',
    );
    await run({ op: 'write', path: 'big.txt', content: big });
    await run({ op: 'write', path: 'big.txt', content: big, mode: 'append' });
    expect(await fs.readFile(path.join(ws, 'big.txt'), 'utf8')).toBe(big + big);
    expect((await run({ op: 'read', path: 'big.txt' })).output.content).toBe(big + big);
    await run({ op: 'edit', path: 'big.txt', find: big + big, replace: `${big}!` });
    expect(await fs.readFile(path.join(ws, 'big.txt'), 'utf8')).toBe(`${big}!`);
    const bin = Buffer.alloc(SYNC_IO_BYTES + 1, 0);
    await fs.writeFile(path.join(ws, 'bin'), bin);
    expect((await run({ op: 'read', path: 'bin' })).output).toMatchObject({
      encoding: 'base64',
      size: bin.length,
    });
    expect(await fs.readdir(ws)).toEqual(['big.txt', 'bin']); // no temp files left
  });

  it('lists directories larger than one lstat batch and than a sync readdir, sorted and complete', async () => {
    const dir = path.join(ws, 'many');
    await fs.mkdir(dir);
    // Long names: past 64 KiB of directory on ext4, so the readdir goes through the threadpool there.
    const names = Array.from({ length: 1500 }, (_, i) => `${'n'.repeat(60)}-${String(i).padStart(4, '0')}`);
    for (const n of names) await fs.writeFile(path.join(dir, n), '');
    const entries = await readDirVerified(dir);
    expect(entries?.map((e) => e.name)).toEqual([...names].sort());
    expect(entries?.every((e) => e.stat.isFile())).toBe(true);
  });
});
