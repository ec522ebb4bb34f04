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
  ActionAlreadyCompletedError,
  ActionNotRecordedError,
  ApprovalNotPendingError,
} from './context-graph.errors';
import type {
  ActionCompletion,
  ActionStart,
  ApprovalDecision,
  ApprovalRequest,
  GraphView,
  SessionRecord,
} from './context-graph.types';

/** The contract's current graph, and a way to close and reopen it on the same store. */
export type ApprovalContractContext = StatefulContractContext;

/**
 * The contract for approvals (an action held `awaiting_approval`, its `Approval` node, `HAS_APPROVAL`, the
 * decision) and calls between actions (`CALLED_BY`, a skill's call tree in the failure context), registered
 * inside `describeContextGraphContract` so every adapter runs it. Kept in its own file: the main contract is
 * long enough.
 */
export function describeApprovalContract(ctx: ApprovalContractContext): void {
  describe('approvals and calls', () => {
    const graph = () => ctx.graph();
    const refuses = (
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

    /** How the engine ends an action whose approval was rejected or expired. */
    const deny = (a: ActionStart, endedAt = at(30)): Promise<void> =>
      finish(a, {
        status: 'denied',
        endedAt,
        exitCode: undefined,
        outputExcerpt: '',
        error: { class: 'policy', code: 'APPROVAL_REJECTED', message: 'refused by a person' },
      });

    const request = (overrides: Partial<ApprovalRequest> = {}): ApprovalRequest => ({
      rule: JSON.stringify({ match: { type: 'code', risk: 'high' }, effect: 'ask' }),
      layer: 'tenant',
      reasons: ['high-risk code needs a second pair of eyes', 'network access'],
      requestedAt: at(1),
      expiresAt: at(901),
      ...overrides,
    });

    const approved: ApprovalDecision = {
      decision: 'approved',
      decidedAt: at(5),
      decidedBy: 'admin:3f2a9c',
      reason: 'expected for this job',
    };
    const rejected: ApprovalDecision = { decision: 'rejected', decidedAt: at(6), decidedBy: 'admin:77e1' };
    const expired: ApprovalDecision = { decision: 'expired', decidedAt: at(901) };

    /** The `Approval` node a request (and decision) makes. */
    const approvalNode = (
      action: { id: string; sessionId: string },
      r: ApprovalRequest,
      d: Partial<ApprovalDecision> = {},
    ) => ({
      id: `approval:${action.id}`,
      label: 'Approval',
      properties: {
        actionId: action.id,
        sessionId: action.sessionId,
        ...r,
        reasons: JSON.stringify(r.reasons),
        ...d,
      },
    });

    const nodesOf = (view: GraphView, label: string) => view.nodes.filter((n) => n.label === label);
    const edgesOf = (view: GraphView, type: string) => view.edges.filter((e) => e.type === type);
    const actionIds = (view: GraphView): string[] => nodesOf(view, 'Action').map((n) => n.id);

    it('records an action started with an approval as awaiting_approval, with its Approval node', async () => {
      const s = await recorded();
      const r = request();
      const a = await started(s.id, { approval: r });

      const record = await graph().getAction(s.id, a.id);
      expect(record).toMatchObject({ id: a.id, seq: 1, status: 'awaiting_approval', files: [] });
      expect(record?.approval).toStrictEqual(r);
      expect(record?.endedAt).toBeUndefined();
      expect(record?.calledBy).toBeUndefined();
      expect((await listAll(graph(), s.id)).map((x) => x.approval)).toEqual([r]);

      const view = await graph().sessionGraph(s.id);
      expect(view.nodes.map((n) => [n.label, n.id])).toEqual([
        ['Session', s.id],
        ['Action', a.id],
        ['Approval', `approval:${a.id}`],
      ]);
      expect(view.nodes[1].properties.status).toBe('awaiting_approval');
      expect(nodesOf(view, 'Approval')).toEqual([approvalNode(a, r)]);
      expect(view.edges).toEqual([
        { from: s.id, to: a.id, type: 'HAS_ACTION', properties: {} },
        { from: a.id, to: `approval:${a.id}`, type: 'HAS_APPROVAL', properties: {} },
      ]);
      const context = await graph().failureContext(s.id, a.id, { before: 0 });
      expect(context?.approval).toStrictEqual(r);
      expect(context).toMatchObject({ callers: [], calls: [] });
    });

    it('approved, the action runs and completes; the decision stays on its approval', async () => {
      const s = await recorded();
      const r = request();
      const a = await started(s.id, { approval: r });
      await graph().recordApprovalDecision(a.id, approved);
      expect(await graph().getAction(s.id, a.id)).toMatchObject({
        status: 'running',
        approval: { ...r, ...approved },
      });

      await finish(a, { endedAt: at(8) });
      const record = await graph().getAction(s.id, a.id);
      expect(record).toMatchObject({ status: 'succeeded', endedAt: at(8) });
      expect(record?.approval).toStrictEqual({ ...r, ...approved });
      expect(nodesOf(await graph().sessionGraph(s.id), 'Approval')).toEqual([approvalNode(a, r, approved)]);
      expect((await graph().failureContext(s.id, a.id, { before: 0 }))?.approval).toStrictEqual({
        ...r,
        ...approved,
      });
    });

    it('rejected or expired, the action keeps waiting until the engine completes it denied', async () => {
      const s = await recorded();
      const r = request();
      const no = await started(s.id, { approval: r });
      const late = await started(s.id, { approval: request({ layer: 'session', reasons: [] }) });
      await graph().recordApprovalDecision(no.id, rejected);
      await graph().recordApprovalDecision(late.id, expired);
      expect((await graph().getAction(s.id, no.id))?.status).toBe('awaiting_approval');
      expect((await graph().getAction(s.id, late.id))?.status).toBe('awaiting_approval');

      await deny(no);
      await deny(late, at(902));
      const denied = await graph().getAction(s.id, no.id);
      expect(denied).toMatchObject({
        status: 'denied',
        endedAt: at(30),
        error: { code: 'APPROVAL_REJECTED' },
      });
      expect(denied?.approval).toStrictEqual({ ...r, ...rejected });
      // Expired: no one decided, so no `decidedBy` (absent, not null), nor a reason.
      expect((await graph().getAction(s.id, late.id))?.approval).toStrictEqual({
        ...request({ layer: 'session', reasons: [] }),
        decision: 'expired',
        decidedAt: at(901),
      });
      expect(nodesOf(await graph().sessionGraph(s.id), 'Approval')).toEqual([
        approvalNode(no, r, rejected),
        approvalNode(late, request({ layer: 'session', reasons: [] }), expired),
      ]);
    });

    it('refuses a decision on an action with nothing pending, and keeps the first decision', async () => {
      const s = await recorded();
      const r = request();
      const plain = await started(s.id);
      const once = await started(s.id, { approval: r });
      await graph().recordApprovalDecision(once.id, rejected);
      const running = await started(s.id, { approval: r });
      await graph().recordApprovalDecision(running.id, approved);
      const ended = await started(s.id, { approval: r });
      await deny(ended);

      for (const [id, decision] of [
        [plain.id, approved], // no approval was asked for
        [once.id, approved], // decided already (rejected), not completed yet
        [once.id, rejected],
        [running.id, rejected], // approved already: it runs
        [ended.id, approved], // ended without a decision
      ] as const) {
        await refuses(graph().recordApprovalDecision(id, decision), ApprovalNotPendingError, {
          code: 'APPROVAL_NOT_PENDING',
          kind: 'conflict',
          retriable: false,
          details: expect.objectContaining({ actionId: id }) as unknown,
        });
      }
      await refuses(graph().recordApprovalDecision('no-such-action', approved), ActionNotRecordedError);
      expect((await graph().getAction(s.id, once.id))?.approval).toStrictEqual({ ...r, ...rejected });
      expect(await graph().getAction(s.id, running.id)).toMatchObject({
        status: 'running',
        approval: { ...r, ...approved },
      });
      expect((await graph().getAction(s.id, ended.id))?.approval).toStrictEqual(r);
      expect((await graph().getAction(s.id, plain.id))?.approval).toBeUndefined();
    });

    it('completes an action still awaiting approval, once', async () => {
      const s = await recorded();
      const r = request();
      const a = await started(s.id, { approval: r });
      await deny(a);
      expect(await graph().getAction(s.id, a.id)).toMatchObject({ status: 'denied', approval: r });
      await refuses(deny(a, at(40)), ActionAlreadyCompletedError);
      expect(await graph().getAction(s.id, a.id)).toMatchObject({ status: 'denied', endedAt: at(30) });
    });

    it('a restart interrupts actions left awaiting approval too, counts them, and keeps their approvals', async () => {
      const s = await recorded();
      const r = request();
      const running = await started(s.id);
      const waiting = await started(s.id, { approval: r });
      const refused = await started(s.id, { approval: r });
      await graph().recordApprovalDecision(refused.id, rejected);
      const ok = await started(s.id, { approval: r });
      await graph().recordApprovalDecision(ok.id, approved);
      const done = await started(s.id, { approval: r });
      await graph().recordApprovalDecision(done.id, approved);
      await finish(done);
      expect((await graph().sessionActivity([s.id])).get(s.id)?.byStatus).toEqual({
        running: 2,
        awaiting_approval: 2,
        succeeded: 1,
      });
      const view = await graph().sessionGraph(s.id);
      const actions = await listAll(graph(), s.id);

      const reopened = await ctx.reopen();
      expect(await reopened.sessionGraph(s.id)).toEqual(view);
      expect(await listAll(reopened, s.id)).toEqual(actions);
      expect(await reopened.markRunningInterrupted(at(100))).toBe(4);
      const after = await listAll(reopened, s.id);
      expect(after.map((a) => [a.id, a.status])).toEqual([
        [running.id, 'interrupted'],
        [waiting.id, 'interrupted'],
        [refused.id, 'interrupted'],
        [ok.id, 'interrupted'],
        [done.id, 'succeeded'],
      ]);
      expect(after[1]).toMatchObject({
        endedAt: at(100),
        error: { class: 'internal', message: 'engine stopped while the action was running' },
      });
      expect(after[1].approval).toStrictEqual(r); // no decision: none was made
      expect(after[2].approval).toStrictEqual({ ...r, ...rejected });
      expect(await reopened.markRunningInterrupted(at(200))).toBe(0);
      await refuses(reopened.recordApprovalDecision(waiting.id, approved), ApprovalNotPendingError);
      await refuses(deny(waiting), ActionAlreadyCompletedError);
      expect(await reopened.getAction(s.id, waiting.id)).toMatchObject({
        status: 'interrupted',
        approval: r,
      });
    });

    /**
     * a1 starts process p, held for approval then approved · a2 a skill · a3 called by a2, held and rejected,
     * ended denied · a4 called by a2, retries a3, writes out.txt · a5 code held, undecided.
     */
    async function skillRun() {
      const s = await recorded();
      const r1 = request();
      const r3 = request({ layer: 'plan', reasons: ['writes outside the workspace'] });
      const r5 = request({ layer: 'engine', requestedAt: at(9), expiresAt: at(909) });
      const p = { id: uid('prc'), command: 'npm run dev', tier: 'subprocess' as const, startedAt: at(1.5) };
      const a1 = await started(s.id, { type: 'process', operation: 'start', approval: r1 });
      await graph().recordApprovalDecision(a1.id, approved);
      await finish(a1, { startedProcess: p });
      const a2 = await started(s.id, { type: 'skill', operation: 'fix-tests', startedAt: at(2) });
      const a3 = await started(s.id, {
        startedAt: at(3),
        calledBy: { actionId: a2.id, depth: 1 },
        approval: r3,
      });
      await graph().recordApprovalDecision(a3.id, rejected);
      await deny(a3, at(6));
      const a4 = await started(s.id, {
        startedAt: at(7),
        calledBy: { actionId: a2.id, depth: 1 },
        retryOf: a3.id,
        retryReason: 'denied',
      });
      await finish(a4, { endedAt: at(8), files: [{ path: 'out.txt', access: 'write' }] });
      await finish(a2, { endedAt: at(8.5) });
      const a5 = await started(s.id, { startedAt: at(9), approval: r5 });
      return { s, p, r1, r3, r5, a1, a2, a3, a4, a5 };
    }

    it('sessionGraph: Approval nodes after Process nodes, CALLED_BY after RETRY_OF, HAS_APPROVAL after STARTED', async () => {
      const { s, p, r1, r3, r5, a1, a2, a3, a4, a5 } = await skillRun();
      const view = await graph().sessionGraph(s.id);
      expect(view.nodes.map((n) => [n.label, n.id])).toEqual([
        ['Session', s.id],
        ...[a1, a2, a3, a4, a5].map((a) => ['Action', a.id]),
        ['File', `file:${s.id}:out.txt`],
        ['Process', `process:${p.id}`],
        ...[a1, a3, a5].map((a) => ['Approval', `approval:${a.id}`]),
      ]);
      expect(nodesOf(view, 'Approval')).toEqual([
        approvalNode(a1, r1, approved),
        approvalNode(a3, r3, rejected),
        approvalNode(a5, r5),
      ]);
      const edge = (from: string, to: string, type: string, properties = {}) => ({
        from,
        to,
        type,
        properties,
      });
      expect(view.edges).toEqual([
        ...[a1, a2, a3, a4, a5].map((a) => edge(s.id, a.id, 'HAS_ACTION')),
        edge(a1.id, a2.id, 'NEXT'),
        edge(a2.id, a3.id, 'NEXT'),
        edge(a3.id, a4.id, 'NEXT'),
        edge(a4.id, a5.id, 'NEXT'),
        edge(a4.id, `file:${s.id}:out.txt`, 'WROTE'),
        edge(a4.id, a3.id, 'RETRY_OF', { reason: 'denied' }),
        edge(a3.id, a2.id, 'CALLED_BY', { depth: 1 }),
        edge(a4.id, a2.id, 'CALLED_BY', { depth: 1 }),
        edge(a1.id, `process:${p.id}`, 'STARTED'),
        ...[a1, a3, a5].map((a) => edge(a.id, `approval:${a.id}`, 'HAS_APPROVAL')),
      ]);
      expect(await graph().sessionGraph(s.id)).toEqual(view); // deterministic
    });

    it('sessionGraph filters keep an approval with its action, CALLED_BY only between included actions', async () => {
      const { s, a1, a2, a3, a4, a5 } = await skillRun();
      const waiting = await graph().sessionGraph(s.id, { status: ['awaiting_approval'] });
      expect(waiting.nodes.map((n) => n.id)).toEqual([s.id, a5.id, `approval:${a5.id}`]);
      expect(waiting.edges.map((e) => e.type)).toEqual(['HAS_ACTION', 'HAS_APPROVAL']);

      const code = await graph().sessionGraph(s.id, { types: ['code'] });
      expect(actionIds(code)).toEqual([a3.id, a4.id, a5.id]);
      expect(nodesOf(code, 'Approval').map((n) => n.id)).toEqual([`approval:${a3.id}`, `approval:${a5.id}`]);
      expect(edgesOf(code, 'CALLED_BY')).toEqual([]); // their caller, a2, is a skill
      expect(edgesOf(code, 'RETRY_OF').map((e) => [e.from, e.to])).toEqual([[a4.id, a3.id]]);

      const skill = await graph().sessionGraph(s.id, {
        types: ['skill', 'code'],
        status: ['succeeded', 'denied'],
      });
      expect(actionIds(skill)).toEqual([a2.id, a3.id, a4.id]);
      expect(edgesOf(skill, 'CALLED_BY').map((e) => [e.from, e.to, e.properties])).toEqual([
        [a3.id, a2.id, { depth: 1 }],
        [a4.id, a2.id, { depth: 1 }],
      ]);
      expect(nodesOf(skill, 'Approval').map((n) => n.properties.decision)).toEqual(['rejected']);

      const latest = await graph().sessionGraph(s.id, { limit: 1 });
      expect(latest.nodes.map((n) => n.id)).toEqual([s.id, a5.id, `approval:${a5.id}`]);
      const process = await graph().sessionGraph(s.id, { types: ['process'] });
      expect(nodesOf(process, 'Approval').map((n) => n.id)).toEqual([`approval:${a1.id}`]);
      expect(edgesOf(process, 'HAS_APPROVAL').map((e) => e.from)).toEqual([a1.id]);
    });

    it('records who called an action (CALLED_BY {depth}), on records and summaries', async () => {
      const { s, a2, a3, a4 } = await skillRun();
      expect((await graph().getAction(s.id, a3.id))?.calledBy).toStrictEqual({ actionId: a2.id, depth: 1 });
      expect((await graph().getAction(s.id, a2.id))?.calledBy).toBeUndefined();
      expect((await listAll(graph(), s.id, 2)).map((a) => a.calledBy?.actionId)).toEqual([
        undefined,
        undefined,
        a2.id,
        a2.id,
        undefined,
      ]);
      const context = await graph().failureContext(s.id, a4.id, { before: 2 });
      expect(context?.before.map((b) => [b.id, b.calledBy])).toEqual([
        [a2.id, undefined],
        [a3.id, a2.id],
      ]);
      expect(context?.before[0]).not.toHaveProperty('calledBy');
      expect(context?.retryChain.map((e) => [e.id, e.relation, e.calledBy])).toEqual([
        [a3.id, 'ancestor', a2.id],
        [a4.id, 'self', a2.id],
      ]);
      expect((await graph().fileLineage(s.id, 'out.txt')).entries.map((e) => e.calledBy)).toEqual([a2.id]);
    });

    it('failureContext shows a call tree one level down and the chain of callers up (3 deep)', async () => {
      const s = await recorded();
      const r = request();
      const top = await started(s.id, { type: 'skill', operation: 'release' });
      const mid = await started(s.id, {
        type: 'skill',
        operation: 'build',
        calledBy: { actionId: top.id, depth: 1 },
      });
      const inner = await started(s.id, {
        type: 'skill',
        operation: 'test',
        calledBy: { actionId: mid.id, depth: 2 },
      });
      const leaf = await started(s.id, { calledBy: { actionId: inner.id, depth: 3 }, approval: r });
      await graph().recordApprovalDecision(leaf.id, approved);
      await finish(leaf, { status: 'failed', exitCode: 1 });
      const sibling = await started(s.id, {
        type: 'file',
        operation: 'read',
        calledBy: { actionId: mid.id, depth: 2 },
      });
      await finish(sibling);

      const ofLeaf = await graph().failureContext(s.id, leaf.id, { before: 5 });
      expect(ofLeaf?.callers.map((c) => [c.id, c.calledBy])).toEqual([
        [inner.id, mid.id],
        [mid.id, top.id],
        [top.id, undefined],
      ]);
      // Callers are summaries like any other: the same as those of the actions before it.
      expect(ofLeaf?.callers).toStrictEqual([...(ofLeaf?.before ?? [])].reverse());
      expect(ofLeaf?.calls).toEqual([]);
      expect(ofLeaf?.approval).toStrictEqual({ ...r, ...approved });
      expect(ofLeaf?.action.calledBy).toStrictEqual({ actionId: inner.id, depth: 3 });

      const ofMid = await graph().failureContext(s.id, mid.id, { before: 0 });
      expect(ofMid?.callers.map((c) => c.id)).toEqual([top.id]);
      expect(ofMid?.calls.map((c) => [c.id, c.seq, c.status, c.calledBy])).toEqual([
        [inner.id, 3, 'running', mid.id],
        [sibling.id, 5, 'succeeded', mid.id],
      ]);
      expect(ofMid?.approval).toBeNull();

      const ofTop = await graph().failureContext(s.id, top.id, { before: 0 });
      expect(ofTop).toMatchObject({ callers: [], approval: null });
      expect(ofTop?.calls.map((c) => c.id)).toEqual([mid.id]);
      const ofSibling = await graph().failureContext(s.id, sibling.id, { before: 0 });
      expect(ofSibling?.callers.map((c) => c.id)).toEqual([mid.id, top.id]);
    });

    it('rejects a caller the session never recorded, recording nothing', async () => {
      const s = await recorded();
      const other = await recorded();
      const foreign = await started(other.id);
      for (const actionId of ['no-such-action', foreign.id]) {
        const attempt = graph().recordActionStarted(
          start(s.id, { calledBy: { actionId, depth: 1 }, approval: request() }),
        );
        await refuses(attempt, ActionNotRecordedError, { details: { actionId, sessionId: s.id } });
      }
      expect(await graph().lastActionSeq(s.id)).toBe(0);
      expect((await graph().sessionGraph(s.id)).nodes.map((n) => n.label)).toEqual(['Session']);
      const first = await started(s.id);
      expect((await graph().getAction(s.id, first.id))?.seq).toBe(1);
    });
  });
}
