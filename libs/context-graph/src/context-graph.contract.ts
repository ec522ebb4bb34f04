import { InvalidInputError } from '@switchyard/common';
import {
  ActionAlreadyCompletedError,
  ActionNotRecordedError,
  ContextGraphClosedError,
  SessionNotRecordedError,
} from './context-graph.errors';
import {
  at,
  completion,
  edgeSet,
  expectRefused,
  listAll,
  session,
  start,
  uid,
} from './context-graph-records.contract';
import { describeActivityContract } from './context-graph-activity.contract';
import { describeApprovalContract } from './context-graph-approvals.contract';
import { describeCheckpointContract } from './context-graph-checkpoints.contract';
import { describeStatefulContract } from './context-graph-stateful.contract';
import type { ContextGraph } from './context-graph.port';
import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  GraphFilter,
  GraphView,
  PlanGraphRecord,
  SessionRecord,
} from './context-graph.types';

/** A fresh, empty store for one test. */
export interface ContextGraphFixture {
  /** Initialised and empty. */
  graph: ContextGraph;
  /** Opens and initialises another graph on the same store; the test has closed the previous one. */
  reopen(): Promise<ContextGraph>;
  /** Closes every graph the fixture opened and removes the store. */
  teardown(): Promise<void>;
}

/** How an adapter differs where the port allows it to. */
export interface ContextGraphContractOptions {
  /**
   * The store acknowledges a write once it is durable in an outbox, before checking it against the graph
   * (`PostgresOutboxGraph`): a write the graph refuses resolves, and is dropped when applied. Tests of refused
   * writes then expect the write to resolve, and still check that it recorded nothing.
   */
  deferredChecks?: boolean;
}

/**
 * Registers the behavioural suite every `ContextGraph` adapter must pass. Uses only the port, so a new
 * adapter proves itself by calling this with its own fixture.
 */
