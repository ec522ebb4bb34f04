import {
  at,
  completion,
  expectRefused,
  listAll,
  session,
  start,
  uid,
} from './context-graph-records.contract';
import type { StatefulContractContext } from './context-graph-stateful.contract';
import {
  ActionNotRecordedError,
  CheckpointNotRecordedError,
  ForkConflictError,
  SessionNotRecordedError,
} from './context-graph.errors';
import type { ActionCompletion, ActionStart, GraphView, SessionRecord } from './context-graph.types';
import type { CheckpointRecord, CheckpointRef, ForkRecord } from './checkpoint.types';

/** The contract's current graph, and a way to close and reopen it on the same store. */
export type CheckpointContractContext = StatefulContractContext;

/**
 * The contract for workspace checkpoints (`Checkpoint` nodes, `HAS_CHECKPOINT`, `BEFORE`), restores
 * (`RESTORED`) and forks (`FORKED_FROM`, lineage across them), registered inside `describeContextGraphContract`
 * so every adapter runs it. Kept in its own file: the main contract is long enough.
 */
export function describeCheckpointContract(ctx: CheckpointContractContext): void {
  describe('checkpoints, restores and forks', () => {
    const graph = () => ctx.graph();
    const refused = (
      attempt: Promise<unknown>,
      error: abstract new (...args: never[]) => Error,
      match?: Record<string, unknown>,
    ) => expectRefused(ctx.deferredChecks, attempt, error, match);

    const recorded = async (overrides: Partial<SessionRecord> = {}): Promise<SessionRecord> => {
      const s = session(overrides);
      await graph().recordSession(s);
      return s;
    };

    const started = async (sessionId: string, s: Partial<ActionStart> = {}): Promise<ActionStart> => {
      const a = start(sessionId, s);
      await graph().recordActionStarted(a);
      return a;
    };

    const finish = (a: ActionStart, c: Partial<ActionCompletion> = {}): Promise<void> =>
      graph().recordActionCompleted(a.id, completion(a, c));

    /** Starts and completes one action. */
    const completed = async (
      sessionId: string,
      c: Partial<ActionCompletion> = {},
      s: Partial<ActionStart> = {},
    ): Promise<ActionStart> => {
      const a = await started(sessionId, s);
      await finish(a, c);
      return a;
    };

    const checkpoint = (sessionId: string, overrides: Partial<CheckpointRecord> = {}): CheckpointRecord => ({
      id: uid('chk'),
      sessionId,
      createdAt: at(10),
      files: 3,
      directories: 1,
      bytes: 1024,
      auto: false,
      seq: 0,
      ...overrides,
    });

    const taken = async (sessionId: string, overrides: Partial<CheckpointRecord> = {}) => {
      const c = checkpoint(sessionId, overrides);
      await graph().recordCheckpoint(c);
      return c;
    };

    /** The `Checkpoint` node a record makes (no deletion). */
    const node = (c: CheckpointRecord) => ({
      id: `checkpoint:${c.id}`,
      label: 'Checkpoint',
      properties: {
        id: c.id,
        sessionId: c.sessionId,
        ...(c.label !== undefined && { label: c.label }),
        createdAt: c.createdAt,
        files: c.files,
        directories: c.directories,
        bytes: c.bytes,
        auto: c.auto,
        seq: c.seq,
      },
    });

    /** The ref records and failure contexts carry (no deletion). */
    const ref = (c: CheckpointRecord): CheckpointRef => ({
      id: c.id,
      ...(c.label !== undefined && { label: c.label }),
      createdAt: c.createdAt,
      auto: c.auto,
    });

    const nodesOf = (view: GraphView, label: string) => view.nodes.filter((n) => n.label === label);
    const edgesOf = (view: GraphView, type: string) => view.edges.filter((e) => e.type === type);
    const labels = (view: GraphView): string[] => view.nodes.map((n) => n.label);
    const edgeList = (view: GraphView): string[] => view.edges.map((e) => `${e.type} ${e.from} -> ${e.to}`);
    const byId = <T extends { id: string }>(items: T[]): T[] =>
      [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

    describe('recordCheckpoint', () => {
      /** a1 done · `manual` (labelled) · a2 started, `before` taken for it, done · `later`, same instant as `before`. */
      async function withCheckpoints() {
        const s = await recorded();
        const a1 = await completed(s.id);
        const manual = await taken(s.id, {
          id: uid('chk_c'),
          label: 'before refactor',
          createdAt: at(3),
          seq: 1,
          files: 12,
          directories: 4,
          bytes: 5_000_000_000, // past 32 bits
        });
        const a2 = await started(s.id, { startedAt: at(4) });
        const before = await taken(s.id, {
          id: uid('chk_b'),
          createdAt: at(4),
          auto: true,
          seq: 2,
          beforeActionId: a2.id,
        });
        await finish(a2, { status: 'failed', exitCode: 1 });
        const later = await taken(s.id, { id: uid('chk_a'), createdAt: at(4), seq: 2 });
        return { s, a1, a2, manual, before, later };
      }

      it('adds a Checkpoint node with HAS_CHECKPOINT from the session and BEFORE to its action, by createdAt then id', async () => {
        const { s, a2, manual, before, later } = await withCheckpoints();
        const view = await graph().sessionGraph(s.id);
        expect(nodesOf(view, 'Checkpoint')).toEqual([node(manual), node(later), node(before)]);
        expect(nodesOf(view, 'Checkpoint')[1].properties).not.toHaveProperty('label');
        expect(edgesOf(view, 'HAS_CHECKPOINT')).toEqual(
          [manual, later, before].map((c) => ({
            from: s.id,
            to: `checkpoint:${c.id}`,
            type: 'HAS_CHECKPOINT',
            properties: {},
          })),
        );
        expect(edgesOf(view, 'BEFORE')).toEqual([
          { from: `checkpoint:${before.id}`, to: a2.id, type: 'BEFORE', properties: {} },
        ]);
      });

      it("puts the checkpoint taken before an action on the action's record, the latest when several were", async () => {
        const { s, a1, a2, before } = await withCheckpoints();
        expect((await graph().getAction(s.id, a2.id))?.checkpoint).toStrictEqual(ref(before));
        expect((await graph().getAction(s.id, a1.id))?.checkpoint).toBeUndefined();
        expect((await listAll(graph(), s.id)).map((a) => a.checkpoint)).toEqual([undefined, ref(before)]);

        // Taken earlier, recorded later: the latest by createdAt still holds the workspace the action found.
        await taken(s.id, { createdAt: at(3.5), beforeActionId: a2.id, auto: true });
        expect((await graph().getAction(s.id, a2.id))?.checkpoint).toStrictEqual(ref(before));
        const last = await taken(s.id, { createdAt: at(4.5), label: 'last', beforeActionId: a2.id });
        expect((await graph().getAction(s.id, a2.id))?.checkpoint).toStrictEqual(ref(last));
      });

      it('getCheckpoint hands a checkpoint back as recorded, with its deletion; undefined when not the session’s', async () => {
        const { s, manual, before } = await withCheckpoints();
        const other = await recorded();
        expect(await graph().getCheckpoint(s.id, manual.id)).toStrictEqual(manual);
        expect(await graph().getCheckpoint(s.id, before.id)).toStrictEqual(before);
        await graph().recordCheckpointDeleted(s.id, before.id, at(20), 'pruned');
        expect(await graph().getCheckpoint(s.id, before.id)).toStrictEqual({
          ...before,
          deletedAt: at(20),
          deleteReason: 'pruned',
        });
        expect(await graph().getCheckpoint(other.id, before.id)).toBeUndefined();
        expect(await graph().getCheckpoint(s.id, 'chk-never')).toBeUndefined();
        expect(await graph().getCheckpoint('no-such-session', before.id)).toBeUndefined();
      });

      it('lastActionSeq is the highest seq recorded in the session (what a checkpoint taken now records), 0 for none', async () => {
        const s = await recorded();
        const other = await recorded();
        expect(await graph().lastActionSeq(s.id)).toBe(0);
        expect(await graph().lastActionSeq('no-such-session')).toBe(0);
        await completed(s.id);
        await started(other.id);
        await started(s.id); // still running: counted, its seq is taken
        expect(await graph().lastActionSeq(s.id)).toBe(2);
        expect(await graph().lastActionSeq(other.id)).toBe(1);
      });

      it('is idempotent on the id: a second record of an id changes nothing', async () => {
        const { s, a1, manual, later } = await withCheckpoints();
        const view = await graph().sessionGraph(s.id);
        await graph().recordCheckpoint(manual);
        await graph().recordCheckpoint({ ...later, label: 'renamed', seq: 9, beforeActionId: a1.id });
        expect(await graph().sessionGraph(s.id)).toEqual(view);
        expect((await graph().getAction(s.id, a1.id))?.checkpoint).toBeUndefined();
      });

      it('rejects an unknown session, and a beforeActionId that is not an action of the session', async () => {
        const s = await recorded();
        const other = await recorded();
        const b1 = await completed(other.id);
        await refused(graph().recordCheckpoint(checkpoint('no-such-session')), SessionNotRecordedError);
        for (const beforeActionId of ['no-such-action', b1.id]) {
          await refused(
            graph().recordCheckpoint(checkpoint(s.id, { beforeActionId })),
            ActionNotRecordedError,
          );
        }
        expect(nodesOf(await graph().sessionGraph(s.id), 'Checkpoint')).toEqual([]);
        expect((await graph().getAction(other.id, b1.id))?.checkpoint).toBeUndefined();
      });

      it('recordCheckpointDeleted keeps the node, with deletedAt and deleteReason; the first deletion wins', async () => {
        const { s, a2, before } = await withCheckpoints();
        const view = await graph().sessionGraph(s.id);
        await graph().recordCheckpointDeleted(s.id, before.id, at(20), 'pruned');
        await graph().recordCheckpointDeleted(s.id, before.id, at(30), 'deleted');

        const after = await graph().sessionGraph(s.id);
        expect(nodesOf(after, 'Checkpoint')).toEqual(
          nodesOf(view, 'Checkpoint').map((n) =>
            n.id === `checkpoint:${before.id}`
              ? { ...n, properties: { ...n.properties, deletedAt: at(20), deleteReason: 'pruned' } }
              : n,
          ),
        );
        expect(after.edges).toEqual(view.edges);
        expect((await graph().getAction(s.id, a2.id))?.checkpoint).toStrictEqual({
          ...ref(before),
          deletedAt: at(20),
        });
      });

      it('recordCheckpointDeleted rejects a checkpoint the session never recorded, another session’s included', async () => {
        const { s, before } = await withCheckpoints();
        const other = await recorded();
        const view = await graph().sessionGraph(s.id);
        for (const [sessionId, checkpointId] of [
          [s.id, 'chk-never'],
          [other.id, before.id],
          ['no-such-session', before.id],
        ]) {
          const attempt = graph().recordCheckpointDeleted(sessionId, checkpointId, at(20), 'deleted');
          await refused(attempt, CheckpointNotRecordedError, { details: { checkpointId, sessionId } });
        }
        expect(await graph().sessionGraph(s.id)).toEqual(view);
      });
    });

    describe('recordRestore', () => {
      it('adds a RESTORED edge from the restoring action or the session, one per restore, by restoredAt, checkpoint id, start', async () => {
        const s = await recorded();
        const a1 = await completed(s.id, { status: 'failed', exitCode: 1 });
        const first = await taken(s.id, { id: uid('chk_a'), createdAt: at(3), seq: 1 });
        const second = await taken(s.id, { id: uid('chk_b'), createdAt: at(3.5), seq: 1 });
        const retry = await started(s.id, { retryOf: a1.id, startedAt: at(5) });
        const restore = (r: {
          checkpointId: string;
          restoredAt: string;
          actionId?: string;
          planId?: string;
        }) => graph().recordRestore({ sessionId: s.id, ...r });

        await restore({ checkpointId: second.id, restoredAt: at(6) });
        await restore({ checkpointId: first.id, restoredAt: at(7), planId: 'plan-1' });
        await restore({ checkpointId: first.id, restoredAt: at(6) });
        await restore({ checkpointId: first.id, restoredAt: at(6), actionId: retry.id });
        await restore({ checkpointId: first.id, restoredAt: at(7), planId: 'plan-2' }); // the same restore: kept once
        await restore({ checkpointId: first.id, restoredAt: at(8) }); // restored again: another edge

        const to = (c: CheckpointRecord) => `checkpoint:${c.id}`;
        // At one instant: by checkpoint id, then by the node the edge starts at (action ids sort before session ids).
        expect(edgesOf(await graph().sessionGraph(s.id), 'RESTORED')).toEqual([
          { from: retry.id, to: to(first), type: 'RESTORED', properties: { restoredAt: at(6) } },
          { from: s.id, to: to(first), type: 'RESTORED', properties: { restoredAt: at(6) } },
          { from: s.id, to: to(second), type: 'RESTORED', properties: { restoredAt: at(6) } },
          {
            from: s.id,
            to: to(first),
            type: 'RESTORED',
            properties: { restoredAt: at(7), planId: 'plan-1' },
          },
          { from: s.id, to: to(first), type: 'RESTORED', properties: { restoredAt: at(8) } },
        ]);
      });

      it('rejects an unknown session, an action or a checkpoint that is not the session’s', async () => {
        const s = await recorded();
        const other = await recorded();
        const mine = await taken(s.id);
        const theirs = await taken(other.id);
        const b1 = await completed(other.id);
        const restore = { sessionId: s.id, checkpointId: mine.id, restoredAt: at(20) };
        const rejects = async (
          r: typeof restore & { actionId?: string },
          error: new (...a: never[]) => Error,
        ) => refused(graph().recordRestore(r), error);

        await rejects({ ...restore, sessionId: 'no-such-session' }, SessionNotRecordedError);
        await rejects({ ...restore, actionId: 'no-such-action' }, ActionNotRecordedError);
        await rejects({ ...restore, actionId: b1.id }, ActionNotRecordedError);
        await rejects({ ...restore, checkpointId: 'chk-never' }, CheckpointNotRecordedError);
        await rejects({ ...restore, checkpointId: theirs.id }, CheckpointNotRecordedError);
        for (const sid of [s.id, other.id]) {
          expect(edgesOf(await graph().sessionGraph(sid), 'RESTORED')).toEqual([]);
        }
      });
    });

    describe('recordFork', () => {
      /** `src` with a1 and checkpoint `c`; `early` forked first (at now); `b` (at `c`) and `d` at one instant. */
      async function forked() {
        const src = await recorded();
        await completed(src.id);
        const c = await taken(src.id, { createdAt: at(3), seq: 1 });
        const b = await recorded({ createdAt: at(5) });
        const d = await recorded({ createdAt: at(5), metadata: { agent: 'd' } });
        const early = await recorded({ createdAt: at(4) });
        const forks: Record<'b' | 'd' | 'early', ForkRecord> = {
          b: { sessionId: b.id, fromSessionId: src.id, checkpointId: c.id, forkedAt: at(5), seq: 1 },
          d: { sessionId: d.id, fromSessionId: src.id, forkedAt: at(5), seq: 1 },
          early: { sessionId: early.id, fromSessionId: src.id, forkedAt: at(4), seq: 1 },
        };
        for (const f of Object.values(forks)) await graph().recordFork(f);
        return { src, c, b, d, early, forks };
      }

      it('adds FORKED_FROM {forkedAt, seq, checkpointId?} from the new session, shown with the other Session on both sides', async () => {
        const { src, c, b, d, early } = await forked();
        const source = await graph().sessionGraph(src.id);
        const sessionNode = async (id: string) => (await graph().sessionGraph(id)).nodes[0];
        // The source's own graph: its forks last, the earliest fork first, then by session id.
        const later = byId([b, d]);
        expect(labels(source).slice(-3)).toEqual(['Session', 'Session', 'Session']);
        expect(source.nodes.slice(-3)).toEqual([
          await sessionNode(early.id),
          await sessionNode(later[0].id),
          await sessionNode(later[1].id),
        ]);
        expect(edgesOf(source, 'FORKED_FROM')).toEqual([
          { from: early.id, to: src.id, type: 'FORKED_FROM', properties: { forkedAt: at(4), seq: 1 } },
          ...later.map((s) => ({
            from: s.id,
            to: src.id,
            type: 'FORKED_FROM',
            properties: { forkedAt: at(5), seq: 1, ...(s.id === b.id && { checkpointId: c.id }) },
          })),
        ]);

        // The fork's graph: the source's Session node and the edge, none of the source's actions or checkpoints.
        const fork = await graph().sessionGraph(b.id);
        expect(labels(fork)).toEqual(['Session', 'Session']);
        expect(fork.nodes[1]).toEqual(source.nodes[0]);
        expect(fork.edges).toEqual([
          {
            from: b.id,
            to: src.id,
            type: 'FORKED_FROM',
            properties: { forkedAt: at(5), seq: 1, checkpointId: c.id },
          },
        ]);
      });

      it('takes the same record again as a no-op; refuses another origin and a cycle with ForkConflictError', async () => {
        const { src, b, early, forks } = await forked();
        const view = await graph().sessionGraph(src.id);
        await graph().recordFork(forks.b);
        await graph().recordFork({ ...forks.d });
        for (const f of [
          { ...forks.b, seq: 2 },
          { ...forks.b, checkpointId: undefined },
          { ...forks.d, fromSessionId: early.id },
          { sessionId: src.id, fromSessionId: b.id, forkedAt: at(9), seq: 0 }, // b descends from src
          { sessionId: src.id, fromSessionId: src.id, forkedAt: at(9), seq: 0 },
        ]) {
          await refused(graph().recordFork(f), ForkConflictError);
        }
        expect(await graph().sessionGraph(src.id)).toEqual(view);
        expect(edgesOf(await graph().sessionGraph(early.id), 'FORKED_FROM')).toHaveLength(1);
      });

      it('rejects unknown sessions, and a checkpoint that is not the source’s', async () => {
        const { src, b, c } = await forked();
        const fresh = await recorded();
        const own = await taken(fresh.id);
        const fork = { sessionId: fresh.id, fromSessionId: src.id, forkedAt: at(9), seq: 1 };
        for (const f of [
          { ...fork, sessionId: 'no-such-session' },
          { ...fork, fromSessionId: 'no-such-session' },
        ]) {
          await refused(graph().recordFork(f), SessionNotRecordedError);
        }
        for (const f of [
          { ...fork, checkpointId: 'chk-never' },
          { ...fork, checkpointId: own.id },
          { ...fork, fromSessionId: b.id, checkpointId: c.id },
        ]) {
          await refused(graph().recordFork(f), CheckpointNotRecordedError);
        }
        expect((await graph().sessionGraph(fresh.id)).edges.map((e) => e.type)).toEqual(['HAS_CHECKPOINT']);
      });
    });

    it('failureContext names the checkpoint a restoring retry would use: its own, else the nearest up its retry chain', async () => {
      const s = await recorded();
      const failed = { status: 'failed' as const, exitCode: 1 };
      const a1 = await started(s.id, { startedAt: at(1) });
      const c1 = await taken(s.id, { createdAt: at(1), beforeActionId: a1.id, auto: true });
      await finish(a1, failed);
      const a2 = await completed(s.id, failed, { startedAt: at(2), retryOf: a1.id });
      const a3 = await started(s.id, { startedAt: at(3), retryOf: a2.id });
      const c3 = await taken(s.id, { createdAt: at(3), beforeActionId: a3.id, label: 'retry 2', seq: 2 });
      await finish(a3, failed);
      const a4 = await completed(s.id, failed, { startedAt: at(4), retryOf: a3.id });
      const a5 = await completed(s.id, failed, { startedAt: at(5) });
      const context = async (a: ActionStart) => graph().failureContext(s.id, a.id, { before: 5 });

      expect((await context(a1))?.checkpoint).toStrictEqual(ref(c1));
      expect((await context(a1))?.action.checkpoint).toStrictEqual(ref(c1));
      expect((await context(a2))?.checkpoint).toStrictEqual(ref(c1)); // not its descendant a3's
      expect((await context(a2))?.action.checkpoint).toBeUndefined();
      expect((await context(a3))?.checkpoint).toStrictEqual(ref(c3));
      expect((await context(a4))?.checkpoint).toStrictEqual(ref(c3)); // the nearest, not the root's
      expect((await context(a5))?.checkpoint).toBeNull();

      // Deleted: still named, with when, so a reflection loop knows the workspace cannot be put back.
      await graph().recordCheckpointDeleted(s.id, c3.id, at(30), 'deleted');
      const undone = await context(a4);
      expect(undone?.checkpoint).toStrictEqual({ ...ref(c3), deletedAt: at(30) });
      // Summaries stay small: no checkpoint on the actions before it or in its retry chain.
      for (const summary of [...(undone?.before ?? []), ...(undone?.retryChain ?? [])]) {
        expect(summary).not.toHaveProperty('checkpoint');
      }
    });

    /**
     * `a` writes f.txt and a.txt (seq 1), reads f.txt (2), checkpoint at seq 2, writes f.txt (3) · `b` forked
     * from `a` at that checkpoint: writes f.txt (1), writes f.txt (2) · `c` forked from `b` at its seq 1: reads
     * f.txt (1).
     */
    async function forkedLineage() {
      const a = await recorded();
      const write = (path: string) => ({ path, access: 'write' as const });
      const a1 = await completed(a.id, { files: [write('f.txt'), write('a.txt')] }, { startedAt: at(1) });
      const a2 = await completed(a.id, { files: [{ path: 'f.txt', access: 'read' }] }, { startedAt: at(2) });
      const chk = await taken(a.id, { createdAt: at(2.5), seq: 2 });
      const a3 = await completed(a.id, { files: [write('f.txt')] }, { startedAt: at(3) });
      const b = await recorded({ createdAt: at(4) });
      await graph().recordFork({
        sessionId: b.id,
        fromSessionId: a.id,
        checkpointId: chk.id,
        forkedAt: at(4),
        seq: 2,
      });
      const b1 = await completed(b.id, { files: [write('f.txt')] }, { startedAt: at(5) });
      const b2 = await completed(b.id, { files: [write('f.txt')] }, { startedAt: at(6) });
      const c = await recorded({ createdAt: at(7) });
      await graph().recordFork({ sessionId: c.id, fromSessionId: b.id, forkedAt: at(7), seq: 1 });
      const c1 = await completed(c.id, { files: [{ path: 'f.txt', access: 'read' }] }, { startedAt: at(8) });
      return { a, b, c, a1, a2, a3, b1, b2, c1 };
    }

    it('fileLineage of a fork: the source’s entries up to the fork’s seq, then its own; a fork of a fork cuts each origin at its own fork', async () => {
      const h = await forkedLineage();
      const entries = async (sessionId: string, path: string) =>
        (await graph().fileLineage(sessionId, path)).entries.map((e) => [e.sessionId, e.id, e.seq, e.access]);

      expect(await entries(h.a.id, 'f.txt')).toEqual([
        [h.a.id, h.a1.id, 1, ['write']],
        [h.a.id, h.a2.id, 2, ['read']],
        [h.a.id, h.a3.id, 3, ['write']],
      ]);
      expect(await entries(h.b.id, 'f.txt')).toEqual([
        [h.a.id, h.a1.id, 1, ['write']],
        [h.a.id, h.a2.id, 2, ['read']],
        [h.b.id, h.b1.id, 1, ['write']],
        [h.b.id, h.b2.id, 2, ['write']],
      ]);
      expect(await entries(h.c.id, 'f.txt')).toEqual([
        [h.a.id, h.a1.id, 1, ['write']],
        [h.a.id, h.a2.id, 2, ['read']],
        [h.b.id, h.b1.id, 1, ['write']],
        [h.c.id, h.c1.id, 1, ['read']],
      ]);
      expect(await entries(h.c.id, 'a.txt')).toEqual([[h.a.id, h.a1.id, 1, ['write']]]);
      expect(await graph().fileLineage(h.b.id, 'never.txt')).toEqual({ path: 'never.txt', entries: [] });
      // An origin's entry is the same entry its own session's lineage has.
      const own = await graph().fileLineage(h.a.id, 'f.txt');
      const inherited = await graph().fileLineage(h.c.id, 'f.txt');
      expect(inherited.entries[1]).toStrictEqual(own.entries[1]);
      expect(inherited.entries[0]).toStrictEqual({
        id: h.a1.id,
        seq: 1,
        type: 'code',
        operation: 'python',
        status: 'succeeded',
        inputSummary: h.a1.inputSummary,
        inputHash: h.a1.inputHash,
        startedAt: at(1),
        endedAt: at(2),
        durationMs: 1000,
        tier: 'subprocess',
        exitCode: 0,
        sessionId: h.a.id,
        access: ['write'],
      });
    });

    /**
     * `src` ← `s` ← `fork` (forks at now). In `s`: checkpoint `manual` (labelled) · a1 (file) writes x · a2
     * (code) with `auto` taken before it, fails · a3 retries a2 restoring `auto` · the session restores `manual`
     * for a plan whose step tried a2 then a3.
     */
    async function scene() {
      const src = await recorded();
      const s = await recorded({ createdAt: at(0.5) });
      await graph().recordFork({ sessionId: s.id, fromSessionId: src.id, forkedAt: at(0.5), seq: 0 });
      const manual = await taken(s.id, { createdAt: at(0.75), label: 'start', seq: 0 });
      const a1 = await completed(
        s.id,
        { files: [{ path: 'x', access: 'write' }], exitCode: undefined },
        { type: 'file', operation: 'write', tier: 'engine', startedAt: at(1) },
      );
      const a2 = await started(s.id, { startedAt: at(2) });
      const auto = await taken(s.id, { createdAt: at(2), auto: true, seq: 1, beforeActionId: a2.id });
      await finish(a2, { status: 'failed', exitCode: 1 });
      const a3 = await started(s.id, { startedAt: at(3), retryOf: a2.id });
      await graph().recordRestore({
        sessionId: s.id,
        checkpointId: auto.id,
        restoredAt: at(3),
        actionId: a3.id,
      });
      await finish(a3);
      const planId = uid('plan');
      await graph().recordRestore({ sessionId: s.id, checkpointId: manual.id, restoredAt: at(4), planId });
      await graph().recordPlan({
        id: planId,
        sessionId: s.id,
        status: 'succeeded',
        maxParallel: 1,
        createdAt: at(0),
        steps: [
          {
            stepId: 'build',
            version: 1,
            status: 'succeeded',
            allowFailure: false,
            dependsOn: [],
            attempts: [a2.id, a3.id],
          },
        ],
      });
      const fork = await recorded({ createdAt: at(5) });
      await graph().recordFork({ sessionId: fork.id, fromSessionId: s.id, forkedAt: at(5), seq: 3 });
      return { src, s, fork, manual, auto, a1, a2, a3, planId, stepId: `step:${planId}:build:1` };
    }

    it('sessionGraph puts checkpoints between processes and plans, their edges after STARTED, and fork sessions and FORKED_FROM last', async () => {
      const m = await scene();
      const view = await graph().sessionGraph(m.s.id);
      expect(labels(view)).toEqual([
        'Session',
        ...['Action', 'Action', 'Action'],
        'File',
        'Checkpoint',
        'Checkpoint',
        'Plan',
        'Step',
        'Session',
        'Session',
      ]);
      expect(view.nodes.slice(-2).map((n) => n.id)).toEqual([m.src.id, m.fork.id]);
      const [manual, auto] = [m.manual, m.auto].map((c) => `checkpoint:${c.id}`);
      expect(edgeList(view)).toEqual([
        ...[m.a1, m.a2, m.a3].map((a) => `HAS_ACTION ${m.s.id} -> ${a.id}`),
        `NEXT ${m.a1.id} -> ${m.a2.id}`,
        `NEXT ${m.a2.id} -> ${m.a3.id}`,
        `WROTE ${m.a1.id} -> file:${m.s.id}:x`,
        `RETRY_OF ${m.a3.id} -> ${m.a2.id}`,
        `HAS_CHECKPOINT ${m.s.id} -> ${manual}`,
        `HAS_CHECKPOINT ${m.s.id} -> ${auto}`,
        `BEFORE ${auto} -> ${m.a2.id}`,
        `RESTORED ${m.a3.id} -> ${auto}`,
        `RESTORED ${m.s.id} -> ${manual}`,
        `HAS_PLAN ${m.s.id} -> ${m.planId}`,
        `HAS_STEP ${m.planId} -> ${m.stepId}`,
        `ATTEMPT ${m.stepId} -> ${m.a2.id}`,
        `ATTEMPT ${m.stepId} -> ${m.a3.id}`,
        `FORKED_FROM ${m.s.id} -> ${m.src.id}`,
        `FORKED_FROM ${m.fork.id} -> ${m.s.id}`,
      ]);
      expect(edgesOf(view, 'RESTORED').map((e) => e.properties)).toEqual([
        { restoredAt: at(3) },
        { restoredAt: at(4), planId: m.planId },
      ]);
      expect(await graph().sessionGraph(m.s.id)).toEqual(view); // deterministic
    });

    it('sessionGraph filters keep every checkpoint and fork, BEFORE and an action’s RESTORED only for included actions', async () => {
      const m = await scene();
      const [manual, auto] = [m.manual, m.auto].map((c) => `checkpoint:${c.id}`);
      const always = [`HAS_CHECKPOINT ${m.s.id} -> ${manual}`, `HAS_CHECKPOINT ${m.s.id} -> ${auto}`];
      const forks = [`FORKED_FROM ${m.s.id} -> ${m.src.id}`, `FORKED_FROM ${m.fork.id} -> ${m.s.id}`];
      const kept = (view: GraphView) =>
        edgeList(view).filter((e) => /^(HAS_CHECKPOINT|BEFORE|RESTORED|FORKED_FROM) /.test(e));

      const files = await graph().sessionGraph(m.s.id, { types: ['file'] });
      expect(labels(files)).toEqual([
        'Session',
        'Action',
        'File',
        'Checkpoint',
        'Checkpoint',
        'Plan',
        'Step',
        'Session',
        'Session',
      ]);
      expect(kept(files)).toEqual([...always, `RESTORED ${m.s.id} -> ${manual}`, ...forks]);

      const failed = await graph().sessionGraph(m.s.id, { status: ['failed'] });
      expect(kept(failed)).toEqual([
        ...always,
        `BEFORE ${auto} -> ${m.a2.id}`,
        `RESTORED ${m.s.id} -> ${manual}`,
        ...forks,
      ]);

      const latest = await graph().sessionGraph(m.s.id, { limit: 1 });
      expect(kept(latest)).toEqual([
        ...always,
        `RESTORED ${m.a3.id} -> ${auto}`,
        `RESTORED ${m.s.id} -> ${manual}`,
        ...forks,
      ]);

      const none = await graph().sessionGraph(m.s.id, { types: ['kernel'] });
      expect(labels(none)).toEqual([
        'Session',
        'Checkpoint',
        'Checkpoint',
        'Plan',
        'Step',
        'Session',
        'Session',
      ]);
      expect(nodesOf(none, 'Checkpoint')).toEqual(nodesOf(await graph().sessionGraph(m.s.id), 'Checkpoint'));
    });

    it('keeps checkpoints, restores and forks across close and reopen', async () => {
      const m = await scene();
      await graph().recordCheckpointDeleted(m.s.id, m.manual.id, at(6), 'pruned');
      const ids = [m.src.id, m.s.id, m.fork.id];
      const views = await Promise.all(ids.map((id) => graph().sessionGraph(id)));
      const actions = await listAll(graph(), m.s.id);
      const context = await graph().failureContext(m.s.id, m.a3.id, { before: 5 });
      const lineage = await graph().fileLineage(m.fork.id, 'x');
      await ctx.reopen();
      expect(await Promise.all(ids.map((id) => graph().sessionGraph(id)))).toEqual(views);
      expect(await listAll(graph(), m.s.id)).toEqual(actions);
      expect(await graph().failureContext(m.s.id, m.a3.id, { before: 5 })).toStrictEqual(context);
      expect(context?.checkpoint).toStrictEqual(ref(m.auto));
      expect(lineage.entries.map((e) => [e.sessionId, e.id])).toEqual([[m.s.id, m.a1.id]]);
      expect(await graph().fileLineage(m.fork.id, 'x')).toStrictEqual(lineage);
    });
  });
}
