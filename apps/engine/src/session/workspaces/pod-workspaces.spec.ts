/**
 * PodWorkspaces' snapshots: the session pod's runner walks the workspace itself (`SessionPods.snapshot`), stood in
 * for here by the runner's own walk (docker/sandbox/runner/runner_snapshot.py) run on the host with a temporary
 * directory as /workspace. What is checked is the engine's side: the bounds it asks for, the files a code action's
 * two snapshots say it changed, and what a refusal or a lost runner becomes.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RunnerRefusedError, type SessionPods } from '@switchyard/sandbox';
import { NotFoundError } from '@switchyard/common';
import { type WorkspaceManager, WorkspaceToolError } from '@switchyard/workspace';
import type { EngineConfig } from '../../platform/config/engine-config';
import { PodWorkspaces } from './pod-workspaces';

const WALK = path.resolve(__dirname, '../../../../../docker/sandbox/runner/runner_snapshot.py');

describe('PodWorkspaces.snapshot (the runner walks the session pod’s workspace)', () => {
  let tmp: string;
  let root: string;
  let asked: Array<{ sessionId: string; bounds: unknown; timeoutMs: number; options: unknown }>;
  let walkAfterRuns: unknown[];
  let answer: (bounds: { maxEntries: number; maxScanEntries: number }) => Promise<Record<string, unknown>>;
  let workspaces: PodWorkspaces;

  /** The runner's walk of `root`, as the runner answers `snapshot`. */
  const walk = (bounds: { maxEntries: number; maxScanEntries: number }) => {
    const r = spawnSync('python3', [WALK], { input: JSON.stringify({ root, ...bounds }), encoding: 'utf8' });
    return Promise.resolve(JSON.parse(r.stdout) as Record<string, unknown>);
  };

  beforeAll(() => {
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sy-podws-')));
    fs.writeFileSync(path.join(tmp, 'tool.js'), '0');
    fs.writeFileSync(path.join(tmp, 'transfer.py'), '0');
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(tmp, 'ws-'));
    asked = [];
    walkAfterRuns = [];
    answer = walk;
    const pods = {
      snapshot: (
        sessionId: string,
        bounds: { maxEntries: number; maxScanEntries: number },
        timeoutMs: number,
        options: unknown,
      ) => {
        asked.push({ sessionId, bounds, timeoutMs, options });
        return answer(bounds);
      },
      walkAfterRuns: (bounds: unknown) => walkAfterRuns.push(bounds),
    } as unknown as SessionPods;
    const config = {
      kubernetes: {
        workspaceTool: path.join(tmp, 'tool.js'),
        workspaceTransfer: path.join(tmp, 'transfer.py'),
      },
      workspace: { maxFileBytes: 2 ** 20, maxWorkspaceBytes: 2 ** 30 },
    } as unknown as EngineConfig;
    workspaces = new PodWorkspaces(config, pods, {} as WorkspaceManager);
  });

  it('lists what a code action created, modified and deleted, in subdirectories too, with the host’s bounds', async () => {
    fs.mkdirSync(path.join(root, 'src', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(root, 'keep.txt'), 'same');
    fs.writeFileSync(path.join(root, 'edit.txt'), 'one');
    fs.writeFileSync(path.join(root, 'src', 'deep', 'gone.py'), 'x');
    const bounds = { maxEntries: 10_000, maxScanEntries: 100_000 };
    // The runner walks after every tier run with the same bounds (the "after" then usually needs no request).
    expect(walkAfterRuns).toEqual([bounds]);
    const before = await workspaces.snapshot('ses_1');
    expect(asked).toEqual([{ sessionId: 'ses_1', bounds, timeoutMs: 60_000, options: {} }]);
    expect([...before.entries.keys()]).toEqual(['edit.txt', 'keep.txt', 'src/deep/gone.py']);

    fs.appendFileSync(path.join(root, 'edit.txt'), 'two');
    fs.rmSync(path.join(root, 'src', 'deep', 'gone.py'));
    fs.mkdirSync(path.join(root, 'out', 'sub'), { recursive: true });
    fs.writeFileSync(path.join(root, 'out', 'sub', 'new.csv'), 'a,b');
    const after = await workspaces.snapshot('ses_1', { afterRun: true });
    expect(asked[1].options).toEqual({ afterRun: true });
    expect(workspaces.changedPaths(before, after)).toEqual([
      'edit.txt',
      'out/sub/new.csv',
      'src/deep/gone.py',
    ]);
    expect(workspaces.changedPaths(after, await workspaces.snapshot('ses_1'))).toEqual([]);
  });

  it('a workspace past the bound is a partial snapshot, which compares only what both cover', async () => {
    for (let i = 0; i < 12; i++) fs.writeFileSync(path.join(root, `f${String(i).padStart(2, '0')}`), 'x');
    answer = (bounds) => walk({ ...bounds, maxEntries: 10 });
    const before = await workspaces.snapshot('ses_1');
    expect(before.partial).toBe(true);
    expect(before.entries.size).toBe(10);
    fs.appendFileSync(path.join(root, 'f00'), 'y');
    fs.appendFileSync(path.join(root, 'f11'), 'y'); // beyond the bound: not seen
    expect(workspaces.changedPaths(before, await workspaces.snapshot('ses_1'))).toEqual(['f00']);
  });

  it('the tool’s refusals come back as its errors; an answer too large is the tool failing', async () => {
    answer = () =>
      Promise.resolve({
        ok: false,
        error: {
          name: 'NotFoundError',
          code: 'NOT_FOUND',
          message: 'workspace /workspace does not exist',
          details: {},
        },
      });
    await expect(workspaces.snapshot('ses_1')).rejects.toBeInstanceOf(NotFoundError);
    answer = () => Promise.resolve({ entries: [] });
    await expect(workspaces.snapshot('ses_1')).rejects.toMatchObject({ code: 'BAD_ANSWER' });
    await expect(workspaces.snapshot('ses_1')).rejects.toBeInstanceOf(WorkspaceToolError);
    answer = () => Promise.reject(new RunnerRefusedError('runner refused: over 4 MiB', 'snapshot_size'));
    await expect(workspaces.snapshot('ses_1')).rejects.toThrow(
      "the workspace tool failed in the session's pod: its answer was larger than expected",
    );
  });

  it('a lost runner or pod is its own error, as the code handler’s hint names it', async () => {
    const lost = new Error('the runner in the session’s pod stopped during the run (exit 137, OOMKilled)');
    answer = () => Promise.reject(lost);
    await expect(workspaces.snapshot('ses_1')).rejects.toBe(lost);
  });
});