export function describeContextGraphContract(
  name: string,
  makeGraph: () => Promise<ContextGraphFixture>,
  options: ContextGraphContractOptions = {},
): void {
  const deferredChecks = options.deferredChecks ?? false;
  const refused = (
    attempt: Promise<unknown>,
    error: abstract new (...args: never[]) => Error,
    match?: Record<string, unknown>,
  ): Promise<void> => expectRefused(deferredChecks, attempt, error, match);

  describe(`ContextGraph contract: ${name}`, () => {
    let fixture: ContextGraphFixture;
    let graph: ContextGraph;

    beforeEach(async () => {
      fixture = await makeGraph();
      graph = fixture.graph;
    });
    afterEach(() => fixture.teardown());

    async function recorded(overrides: Partial<SessionRecord> = {}): Promise<SessionRecord> {
      const s = session(overrides);
      await graph.recordSession(s);
      return s;
    }

    async function started(sessionId: string, overrides: Partial<ActionStart> = {}): Promise<ActionStart> {
      const a = start(sessionId, overrides);
      await graph.recordActionStarted(a);
      return a;
    }

    describe('sessions', () => {
      it('records a session as the Session node of its graph', async () => {
        const s = await recorded();
        expect(await graph.sessionGraph(s.id)).toEqual({
          nodes: [
            {
              id: s.id,
              label: 'Session',
              properties: { createdAt: s.createdAt, tenant: 'acme', metadata: JSON.stringify(s.metadata) },
            },
          ],
          edges: [],
        });
      });

      it('returns an empty graph and an empty page for an unknown session', async () => {
        expect(await graph.sessionGraph('no-such-session')).toEqual({ nodes: [], edges: [] });
        expect(await graph.listActions('no-such-session', { limit: 10 })).toEqual({ items: [] });
      });

      it('endSession records when and why, and keeps every record', async () => {
        const s = await recorded();
        const a = await started(s.id);
        await graph.recordActionCompleted(a.id, completion(a, { files: [{ path: 'x', access: 'write' }] }));
        const before = await graph.sessionGraph(s.id);

        await graph.endSession(s.id, at(60), 'deleted');
        await graph.endSession(s.id, at(90), 'expired'); // the first end is the one kept

        const after = await graph.sessionGraph(s.id);
        expect(after.nodes[0].properties).toEqual({
          ...before.nodes[0].properties,
          endedAt: at(60),
          endReason: 'deleted',
        });
        expect(after.nodes.slice(1)).toEqual(before.nodes.slice(1));
        expect(after.edges).toEqual(before.edges);
        expect(await graph.getAction(s.id, a.id)).toMatchObject({ id: a.id, status: 'succeeded' });
        expect((await graph.listActions(s.id, { limit: 10 })).items).toHaveLength(1);
      });

      it('endSession rejects for a session never recorded', async () => {
        await refused(graph.endSession('no-such-session', at(1), 'deleted'), SessionNotRecordedError);
        expect(await graph.sessionGraph('no-such-session')).toEqual({ nodes: [], edges: [] });
      });
    });

    describe('actions', () => {
      it('recordActionStarted creates a running action with seq 1', async () => {
        const s = await recorded();
        const a = await started(s.id);
        const record = await graph.getAction(s.id, a.id);
        expect(record).toEqual({ ...a, seq: 1, status: 'running', files: [] });
        expect(record?.result).toBeUndefined();
        expect(record?.endedAt).toBeUndefined();
      });

      it('recordActionStarted rejects for a session never recorded', async () => {
        const a = start('no-such-session');
        await refused(graph.recordActionStarted(a), SessionNotRecordedError);
        expect(await graph.getAction('no-such-session', a.id)).toBeUndefined();
        expect(await graph.lastActionSeq('no-such-session')).toBe(0);
      });

      it('recordActionCompleted sets the final fields and keeps the result envelope', async () => {
        const s = await recorded();
        const a = await started(s.id);
        const c = completion(a, {
          status: 'failed',
          exitCode: 3,
          durationMs: 12.5,
          tier: 'container',
          risk: { score: 55, level: 'medium', reasons: ['network'] },
          error: { class: 'limit', message: 'out of memory', code: 'OUT_OF_MEMORY' },
          outputExcerpt: 'Traceback…',
          files: [{ path: 'out.txt', access: 'write' }],
        });
        await graph.recordActionCompleted(a.id, c);

        expect(await graph.getAction(s.id, a.id)).toEqual({
          ...a,
          seq: 1,
          status: 'failed',
          endedAt: c.endedAt,
          durationMs: 12.5,
          tier: 'container',
          risk: c.risk,
          exitCode: 3,
          error: c.error,
          outputExcerpt: 'Traceback…',
          files: [{ path: 'out.txt', access: 'write' }],
          result: c.result,
        });
      });

      it('exposes action fields as Action node properties', async () => {
        const s = await recorded();
        const running = await started(s.id, { type: 'file', operation: 'read', tier: 'engine' });
        const done = await started(s.id, { startedAt: at(3) });
        const c = completion(done, {
          status: 'timed_out',
          exitCode: undefined,
          risk: { score: 70, level: 'high', reasons: ['shell'] },
          error: { class: 'timeout', message: 'took longer than 5000 ms' },
        });
        await graph.recordActionCompleted(done.id, c);

        const [, runningNode, doneNode] = (await graph.sessionGraph(s.id)).nodes;
        expect(runningNode).toEqual({
          id: running.id,
          label: 'Action',
          properties: {
            type: 'file',
            operation: 'read',
            status: 'running',
            inputSummary: running.inputSummary,
            inputHash: running.inputHash,
            tier: 'engine',
            riskScore: 10,
            riskLevel: 'low',
            startedAt: running.startedAt,
            seq: 1,
          },
        });
        expect(doneNode).toEqual({
          id: done.id,
          label: 'Action',
          properties: {
            type: 'code',
            operation: 'python',
            status: 'timed_out',
            inputSummary: done.inputSummary,
            inputHash: done.inputHash,
            tier: 'subprocess',
            riskScore: 70,
            riskLevel: 'high',
            startedAt: done.startedAt,
            endedAt: c.endedAt,
            durationMs: c.durationMs,
            errorClass: 'timeout',
            errorMessage: 'took longer than 5000 ms',
            outputExcerpt: c.outputExcerpt,
            seq: 2,
          },
        });
      });

      it('recordActionWhole records a started and completed action at once, as the two calls would', async () => {
        const s = await recorded();
        const a = start(s.id);
        const c = completion(a, { status: 'succeeded', durationMs: 4, outputExcerpt: 'GET / on port 8000' });
        await graph.recordActionWhole(a, c);
        expect(await graph.getAction(s.id, a.id)).toEqual({
          ...a,
          seq: 1,
          status: 'succeeded',
          endedAt: c.endedAt,
          durationMs: 4,
          tier: c.tier,
          risk: c.risk,
          exitCode: 0,
          outputExcerpt: 'GET / on port 8000',
          files: [],
          result: c.result,
        });
        expect(await graph.lastActionSeq(s.id)).toBe(1);
        await refused(graph.recordActionWhole(start('no-such-session'), c), SessionNotRecordedError);
      });

      it('recordActionCompleted rejects with ActionNotRecordedError for an unknown action', async () => {
        const s = await recorded();
        const ghost = start(s.id);
        await refused(graph.recordActionCompleted(ghost.id, completion(ghost)), ActionNotRecordedError);
        expect(await graph.getAction(s.id, ghost.id)).toBeUndefined();
        expect((await graph.sessionGraph(s.id)).nodes.map((n) => n.label)).toEqual(['Session']);
      });

      it('a second completion rejects and leaves the first intact', async () => {
        const s = await recorded();
        const a = await started(s.id);
        await graph.recordActionCompleted(a.id, completion(a));
        const second = completion(a, { status: 'error', files: [{ path: 'late', access: 'write' }] });

        await refused(graph.recordActionCompleted(a.id, second), ActionAlreadyCompletedError);
        expect(await graph.getAction(s.id, a.id)).toMatchObject({ status: 'succeeded', files: [] });
        expect((await graph.sessionGraph(s.id)).nodes.map((n) => n.label)).toEqual(['Session', 'Action']);
      });

      it('getAction returns undefined for unknown ids and for another session’s action', async () => {
        const s1 = await recorded();
        const s2 = await recorded();
        const a = await started(s1.id);
        expect(await graph.getAction(s1.id, 'no-such-action')).toBeUndefined();
        expect(await graph.getAction(s2.id, a.id)).toBeUndefined();
        expect(await graph.getAction('no-such-session', a.id)).toBeUndefined();
      });
    });

    describe('graph', () => {
      it('numbers actions per session and links them with HAS_ACTION and NEXT', async () => {
        const s = await recorded();
        const other = await recorded();
        const a1 = await started(s.id);
        await started(other.id); // other sessions do not take seqs from this one
        const a2 = await started(s.id);
        const a3 = await started(s.id);

        const view = await graph.sessionGraph(s.id);
        expect(view.nodes.map((n) => [n.id, n.label, n.properties.seq])).toEqual([
          [s.id, 'Session', undefined],
          [a1.id, 'Action', 1],
          [a2.id, 'Action', 2],
          [a3.id, 'Action', 3],
        ]);
        expect(edgeSet(view)).toEqual(
          [
            `HAS_ACTION ${s.id} -> ${a1.id}`,
            `HAS_ACTION ${s.id} -> ${a2.id}`,
            `HAS_ACTION ${s.id} -> ${a3.id}`,
            `NEXT ${a1.id} -> ${a2.id}`,
            `NEXT ${a2.id} -> ${a3.id}`,
          ].sort(),
        );
        expect(view.edges.every((e) => typeof e.properties === 'object')).toBe(true);
        expect(await graph.sessionGraph(s.id)).toEqual(view); // deterministic
      });

      it('links files with READ/WROTE and keeps one File node per session and path', async () => {
        const s = await recorded();
        const other = await recorded();
        const a1 = await started(s.id);
        const a2 = await started(s.id);
        const b1 = await started(other.id);
        await graph.recordActionCompleted(
          a1.id,
          completion(a1, {
            files: [
              { path: 'src/b.ts', access: 'write' },
              { path: 'a.txt', access: 'read' },
              { path: 'a.txt', access: 'read' },
            ],
          }),
        );
        await graph.recordActionCompleted(
          a2.id,
          completion(a2, {
            files: [
              { path: 'src/b.ts', access: 'write' },
              { path: 'src/b.ts', access: 'read' },
            ],
          }),
        );
        await graph.recordActionCompleted(
          b1.id,
          completion(b1, { files: [{ path: 'a.txt', access: 'write' }] }),
        );

        const view = await graph.sessionGraph(s.id);
        expect(view.nodes.filter((n) => n.label === 'File')).toEqual([
          { id: `file:${s.id}:a.txt`, label: 'File', properties: { path: 'a.txt' } },
          { id: `file:${s.id}:src/b.ts`, label: 'File', properties: { path: 'src/b.ts' } },
        ]);
        expect(edgeSet(view).filter((e) => /^(READ|WROTE) /.test(e))).toEqual(
          [
            `READ ${a1.id} -> file:${s.id}:a.txt`,
            `WROTE ${a1.id} -> file:${s.id}:src/b.ts`,
            `READ ${a2.id} -> file:${s.id}:src/b.ts`,
            `WROTE ${a2.id} -> file:${s.id}:src/b.ts`,
          ].sort(),
        );
        expect((await graph.getAction(s.id, a1.id))?.files).toEqual([
          { path: 'a.txt', access: 'read' },
          { path: 'src/b.ts', access: 'write' },
        ]);
        expect((await graph.getAction(s.id, a2.id))?.files).toEqual([
          { path: 'src/b.ts', access: 'read' },
          { path: 'src/b.ts', access: 'write' },
        ]);
        const otherFiles = (await graph.sessionGraph(other.id)).nodes.filter((n) => n.label === 'File');
        expect(otherFiles.map((n) => n.id)).toEqual([`file:${other.id}:a.txt`]);
      });

      it('links a retry to its original with RETRY_OF', async () => {
        const s = await recorded();
        const original = await started(s.id);
        await graph.recordActionCompleted(
          original.id,
          completion(original, { status: 'failed', exitCode: 1 }),
        );
        const retry = await started(s.id, { retryOf: original.id });

        expect((await graph.getAction(s.id, retry.id))?.retryOf).toBe(original.id);
        expect((await graph.getAction(s.id, original.id))?.retryOf).toBeUndefined();
        expect(edgeSet(await graph.sessionGraph(s.id)).filter((e) => e.startsWith('RETRY_OF'))).toEqual([
          `RETRY_OF ${retry.id} -> ${original.id}`,
        ]);
      });

      it('keeps why an action was retried as the reason of its RETRY_OF edge', async () => {
        const s = await recorded();
        const original = await started(s.id);
        const reasoned = await started(s.id, {
          retryOf: original.id,
          retryReason: 'the file does not exist',
        });
        const plain = await started(s.id, { retryOf: original.id });

        const retryEdges = (await graph.sessionGraph(s.id)).edges.filter((e) => e.type === 'RETRY_OF');
        expect(retryEdges).toEqual([
          {
            from: reasoned.id,
            to: original.id,
            type: 'RETRY_OF',
            properties: { reason: 'the file does not exist' },
          },
          { from: plain.id, to: original.id, type: 'RETRY_OF', properties: {} },
        ]);
        expect(await graph.getAction(s.id, reasoned.id)).toMatchObject({
          retryReason: 'the file does not exist',
        });
        expect((await graph.getAction(s.id, plain.id))?.retryReason).toBeUndefined();
        const chain = (await graph.failureContext(s.id, original.id, { before: 0 }))?.retryChain;
        expect(chain?.map((e) => [e.id, e.retryReason])).toEqual([
          [original.id, undefined],
          [reasoned.id, 'the file does not exist'],
          [plain.id, undefined],
        ]);
      });

      it('links actions to the container they ran in with RAN_IN, one Sandbox node per container', async () => {
        const s = await recorded();
        const pooled = { tier: 'pooled' as const, containerId: 'c'.repeat(64) };
        const a1 = await started(s.id, { tier: 'pooled' });
        await graph.recordActionCompleted(a1.id, completion(a1, { sandbox: pooled }));
        const a2 = await started(s.id, { tier: 'pooled' });
        await graph.recordActionCompleted(a2.id, completion(a2, { sandbox: pooled }));
        const a3 = await started(s.id, { tier: 'container' });
        const oneOff = { tier: 'container' as const, containerId: 'd'.repeat(64) };
        await graph.recordActionCompleted(a3.id, completion(a3, { sandbox: oneOff }));
        const a4 = await started(s.id);
        await graph.recordActionCompleted(a4.id, completion(a4));

        const view = await graph.sessionGraph(s.id);
        expect(view.nodes.filter((n) => n.label === 'Sandbox')).toEqual(
          expect.arrayContaining([
            { id: `sandbox:${pooled.containerId}`, label: 'Sandbox', properties: pooled },
            { id: `sandbox:${oneOff.containerId}`, label: 'Sandbox', properties: oneOff },
          ]),
        );
        expect(view.nodes.filter((n) => n.label === 'Sandbox')).toHaveLength(2);
        expect(edgeSet(view).filter((e) => e.startsWith('RAN_IN'))).toEqual(
          [
            `RAN_IN ${a1.id} -> sandbox:${pooled.containerId}`,
            `RAN_IN ${a2.id} -> sandbox:${pooled.containerId}`,
            `RAN_IN ${a3.id} -> sandbox:${oneOff.containerId}`,
          ].sort(),
        );
        expect((await graph.getAction(s.id, a2.id))?.sandbox).toEqual(pooled);
        expect((await graph.getAction(s.id, a4.id))?.sandbox).toBeUndefined();
      });

      it("keeps a sandbox's Docker runtime as a property of its Sandbox node; none when the tier named none", async () => {
        const s = await recorded();
        const gvisor = { tier: 'container' as const, containerId: 'e'.repeat(64), runtime: 'runsc' };
        const host = { tier: 'container' as const, containerId: 'f'.repeat(64), runtime: 'runc' };
        const pooled = { tier: 'pooled' as const, containerId: '0'.repeat(64) };
        const ids: string[] = [];
        for (const sandbox of [gvisor, host, pooled]) {
          const a = await started(s.id, { tier: sandbox.tier });
          await graph.recordActionCompleted(a.id, completion(a, { sandbox }));
          ids.push(a.id);
        }

        const sandboxes = (await graph.sessionGraph(s.id)).nodes.filter((n) => n.label === 'Sandbox');
        expect(sandboxes).toHaveLength(3);
        expect(sandboxes).toEqual(
          expect.arrayContaining([
            { id: `sandbox:${gvisor.containerId}`, label: 'Sandbox', properties: gvisor },
            { id: `sandbox:${host.containerId}`, label: 'Sandbox', properties: host },
            { id: `sandbox:${pooled.containerId}`, label: 'Sandbox', properties: pooled },
          ]),
        );
        expect((await graph.getAction(s.id, ids[0]))?.sandbox).toEqual(gvisor);
        expect((await graph.getAction(s.id, ids[1]))?.sandbox).toEqual(host);
        expect((await graph.getAction(s.id, ids[2]))?.sandbox).toEqual(pooled);
        expect((await graph.failureContext(s.id, ids[0], { before: 0 }))?.action.sandbox).toEqual(gvisor);
      });

      it('rejects a retry of an action the session never recorded', async () => {
        const s = await recorded();
        await refused(
          graph.recordActionStarted(start(s.id, { retryOf: 'no-such-action' })),
          ActionNotRecordedError,
        );
        expect(await graph.lastActionSeq(s.id)).toBe(0);
      });
    });

    describe('listActions', () => {
      it('walks every action exactly once, oldest first, respecting the limit', async () => {
        const s = await recorded();
        const other = await recorded();
        const ids: string[] = [];
        for (let i = 0; i < 7; i++) ids.push((await started(s.id, { startedAt: at(i) })).id);
        await started(other.id);

        const sizes: number[] = [];
        const seen: ActionRecord[] = [];
        let cursor: string | undefined;
        do {
          const page = await graph.listActions(s.id, { limit: 3, cursor });
          sizes.push(page.items.length);
          seen.push(...page.items);
          cursor = page.nextCursor;
        } while (cursor !== undefined);

        expect(sizes).toEqual([3, 3, 1]);
        expect(seen.map((a) => a.id)).toEqual(ids);
        expect(seen.map((a) => a.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
        expect(await graph.listActions(s.id, { limit: 7 })).toEqual({ items: seen }); // no empty last page
        expect((await graph.listActions(s.id, { limit: 100 })).items).toHaveLength(7);
        const first = await graph.listActions(s.id, { limit: 1 });
        expect(first.items.map((a) => a.seq)).toEqual([1]);
        expect(first.nextCursor).toBe('1'); // the seq of the page's last action, in decimal
      });

      it('reads a cursor as "after this seq": 0 is the start, a seq past the last action an empty page', async () => {
        const s = await recorded();
        for (let i = 0; i < 4; i++) await started(s.id, { startedAt: at(i) });

        const page = await graph.listActions(s.id, { limit: 2, cursor: '0' });
        expect(page.items.map((a) => a.seq)).toEqual([1, 2]);
        expect(page.nextCursor).toBe('2');
        const rest = await graph.listActions(s.id, { limit: 2, cursor: '2' });
        expect(rest).toEqual({
          items: [expect.objectContaining({ seq: 3 }), expect.objectContaining({ seq: 4 })],
        });
        const last = await graph.listActions(s.id, { limit: 10, cursor: '3' });
        expect(last.items.map((a) => a.seq)).toEqual([4]);
        expect(await graph.listActions(s.id, { limit: 10, cursor: '4' })).toEqual({ items: [] });
        expect(await graph.listActions(s.id, { limit: 10, cursor: '999999999999999' })).toEqual({
          items: [],
        });
      });

      it.each([
        '',
        'abc',
        'not a cursor!',
        '-1',
        '+1',
        '01',
        '00',
        '1.5',
        '1e3',
        ' 1',
        '1 ',
        '1\n',
        '0x10',
        '1000000000000000', // 16 digits
        '１', // a full-width digit
        Buffer.from('seq:1').toString('base64url'), // the former cursor
        Buffer.from('{"seq":1}').toString('base64url'),
      ])('rejects the cursor %j with InvalidInputError on field "cursor"', async (cursor) => {
        const s = await recorded();
        await started(s.id);
        const attempt = graph.listActions(s.id, { limit: 10, cursor });
        await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
        await expect(attempt).rejects.toMatchObject({ field: 'cursor', code: 'INVALID_CURSOR' });
      });
      it('rejects a limit below 1 with InvalidInputError on field "limit"', async () => {
        const s = await recorded();
        await expect(graph.listActions(s.id, { limit: 0 })).rejects.toMatchObject({ field: 'limit' });
      });
    });

    describe('queries', () => {
      /**
       * a1 write src/app.py · a2 code writes src/app.py + out.txt, fails · a3 read src/app.py ·
       * a4 retry of a2 reads src/app.py, writes out.txt, fails · a5 retry of a4 writes out.txt ·
       * a6 retry of a2 (a sibling of a4), still running.
       */
      async function history() {
        const s = await recorded();
        const other = await recorded();
        const done = async (
          a: ActionStart,
          c: Partial<ActionCompletion> & { files: ActionCompletion['files'] },
        ): Promise<ActionStart> => {
          await graph.recordActionCompleted(
            a.id,
            completion(a, { endedAt: at(Number(a.startedAt.slice(17, 19)) + 0.5), ...c }),
          );
          return a;
        };
        const a1 = await done(
          await started(s.id, {
            type: 'file',
            operation: 'write',
            tier: 'engine',
            startedAt: at(1),
            inputSummary: 'write src/app.py',
          }),
          { files: [{ path: 'src/app.py', access: 'write' }], exitCode: undefined, outputExcerpt: '' },
        );
        const a2 = await done(await started(s.id, { startedAt: at(2), inputSummary: 'python build' }), {
          status: 'failed',
          exitCode: 1,
          outputExcerpt: 'Traceback',
          files: [
            { path: 'out.txt', access: 'write' },
            { path: 'src/app.py', access: 'write' },
          ],
        });
        const a3 = await done(
          await started(s.id, { type: 'file', operation: 'read', tier: 'engine', startedAt: at(3) }),
          { files: [{ path: 'src/app.py', access: 'read' }], exitCode: undefined },
        );
        const a4 = await done(await started(s.id, { startedAt: at(4), retryOf: a2.id }), {
          status: 'failed',
          exitCode: 2,
          error: { class: 'limit', message: 'out of memory', code: 'OUT_OF_MEMORY' },
          files: [
            { path: 'src/app.py', access: 'read' },
            { path: 'out.txt', access: 'write' },
          ],
        });
        const a5 = await done(await started(s.id, { startedAt: at(5), retryOf: a4.id }), {
          files: [
            { path: 'out.txt', access: 'write' },
            { path: 'out.txt', access: 'read' },
          ],
        });
        const a6 = await started(s.id, {
          startedAt: at(6),
          retryOf: a2.id,
          type: 'browser',
          operation: 'navigate',
          tier: 'browser',
        });
        // Same path in another session: a different File node, never part of s's answers.
        const b1 = await done(await started(other.id, { startedAt: at(2) }), {
          files: [{ path: 'src/app.py', access: 'write' }],
        });
        return { s, other, a1, a2, a3, a4, a5, a6, b1 };
      }

      const ids = (view: GraphView, label: string): string[] =>
        view.nodes.filter((n) => n.label === label).map((n) => n.id);

      it('sessionGraph without a filter (or with an empty one) is the whole session', async () => {
        const h = await history();
        const whole = await graph.sessionGraph(h.s.id);
        expect(ids(whole, 'Action')).toEqual([h.a1, h.a2, h.a3, h.a4, h.a5, h.a6].map((a) => a.id));
        expect(await graph.sessionGraph(h.s.id, {})).toEqual(whole);
        expect(await graph.sessionGraph('no-such-session', { types: ['code'] })).toEqual({
          nodes: [],
          edges: [],
        });
      });

      it('sessionGraph filters by types and status; edges only between included nodes', async () => {
        const h = await history();
        const code = await graph.sessionGraph(h.s.id, { types: ['code'] });
        expect(ids(code, 'Session')).toEqual([h.s.id]);
        expect(ids(code, 'Action')).toEqual([h.a2.id, h.a4.id, h.a5.id]);
        expect(ids(code, 'File')).toEqual([`file:${h.s.id}:out.txt`, `file:${h.s.id}:src/app.py`]);
        expect(edgeSet(code)).toEqual(
          [
            `HAS_ACTION ${h.s.id} -> ${h.a2.id}`,
            `HAS_ACTION ${h.s.id} -> ${h.a4.id}`,
            `HAS_ACTION ${h.s.id} -> ${h.a5.id}`,
            `NEXT ${h.a4.id} -> ${h.a5.id}`,
            `WROTE ${h.a2.id} -> file:${h.s.id}:out.txt`,
            `WROTE ${h.a2.id} -> file:${h.s.id}:src/app.py`,
            `READ ${h.a4.id} -> file:${h.s.id}:src/app.py`,
            `WROTE ${h.a4.id} -> file:${h.s.id}:out.txt`,
            `READ ${h.a5.id} -> file:${h.s.id}:out.txt`,
            `WROTE ${h.a5.id} -> file:${h.s.id}:out.txt`,
            `RETRY_OF ${h.a4.id} -> ${h.a2.id}`,
            `RETRY_OF ${h.a5.id} -> ${h.a4.id}`,
          ].sort(),
        );
        const failedOrRunning = await graph.sessionGraph(h.s.id, { status: ['failed', 'running'] });
        expect(ids(failedOrRunning, 'Action')).toEqual([h.a2.id, h.a4.id, h.a6.id]);
        // a6 retries a2, both included; a4 → a2 too. No NEXT: none of them are consecutive.
        expect(edgeSet(failedOrRunning).filter((e) => /^(NEXT|RETRY_OF) /.test(e))).toEqual(
          [`RETRY_OF ${h.a4.id} -> ${h.a2.id}`, `RETRY_OF ${h.a6.id} -> ${h.a2.id}`].sort(),
        );
        const both = await graph.sessionGraph(h.s.id, { types: ['file', 'browser'], status: ['succeeded'] });
        expect(ids(both, 'Action')).toEqual([h.a1.id, h.a3.id]);
      });

      it('sessionGraph keeps actions started since an instant, and the latest `limit`', async () => {
        const h = await history();
        const since = await graph.sessionGraph(h.s.id, { since: at(4) });
        expect(ids(since, 'Action')).toEqual([h.a4.id, h.a5.id, h.a6.id]);
        // The same instant written with an offset is the same filter.
        const offset = new Date(Date.parse(at(4)))
          .toISOString()
          .replace('T00:', 'T01:')
          .replace('Z', '+01:00');
        expect(await graph.sessionGraph(h.s.id, { since: offset })).toEqual(since);
        const latest = await graph.sessionGraph(h.s.id, { limit: 2 });
        expect(ids(latest, 'Action')).toEqual([h.a5.id, h.a6.id]);
        expect(edgeSet(latest).filter((e) => /^(NEXT|RETRY_OF) /.test(e))).toEqual([
          `NEXT ${h.a5.id} -> ${h.a6.id}`,
        ]);
        expect(ids(latest, 'File')).toEqual([`file:${h.s.id}:out.txt`]);
        const combined = await graph.sessionGraph(h.s.id, { types: ['code'], since: at(2), limit: 2 });
        expect(ids(combined, 'Action')).toEqual([h.a4.id, h.a5.id]);
        expect(ids(await graph.sessionGraph(h.s.id, { since: at(7) }), 'Action')).toEqual([]);
      });

      it.each([
        ['since', { since: 'yesterday' }],
        ['since', { since: '2025-13-45T00:00:00Z' }],
        ['types', { types: ['shell'] }],
        ['types', { types: [] }],
        ['status', { status: ['done'] }],
        ['limit', { limit: 0 }],
        ['limit', { limit: 1.5 }],
      ] as const)(
        'sessionGraph rejects a bad %s (%j) with InvalidInputError on that field',
        async (field, filter) => {
          const h = await history();
          const attempt = graph.sessionGraph(h.s.id, filter as GraphFilter);
          await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
          await expect(attempt).rejects.toMatchObject({ field });
        },
      );

      it('failureContext: the action, its retry chain, the actions before it, its files and their last writers', async () => {
        const h = await history();
        const ctx = await graph.failureContext(h.s.id, h.a4.id, { before: 2 });
        const a2 = await graph.getAction(h.s.id, h.a2.id);
        expect(ctx?.action).toEqual(await graph.getAction(h.s.id, h.a4.id));
        expect(ctx?.action).toMatchObject({
          input: h.a4.input,
          outputExcerpt: '1\n',
          error: { class: 'limit', message: 'out of memory', code: 'OUT_OF_MEMORY' },
        });
        // The sibling retry a6 is neither an ancestor nor a descendant of a4.
        expect(ctx?.retryChain.map((e) => [e.id, e.relation, e.status])).toEqual([
          [h.a2.id, 'ancestor', 'failed'],
          [h.a4.id, 'self', 'failed'],
          [h.a5.id, 'descendant', 'succeeded'],
        ]);
        expect(ctx?.before.map((a) => a.id)).toEqual([h.a2.id, h.a3.id]);
        const a2Summary = {
          id: h.a2.id,
          seq: 2,
          type: 'code',
          operation: 'python',
          status: 'failed',
          inputSummary: 'python build',
          inputHash: h.a2.inputHash,
          startedAt: at(2),
          endedAt: a2?.endedAt,
          durationMs: 1000,
          tier: 'subprocess',
          exitCode: 1,
        };
        expect(ctx?.before[0]).toStrictEqual(a2Summary);
        expect(ctx?.files).toStrictEqual([
          { path: 'out.txt', access: ['write'], lastWrittenBy: a2Summary },
          { path: 'src/app.py', access: ['read'], lastWrittenBy: a2Summary },
        ]);
        expect(ctx?.planStep).toBeNull();
        expect(ctx?.kernel).toBeNull();
        expect(ctx?.checkpoint).toBeNull();
        expect(ctx?.retryChain[1]).toStrictEqual({
          ...a2Summary,
          id: h.a4.id,
          seq: 4,
          inputSummary: h.a4.inputSummary,
          inputHash: h.a4.inputHash,
          startedAt: at(4),
          endedAt: ctx?.action.endedAt,
          exitCode: 2,
          error: { class: 'limit', message: 'out of memory', code: 'OUT_OF_MEMORY' },
          retryOf: h.a2.id,
          relation: 'self',
        });
      });

      it('failureContext follows retries transitively both ways and handles the session’s edges', async () => {
        const h = await history();
        const root = await graph.failureContext(h.s.id, h.a2.id, { before: 10 });
        expect(root?.retryChain.map((e) => [e.id, e.relation])).toEqual([
          [h.a2.id, 'self'],
          [h.a4.id, 'descendant'],
          [h.a5.id, 'descendant'],
          [h.a6.id, 'descendant'],
        ]);
        expect(root?.before.map((a) => a.id)).toEqual([h.a1.id]);
        // a1 wrote src/app.py before a2; nothing wrote out.txt before a2.
        expect(root?.files.map((f) => [f.path, f.access, f.lastWrittenBy?.id])).toEqual([
          ['out.txt', ['write'], undefined],
          ['src/app.py', ['write'], h.a1.id],
        ]);
        const leaf = await graph.failureContext(h.s.id, h.a5.id, { before: 0 });
        expect(leaf?.retryChain.map((e) => [e.id, e.relation])).toEqual([
          [h.a2.id, 'ancestor'],
          [h.a4.id, 'ancestor'],
          [h.a5.id, 'self'],
        ]);
        expect(leaf?.before).toEqual([]);
        expect(leaf?.files).toEqual([
          {
            path: 'out.txt',
            access: ['read', 'write'],
            lastWrittenBy: expect.objectContaining({ id: h.a4.id }) as unknown,
          },
        ]);
        const running = await graph.failureContext(h.s.id, h.a6.id, { before: 100 });
        expect(running?.action).toMatchObject({ status: 'running', files: [] });
        expect(running?.before.map((a) => a.seq)).toEqual([1, 2, 3, 4, 5]);
        expect(running?.files).toEqual([]);
      });

      it('failureContext is undefined for an unknown action or another session’s, and checks `before`', async () => {
        const h = await history();
        expect(await graph.failureContext(h.s.id, 'no-such-action', { before: 5 })).toBeUndefined();
        expect(await graph.failureContext(h.s.id, h.b1.id, { before: 5 })).toBeUndefined();
        expect(await graph.failureContext('no-such-session', h.a1.id, { before: 5 })).toBeUndefined();
        for (const before of [-1, 101, 1.5]) {
          const attempt = graph.failureContext(h.s.id, h.a1.id, { before });
          await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
          await expect(attempt).rejects.toMatchObject({ field: 'before' });
        }
      });

      it('fileLineage lists who wrote and read a file, in order, within the session', async () => {
        const h = await history();
        const lineage = await graph.fileLineage(h.s.id, 'src/app.py');
        expect(lineage.path).toBe('src/app.py');
        expect(lineage.entries.map((e) => [e.id, e.seq, e.access, e.status])).toEqual([
          [h.a1.id, 1, ['write'], 'succeeded'],
          [h.a2.id, 2, ['write'], 'failed'],
          [h.a3.id, 3, ['read'], 'succeeded'],
          [h.a4.id, 4, ['read'], 'failed'],
        ]);
        const ctx = await graph.failureContext(h.s.id, h.a4.id, { before: 2 });
        expect(lineage.entries[1]).toStrictEqual({ ...ctx?.before[0], sessionId: h.s.id, access: ['write'] });
        expect(lineage.entries.every((e) => e.sessionId === h.s.id)).toBe(true);
        expect((await graph.fileLineage(h.s.id, 'out.txt')).entries.map((e) => [e.id, e.access])).toEqual([
          [h.a2.id, ['write']],
          [h.a4.id, ['write']],
          [h.a5.id, ['read', 'write']],
        ]);
        expect(await graph.fileLineage(h.s.id, 'never/touched')).toEqual({
          path: 'never/touched',
          entries: [],
        });
        expect((await graph.fileLineage(h.other.id, 'src/app.py')).entries.map((e) => e.id)).toEqual([
          h.b1.id,
        ]);
        expect(await graph.fileLineage('no-such-session', 'src/app.py')).toEqual({
          path: 'src/app.py',
          entries: [],
        });
      });

      it('health reports a usable store with nothing waiting', async () => {
        expect(await graph.health()).toMatchObject({ status: 'ok', backlog: 0 });
      });
    });

    describe('plans', () => {
      const stepId = (planId: string, id: string, version: number): string =>
        `step:${planId}:${id}:${version}`;

      /** fetch → compute (fails once: a1), report after compute; then a replan replaces compute (a2). */
      async function planned() {
        const s = await recorded();
        const a1 = await started(s.id, { startedAt: at(1) });
        await graph.recordActionCompleted(a1.id, completion(a1, { status: 'failed', exitCode: 1 }));
        const a0 = await started(s.id, { startedAt: at(2), type: 'file', operation: 'read', tier: 'engine' });
        const plan: PlanGraphRecord = {
          id: uid('plan'),
          sessionId: s.id,
          goal: 'build',
          status: 'needs_replan',
          maxParallel: 2,
          createdAt: at(0),
          steps: [
            {
              stepId: 'fetch',
              version: 1,
              status: 'succeeded',
              allowFailure: false,
              dependsOn: [],
              attempts: [a0.id],
            },
            {
              stepId: 'compute',
              version: 1,
              status: 'failed',
              allowFailure: false,
              dependsOn: ['fetch'],
              attempts: [a1.id],
            },
            {
              stepId: 'report',
              version: 1,
              status: 'skipped',
              allowFailure: true,
              dependsOn: ['compute'],
              attempts: [],
            },
          ],
        };
        return { s, a0, a1, plan };
      }

      it('recordPlan records Plan and Step nodes with HAS_PLAN, HAS_STEP, DEPENDS_ON and ATTEMPT; twice is once', async () => {
        const { s, a0, a1, plan } = await planned();
        await graph.recordPlan(plan);
        const once = await graph.sessionGraph(s.id);
        await graph.recordPlan(plan);
        expect(await graph.sessionGraph(s.id)).toEqual(once);
        const planNodes = once.nodes.filter((n) => n.label === 'Plan' || n.label === 'Step');
        expect(planNodes).toEqual([
          {
            id: plan.id,
            label: 'Plan',
            properties: { goal: 'build', status: 'needs_replan', createdAt: at(0), maxParallel: 2 },
          },
          {
            id: stepId(plan.id, 'compute', 1),
            label: 'Step',
            properties: { stepId: 'compute', version: 1, status: 'failed', allowFailure: false },
          },
          {
            id: stepId(plan.id, 'fetch', 1),
            label: 'Step',
            properties: { stepId: 'fetch', version: 1, status: 'succeeded', allowFailure: false },
          },
          {
            id: stepId(plan.id, 'report', 1),
            label: 'Step',
            properties: { stepId: 'report', version: 1, status: 'skipped', allowFailure: true },
          },
        ]);
        expect(once.edges.filter((e) => !['HAS_ACTION', 'NEXT'].includes(e.type))).toEqual([
          { from: s.id, to: plan.id, type: 'HAS_PLAN', properties: {} },
          { from: plan.id, to: stepId(plan.id, 'compute', 1), type: 'HAS_STEP', properties: {} },
          { from: plan.id, to: stepId(plan.id, 'fetch', 1), type: 'HAS_STEP', properties: {} },
          { from: plan.id, to: stepId(plan.id, 'report', 1), type: 'HAS_STEP', properties: {} },
          {
            from: stepId(plan.id, 'compute', 1),
            to: stepId(plan.id, 'fetch', 1),
            type: 'DEPENDS_ON',
            properties: {},
          },
          {
            from: stepId(plan.id, 'report', 1),
            to: stepId(plan.id, 'compute', 1),
            type: 'DEPENDS_ON',
            properties: {},
          },
          { from: stepId(plan.id, 'compute', 1), to: a1.id, type: 'ATTEMPT', properties: {} },
          { from: stepId(plan.id, 'fetch', 1), to: a0.id, type: 'ATTEMPT', properties: {} },
        ]);
      });

      it('a replan adds a version that REPLACES the old one; dependents point at the latest version', async () => {
        const { s, a1, plan } = await planned();
        await graph.recordPlan(plan);
        const a2 = await started(s.id, { startedAt: at(3), retryOf: a1.id });
        await graph.recordActionCompleted(a2.id, completion(a2));
        const replanned: PlanGraphRecord = {
          ...plan,
          status: 'succeeded',
          endedAt: at(9),
          steps: [
            ...plan.steps.filter((st) => st.stepId !== 'report'),
            {
              stepId: 'compute',
              version: 2,
              status: 'succeeded',
              allowFailure: false,
              dependsOn: ['fetch'],
              attempts: [a2.id],
              replaces: 1,
            },
            { ...plan.steps[2], status: 'succeeded' },
          ],
        };
        await graph.recordPlan(replanned);
        await graph.recordPlan(replanned);
        const view = await graph.sessionGraph(s.id);
        expect(view.nodes.find((n) => n.id === plan.id)?.properties).toEqual({
          goal: 'build',
          status: 'succeeded',
          createdAt: at(0),
          endedAt: at(9),
          maxParallel: 2,
        });
        expect(view.nodes.filter((n) => n.label === 'Step').map((n) => n.id)).toEqual([
          stepId(plan.id, 'compute', 1),
          stepId(plan.id, 'compute', 2),
          stepId(plan.id, 'fetch', 1),
          stepId(plan.id, 'report', 1),
        ]);
        const planEdges = edgeSet(view).filter((e) => /^(HAS_STEP|DEPENDS_ON|ATTEMPT|REPLACES) /.test(e));
        expect(planEdges).toEqual(
          [
            `HAS_STEP ${plan.id} -> ${stepId(plan.id, 'compute', 1)}`,
            `HAS_STEP ${plan.id} -> ${stepId(plan.id, 'compute', 2)}`,
            `HAS_STEP ${plan.id} -> ${stepId(plan.id, 'fetch', 1)}`,
            `HAS_STEP ${plan.id} -> ${stepId(plan.id, 'report', 1)}`,
            `DEPENDS_ON ${stepId(plan.id, 'compute', 1)} -> ${stepId(plan.id, 'fetch', 1)}`,
            `DEPENDS_ON ${stepId(plan.id, 'compute', 2)} -> ${stepId(plan.id, 'fetch', 1)}`,
            `DEPENDS_ON ${stepId(plan.id, 'report', 1)} -> ${stepId(plan.id, 'compute', 2)}`,
            `ATTEMPT ${stepId(plan.id, 'compute', 1)} -> ${a1.id}`,
            `ATTEMPT ${stepId(plan.id, 'compute', 2)} -> ${a2.id}`,
            `ATTEMPT ${stepId(plan.id, 'fetch', 1)} -> ${plan.steps[0].attempts[0]}`,
            `REPLACES ${stepId(plan.id, 'compute', 2)} -> ${stepId(plan.id, 'compute', 1)}`,
          ].sort(),
        );
        expect(view.edges.filter((e) => e.type === 'HAS_PLAN')).toHaveLength(1);
      });

      it('ATTEMPT reaches only existing actions of the same session; a filter keeps plans, drops ATTEMPTs to hidden actions', async () => {
        const { s, a0, a1, plan } = await planned();
        const other = await recorded();
        const foreign = await started(other.id);
        plan.steps[2].attempts = ['no-such-action', foreign.id];
        await graph.recordPlan(plan);
        const view = await graph.sessionGraph(s.id);
        expect(view.edges.filter((e) => e.type === 'ATTEMPT').map((e) => e.to)).toEqual([a1.id, a0.id]);
        const code = await graph.sessionGraph(s.id, { types: ['code'] });
        expect(code.nodes.filter((n) => n.label === 'Plan').map((n) => n.id)).toEqual([plan.id]);
        expect(code.nodes.filter((n) => n.label === 'Step')).toHaveLength(3);
        expect(code.edges.filter((e) => e.type === 'ATTEMPT').map((e) => e.to)).toEqual([a1.id]);
        expect((await graph.sessionGraph(other.id)).nodes.map((n) => n.label)).toEqual(['Session', 'Action']);
      });

      it('failureContext names the plan step an action was an attempt of', async () => {
        const { s, a1, plan } = await planned();
        const outside = await started(s.id, { startedAt: at(4) });
        await graph.recordPlan(plan);
        expect((await graph.failureContext(s.id, a1.id, { before: 0 }))?.planStep).toStrictEqual({
          planId: plan.id,
          stepId: 'compute',
          version: 1,
        });
        expect((await graph.failureContext(s.id, outside.id, { before: 0 }))?.planStep).toBeNull();
      });

      it('recordPlan rejects for a session never recorded', async () => {
        const { plan } = await planned();
        await refused(graph.recordPlan({ ...plan, sessionId: 'no-such-session' }), SessionNotRecordedError);
        expect((await graph.sessionGraph('no-such-session')).nodes).toEqual([]);
      });
    });

    const context = {
      deferredChecks,
      graph: () => graph,
      reopen: async () => {
        await graph.close();
        graph = await fixture.reopen();
        return graph;
      },
    };
    describeStatefulContract(context);
    describeCheckpointContract(context);
    describeActivityContract(context);
    describeApprovalContract(context);

    describe('recovery and lifecycle', () => {
      it('markRunningInterrupted ends only running actions, and returns how many', async () => {
        const s1 = await recorded();
        const s2 = await recorded();
        const r1 = await started(s1.id);
        const done = await started(s1.id);
        await graph.recordActionCompleted(done.id, completion(done));
        const r2 = await started(s2.id);

        expect(await graph.markRunningInterrupted(at(100))).toBe(2);
        for (const [sid, a] of [
          [s1.id, r1],
          [s2.id, r2],
        ] as const) {
          expect(await graph.getAction(sid, a.id)).toMatchObject({
            status: 'interrupted',
            endedAt: at(100),
            error: { class: 'internal', message: 'engine stopped while the action was running' },
          });
        }
        expect(await graph.getAction(s1.id, done.id)).toMatchObject({ status: 'succeeded', endedAt: at(2) });
        expect(await graph.markRunningInterrupted(at(200))).toBe(0);
        await refused(graph.recordActionCompleted(r1.id, completion(r1)), ActionAlreadyCompletedError);
        expect(await graph.getAction(s1.id, r1.id)).toMatchObject({
          status: 'interrupted',
          endedAt: at(100),
        });
      });

      it('markRunningInterrupted with session ids ends only those sessions’ open actions', async () => {
        const [s1, s2, s3] = [await recorded(), await recorded(), await recorded()];
        const r1 = await started(s1.id);
        const w2 = await started(s2.id, {
          approval: { rule: '{}', layer: 'tenant', reasons: [], requestedAt: at(1), expiresAt: at(901) },
        });
        const r3 = await started(s3.id);

        expect(await graph.markRunningInterrupted(at(100), [s1.id, s2.id, 'no-such-session'])).toBe(2);
        expect(await graph.getAction(s1.id, r1.id)).toMatchObject({
          status: 'interrupted',
          endedAt: at(100),
        });
        expect(await graph.getAction(s2.id, w2.id)).toMatchObject({
          status: 'interrupted',
          endedAt: at(100),
        });
        expect((await graph.getAction(s3.id, r3.id))?.status).toBe('running');
        expect(await graph.markRunningInterrupted(at(150), [])).toBe(0);
        expect(await graph.markRunningInterrupted(at(200), [s1.id])).toBe(0);
        expect((await graph.getAction(s3.id, r3.id))?.status).toBe('running');
        expect(await graph.markRunningInterrupted(at(300))).toBe(1);
        expect(await graph.getAction(s3.id, r3.id)).toMatchObject({
          status: 'interrupted',
          endedAt: at(300),
        });
      });

      it('keeps per-session seqs gapless under 200 concurrent start+complete pairs, 4 sessions', async () => {
        const sessions = await Promise.all([0, 1, 2, 3].map(() => recorded()));
        const actions = Array.from({ length: 200 }, (_, i) => start(sessions[i % 4].id));

        // Fired together, not awaited one by one: this is how the engine's concurrent requests arrive.
        await Promise.all(
          actions.map((a) =>
            graph.recordActionStarted(a).then(() => graph.recordActionCompleted(a.id, completion(a))),
          ),
        );

        for (const s of sessions) {
          const listed = await listAll(graph, s.id, 16);
          expect(listed.map((a) => a.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
          expect(new Set(listed.map((a) => a.id))).toEqual(
            new Set(actions.filter((a) => a.sessionId === s.id).map((a) => a.id)),
          );
          expect(listed.every((a) => a.status === 'succeeded')).toBe(true);
          expect(edgeSet(await graph.sessionGraph(s.id)).filter((e) => e.startsWith('NEXT'))).toHaveLength(
            49,
          );
        }
      });

      it('is durable: everything reads back the same after close and reopen', async () => {
        const s = await recorded();
        const a1 = await started(s.id);
        await graph.recordActionCompleted(
          a1.id,
          completion(a1, {
            status: 'failed',
            exitCode: 1,
            files: [
              { path: 'a', access: 'read' },
              { path: 'b', access: 'write' },
            ],
          }),
        );
        await started(s.id, { retryOf: a1.id });
        await graph.endSession(s.id, at(50), 'expired');
        const view = await graph.sessionGraph(s.id);
        const actions = await listAll(graph, s.id);

        await graph.close();
        graph = await fixture.reopen();

        expect(await graph.sessionGraph(s.id)).toEqual(view);
        expect(await listAll(graph, s.id)).toEqual(actions);
        expect(await graph.getAction(s.id, a1.id)).toEqual(actions[0]);
        const a3 = await started(s.id);
        expect((await graph.getAction(s.id, a3.id))?.seq).toBe(3);
      });

      it('close is idempotent, flushes queued writes, and later writes reject', async () => {
        const s = session();
        const write = graph.recordSession(s);
        await graph.close();
        await write;
        await graph.close();
        await expect(graph.recordSession(session())).rejects.toBeInstanceOf(ContextGraphClosedError);

        graph = await fixture.reopen();
        expect((await graph.sessionGraph(s.id)).nodes).toHaveLength(1);
      });
    });
  });
}
