import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { Test } from '@nestjs/testing';
import { InvalidInputError } from '@switchyard/common';
import {
  DEFAULT_WORKSPACE_LIMITS,
  FileOperations,
  FileOpError,
  PathRejectedError,
  resolveWorkspaceOptions,
  WORKSPACE_OPTIONS,
  WorkspaceManager,
  WorkspaceModule,
  type WorkspaceOptions,
} from './index';

describe('WorkspaceModule', () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'sy-wsmod-'));
  });
  afterEach(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
    await fs.rm(`${tmp}.images`, { recursive: true, force: true }); // capped workspaces' images
  });

  it('provides the options, the manager and the file API, wired together', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [WorkspaceModule.forRoot({ root: tmp, limits: { maxFileBytes: 100 }, sandboxUid: null })],
    }).compile();
    const options = moduleRef.get<WorkspaceOptions>(WORKSPACE_OPTIONS);
    expect(options.limits).toEqual({ ...DEFAULT_WORKSPACE_LIMITS, maxFileBytes: 100 });
    const manager = moduleRef.get(WorkspaceManager);
    const files = moduleRef.get(FileOperations);
    const dir = await manager.create('sess');
    await files.execute(dir, { op: 'write', path: 'hello.txt', content: 'hi' });
    expect((await files.execute(dir, { op: 'read', path: 'hello.txt' })).output.content).toBe('hi');
    await expect(
      files.execute(dir, { op: 'write', path: 'big', content: 'x'.repeat(101) }),
    ).rejects.toBeInstanceOf(FileOpError);
    await expect(files.execute(dir, { op: 'read', path: '../x' })).rejects.toBeInstanceOf(PathRejectedError);
    await moduleRef.close();
  });

  it('files made through the API belong to the sandbox uid when the engine is root', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [WorkspaceModule.forRoot({ root: tmp })],
    }).compile();
    const dir = await moduleRef.get(WorkspaceManager).create('sess');
    await moduleRef.get(FileOperations).execute(dir, { op: 'write', path: 'sub/f.txt', content: 'x' });
    const expected = process.getuid?.() === 0 ? 65534 : process.getuid!();
    for (const p of ['', 'sub', 'sub/f.txt']) {
      expect((await fs.stat(path.join(dir, p))).uid).toBe(expected);
    }
    expect((await fs.stat(path.join(dir, 'sub/f.txt'))).mode & 0o777).toBe(0o600);
    await moduleRef.close();
  });

  it('fails at boot naming the bad setting', () => {
    const field = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidInputError);
        return (err as InvalidInputError).field;
      }
      throw new Error('expected a throw');
    };
    expect(field(() => WorkspaceModule.forRoot({ root: 'relative/dir' }))).toBe('workspace.root');
    expect(field(() => resolveWorkspaceOptions({ root: tmp, limits: { maxFileBytes: 0 } }))).toBe(
      'workspace.limits.maxFileBytes',
    );
    expect(field(() => resolveWorkspaceOptions({ root: tmp, sandboxUid: -1 }))).toBe('workspace.sandboxUid');
    expect(field(() => resolveWorkspaceOptions({ root: tmp, dirMode: 0o4777 }))).toBe('workspace.dirMode');
    for (const imagePool of [-1, 1.5, 17]) {
      expect(field(() => resolveWorkspaceOptions({ root: tmp, imagePool }))).toBe('workspace.imagePool');
    }
    const filesystem = 'xfs' as 'ext4';
    expect(field(() => resolveWorkspaceOptions({ root: tmp, filesystem }))).toBe('workspace.filesystem');
    expect(field(() => resolveWorkspaceOptions({ root: tmp, checkpoints: { max: 0 } }))).toBe(
      'workspace.checkpoints.max',
    );
    expect(field(() => resolveWorkspaceOptions({ root: tmp, checkpoints: { max: 2, keepAuto: 3 } }))).toBe(
      'workspace.checkpoints.keepAuto',
    );
  });

  it('fills documented defaults', () => {
    expect(resolveWorkspaceOptions({ root: tmp })).toEqual({
      root: tmp,
      limits: { maxFileBytes: 1024 * 1024, maxWorkspaceBytes: 512 * 1024 * 1024, maxPathLength: 4096 },
      sandboxUid: 65534,
      sandboxGid: 65534,
      dirMode: 0o700,
      maxScanEntries: 100_000,
      snapshotMaxEntries: 10_000,
      maxRegexLength: 1000,
      grepFileTimeoutMs: 1000,
      quota: 'auto',
      imageDir: `${tmp}.images`,
      imagePool: 2,
      filesystem: 'auto',
      checkpoints: {
        max: 32,
        keepAuto: 10,
        diff: { maxEntries: 10_000, maxTextBytes: 64 * 1024, maxDiffBytes: 1024 * 1024 },
      },
    });
  });
});
