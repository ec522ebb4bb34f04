import type { CodeOutcome, RoutedCode, SandboxManager } from '@switchyard/sandbox';
import type { WorkspaceSnapshot } from '@switchyard/workspace';
import type { SessionNetwork } from '../../gates/egress/session-network';
import type { SessionTemplates } from '../../session/templates/session-templates';
import type { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import type { ActionContext, RunnableAction } from '../actions/action-handler.port';
import { CodeActionHandler } from './code-action.handler';

/** The code handler around a run: the workspace snapshots it takes, and what it answers when one fails. */
describe('CodeActionHandler', () => {
  const risk = { score: 0, level: 'low' as const, reasons: [] };
  const outOfMemory: CodeOutcome = {
    status: 'failed',
    tier: 'pooled',
    risk,
    run: { exitCode: 137, stdout: 'partial\n', stderr: '', truncated: { stdout: false, stderr: false } },
    error: { class: 'limit', code: 'OUT_OF_MEMORY', message: 'out of memory' },
    durationMs: 5,
  };
  const snap = (entries: [string, string][]): WorkspaceSnapshot => ({
    entries: new Map(entries),
    partial: false,
  });

  function handlerWith(snapshots: Array<WorkspaceSnapshot | Error>) {
    const workspaces = {
      snapshot: jest.fn(() => {
        const next = snapshots.shift();
        return next instanceof Error ? Promise.reject(next) : Promise.resolve(next!);
      }),
      changedPaths: (before: WorkspaceSnapshot, after: WorkspaceSnapshot) =>
        [...after.entries.keys()].filter((k) => before.entries.get(k) !== after.entries.get(k)),
    } as unknown as SessionWorkspaces;
    const routed = { tier: 'pooled', risk, request: {} } as unknown as RoutedCode;
    const sandbox = {
      prepare: () => routed,
      execute: jest.fn(() => Promise.resolve(outOfMemory)),
    } as unknown as SandboxManager;
    const network = { access: () => undefined, hints: () => undefined } as unknown as SessionNetwork;
    const templates = {
      routing: () => ({}),
      notReady: () => Promise.resolve(undefined),
    } as unknown as SessionTemplates;
    const handler = new CodeActionHandler(sandbox, workspaces, network, templates);
    const ctx = {
      session: { id: 'ses_1' },
      actionId: 'act_1',
      workspaceDir: '/w',
    } as unknown as ActionContext;
    const prepared = handler.prepare({ type: 'code', language: 'python', code: 'x' }, ctx) as RunnableAction;
    return { run: () => prepared.run(new AbortController().signal), sandbox };
  }

  it('lists the files a run changed from the snapshots before and after it', async () => {
    const { run } = handlerWith([
      snap([['a.txt', '1']]),
      snap([
        ['a.txt', '2'],
        ['b.txt', '1'],
      ]),
    ]);
    const outcome = await run();
    expect(outcome.files).toEqual([
      { path: 'a.txt', access: 'write' },
      { path: 'b.txt', access: 'write' },
    ]);
    expect(outcome.hints).toBeUndefined();
  });

  it("passes the sandbox's run output on as is", async () => {
    const { run } = handlerWith([snap([]), snap([])]);
    const outcome = await run();
    expect(outcome.run).toBe(outOfMemory.run);
  });

  it('keeps the outcome of a run after which the workspace cannot be read, saying its files are not listed', async () => {
    const { run, sandbox } = handlerWith([snap([]), new Error('the runner in the session’s pod stopped')]);
    const outcome = await run();
    expect(sandbox.execute).toHaveBeenCalledTimes(1);
    expect(outcome).toMatchObject({
      status: 'failed',
      tier: 'pooled',
      error: { class: 'limit', code: 'OUT_OF_MEMORY' },
      files: [],
    });
    expect(outcome.hints).toEqual([
      'the files this run changed are not listed: the workspace could not be read after it (the runner in the ' +
        'session’s pod stopped)',
    ]);
  });
});
