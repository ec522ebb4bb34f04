import { at, completion, listAll, session, start, uid } from './context-graph-records.contract';
import type { ContextGraph } from './context-graph.port';
import type {
  ActionCompletion,
  ActionStart,
  GraphView,
  KernelRunRef,
  ProcessGraphRef,
  SessionRecord,
} from './context-graph.types';

/** The contract's current graph, and a way to close and reopen it on the same store. */
export interface StatefulContractContext {
  graph(): ContextGraph;
  reopen(): Promise<ContextGraph>;
  /** The store checks writes only when it applies them (see `ContextGraphContractOptions`). */
  deferredChecks: boolean;
}

/**
 * The contract for session kernels (`RAN_IN` to a `Kernel`) and background processes (`STARTED` to a
 * `Process`), registered inside `describeContextGraphContract` so every adapter runs it. Kept in its own file:
 * the main contract is long enough.
 */
export function describeStatefulContract(ctx: StatefulContractContext): void {
  describe('kernels and processes', () => {
    const recorded = async (): Promise<SessionRecord> => {
      const s = session();
      await ctx.graph().recordSession(s);
      return s;
    };

    /** Starts and completes one action. */
    const completed = async (
      sessionId: string,
      c: Partial<ActionCompletion>,
      s: Partial<ActionStart> = {},
    ): Promise<ActionStart> => {
      const a = start(sessionId, s);
      await ctx.graph().recordActionStarted(a);
      await ctx.graph().recordActionCompleted(a.id, completion(a, c));
      return a;
    };

    const nodesOf = (view: GraphView, label: string) => view.nodes.filter((n) => n.label === label);
    const edgesOf = (view: GraphView, type: string) => view.edges.filter((e) => e.type === type);
    const labels = (view: GraphView): string[] => view.nodes.map((n) => n.label);

    const processStart = (tier: ProcessGraphRef['tier'], startedAt: string): Partial<ActionStart> => ({
      type: 'process',
      operation: 'start',
      tier,
      input: { op: 'start', command: 'npm run dev' },
      inputSummary: 'start npm run dev',
      startedAt,
    });

    it('links code actions to their session kernel with RAN_IN {executionCount, started}, one Kernel node per kernel', async () => {
      const s = await recorded();
      const py = { id: uid('krn_a'), language: 'python' as const, tier: 'subprocess' as const };
      const sh = { id: uid('krn_b'), language: 'bash' as const, tier: 'pooled' as const };
      const box = { tier: 'pooled' as const, containerId: 'e'.repeat(64) };
      const a1 = await completed(s.id, { kernel: { ...py, executionCount: 1, started: true } });
      const a2 = await completed(
        s.id,
        { kernel: { ...py, executionCount: 2, started: false }, status: 'failed', exitCode: 1 },
        { startedAt: at(3) },
      );
      const a3 = await completed(
        s.id,
        { kernel: { ...sh, executionCount: 1, started: true }, sandbox: box },
        { operation: 'bash', tier: 'pooled', startedAt: at(4) },
      );
      const a4 = await completed(s.id, {}, { startedAt: at(5) });

      const view = await ctx.graph().sessionGraph(s.id);
      expect(nodesOf(view, 'Kernel')).toEqual([
        {
          id: `kernel:${py.id}`,
          label: 'Kernel',
          properties: { id: py.id, sessionId: s.id, language: 'python', tier: 'subprocess' },
        },
        {
          id: `kernel:${sh.id}`,
          label: 'Kernel',
          properties: { id: sh.id, sessionId: s.id, language: 'bash', tier: 'pooled' },
        },
      ]);
      // By the action's seq, then by target id: a3 ran in a kernel inside a pooled container.
      expect(edgesOf(view, 'RAN_IN')).toEqual([
        {
          from: a1.id,
          to: `kernel:${py.id}`,
          type: 'RAN_IN',
          properties: { executionCount: 1, started: true },
        },
        {
          from: a2.id,
          to: `kernel:${py.id}`,
          type: 'RAN_IN',
          properties: { executionCount: 2, started: false },
        },
        {
          from: a3.id,
          to: `kernel:${sh.id}`,
          type: 'RAN_IN',
          properties: { executionCount: 1, started: true },
        },
        { from: a3.id, to: `sandbox:${box.containerId}`, type: 'RAN_IN', properties: {} },
      ]);
      expect((await ctx.graph().getAction(s.id, a2.id))?.kernel).toStrictEqual({
        ...py,
        executionCount: 2,
        started: false,
      });
      expect((await ctx.graph().getAction(s.id, a3.id))?.sandbox).toEqual(box);
      expect((await ctx.graph().getAction(s.id, a4.id))?.kernel).toBeUndefined();
      expect((await listAll(ctx.graph(), s.id, 3)).map((a) => a.kernel)).toEqual([
        { ...py, executionCount: 1, started: true },
        { ...py, executionCount: 2, started: false },
        { ...sh, executionCount: 1, started: true },
        undefined,
      ]);
    });

    it('links a process action to the process it started with STARTED, keeping a 64 KiB command whole', async () => {
      const s = await recorded();
      const web: ProcessGraphRef = {
        id: uid('prc_a'),
        name: 'web',
        command: 'npm run dev -- --port 3000',
        tier: 'subprocess',
        startedAt: at(1.5),
      };
      const long: ProcessGraphRef = {
        id: uid('prc_b'),
        command: `echo ${'x'.repeat(64 * 1024 - 5)}`,
        tier: 'pooled',
        startedAt: at(3.5),
      };
      const a1 = await completed(s.id, { startedProcess: web }, processStart('subprocess', at(1)));
      const a2 = await completed(s.id, { startedProcess: long }, processStart('pooled', at(3)));
      const a3 = await completed(s.id, {}, { type: 'process', operation: 'list', tier: 'engine' });

      const view = await ctx.graph().sessionGraph(s.id);
      expect(nodesOf(view, 'Process')).toEqual([
        {
          id: `process:${web.id}`,
          label: 'Process',
          properties: { ...web, sessionId: s.id },
        },
        {
          id: `process:${long.id}`,
          label: 'Process',
          properties: { ...long, sessionId: s.id },
        },
      ]);
      expect(nodesOf(view, 'Process')[1].properties).not.toHaveProperty('name');
      expect(edgesOf(view, 'STARTED')).toEqual([
        { from: a1.id, to: `process:${web.id}`, type: 'STARTED', properties: {} },
        { from: a2.id, to: `process:${long.id}`, type: 'STARTED', properties: {} },
      ]);
      expect((await ctx.graph().getAction(s.id, a1.id))?.startedProcess).toStrictEqual(web);
      expect((await ctx.graph().getAction(s.id, a2.id))?.startedProcess).toStrictEqual(long);
      expect((await ctx.graph().getAction(s.id, a3.id))?.startedProcess).toBeUndefined();
      expect((await listAll(ctx.graph(), s.id)).map((a) => a.startedProcess)).toEqual([web, long, undefined]);
    });

    it('links a proxied connection to the server it reached with REACHED {port}, where the view holds its node', async () => {
      const s = await recorded();
      const web: ProcessGraphRef = {
        id: uid('prc_w'),
        command: 'python3 -m http.server',
        tier: 'pooled',
        startedAt: at(1),
      };
      const k = { id: uid('krn_k'), language: 'python' as const, tier: 'pooled' as const };
      await completed(s.id, { startedProcess: web }, processStart('pooled', at(1)));
      await completed(s.id, { kernel: { ...k, executionCount: 1, started: true } }, { startedAt: at(2) });
      const connect = (seconds: number): Partial<ActionStart> => ({
        type: 'process',
        operation: 'connect',
        tier: 'pooled',
        input: { op: 'connect', port: 8000, method: 'GET', path: '/' },
        inputSummary: 'GET / on port 8000',
        startedAt: at(seconds),
      });
      const toProcess = { kind: 'process' as const, id: web.id, port: 8000 };
      const toKernel = { kind: 'kernel' as const, id: k.id, port: 5000 };
      // A server the store has no node for (a process started before the engine recorded processes).
      const toUnknown = { kind: 'process' as const, id: uid('prc_x'), port: 9000 };
      const c1 = await completed(s.id, { reached: toProcess }, connect(3));
      const c2 = await completed(s.id, { reached: toKernel }, connect(4));
      const c3 = await completed(s.id, { reached: toUnknown }, connect(5));

      const reachedEdges = (view: GraphView) => edgesOf(view, 'REACHED');
      expect(reachedEdges(await ctx.graph().sessionGraph(s.id))).toEqual([
        { from: c1.id, to: `process:${web.id}`, type: 'REACHED', properties: { port: 8000 } },
        { from: c2.id, to: `kernel:${k.id}`, type: 'REACHED', properties: { port: 5000 } },
      ]);
      // Without the code cell, the kernel's node is not in the view, nor the edge to it.
      expect(reachedEdges(await ctx.graph().sessionGraph(s.id, { types: ['process'] }))).toEqual([
        { from: c1.id, to: `process:${web.id}`, type: 'REACHED', properties: { port: 8000 } },
      ]);
      const graph = await ctx.reopen();
      expect((await graph.getAction(s.id, c1.id))?.reached).toStrictEqual(toProcess);
      expect((await graph.getAction(s.id, c2.id))?.reached).toStrictEqual(toKernel);
      expect((await graph.getAction(s.id, c3.id))?.reached).toStrictEqual(toUnknown);
      expect((await listAll(graph, s.id)).map((a) => a.reached)).toEqual([
        undefined,
        undefined,
        toProcess,
        toKernel,
        toUnknown,
      ]);
    });

    /**
     * a1 starts process p1 · a2 (code) writes app.js in kernel k (started) inside container box, fails ·
     * a3 starts p0 (a smaller id than p1) · a4 retries a2 in k (not started), fails · a plan step attempted by
     * a2 then a4.
     */
    async function mixed() {
      const s = await recorded();
      const k: Omit<KernelRunRef, 'executionCount' | 'started'> = {
        id: uid('krn'),
        language: 'node',
        tier: 'pooled',
      };
      const box = { tier: 'pooled' as const, containerId: 'f'.repeat(64) };
      const p1: ProcessGraphRef = {
        id: uid('prc_b'),
        command: 'python -m http.server',
        tier: 'pooled',
        startedAt: at(1),
      };
      const p0: ProcessGraphRef = {
        id: uid('prc_a'),
        name: 'db',
        command: 'redis-server',
        tier: 'pooled',
        startedAt: at(3),
      };
      const a1 = await completed(s.id, { startedProcess: p1 }, processStart('pooled', at(1)));
      const a2 = await completed(
        s.id,
        {
          kernel: { ...k, executionCount: 1, started: true },
          sandbox: box,
          status: 'failed',
          exitCode: 1,
          files: [{ path: 'app.js', access: 'write' }],
        },
        { operation: 'node', tier: 'pooled', startedAt: at(2) },
      );
      const a3 = await completed(s.id, { startedProcess: p0 }, processStart('pooled', at(3)));
      const a4 = await completed(
        s.id,
        { kernel: { ...k, executionCount: 2, started: false }, status: 'failed', exitCode: 1 },
        { operation: 'node', tier: 'pooled', startedAt: at(4), retryOf: a2.id },
      );
      await ctx.graph().recordPlan({
        id: uid('plan'),
        sessionId: s.id,
        status: 'running',
        maxParallel: 1,
        createdAt: at(0),
        steps: [
          {
            stepId: 'serve',
            version: 1,
            status: 'running',
            allowFailure: false,
            dependsOn: [],
            attempts: [a2.id, a4.id],
          },
        ],
      });
      return { s, k, box, p0, p1, a1, a2, a3, a4 };
    }

    it('sessionGraph puts kernels (by id) and processes (by id) between sandboxes and plans, and RAN_IN then STARTED before the plan edges', async () => {
      const m = await mixed();
      const view = await ctx.graph().sessionGraph(m.s.id);
      expect(labels(view)).toEqual([
        'Session',
        ...['Action', 'Action', 'Action', 'Action'],
        'File',
        'Sandbox',
        'Kernel',
        'Process',
        'Process',
        'Plan',
        'Step',
      ]);
      expect(nodesOf(view, 'Process').map((n) => n.id)).toEqual([`process:${m.p0.id}`, `process:${m.p1.id}`]);
      expect(view.edges.map((e) => `${e.type} ${e.from} -> ${e.to}`)).toEqual([
        ...[m.a1, m.a2, m.a3, m.a4].map((a) => `HAS_ACTION ${m.s.id} -> ${a.id}`),
        `NEXT ${m.a1.id} -> ${m.a2.id}`,
        `NEXT ${m.a2.id} -> ${m.a3.id}`,
        `NEXT ${m.a3.id} -> ${m.a4.id}`,
        `WROTE ${m.a2.id} -> file:${m.s.id}:app.js`,
        `RETRY_OF ${m.a4.id} -> ${m.a2.id}`,
        `RAN_IN ${m.a2.id} -> kernel:${m.k.id}`,
        `RAN_IN ${m.a2.id} -> sandbox:${m.box.containerId}`,
        `RAN_IN ${m.a4.id} -> kernel:${m.k.id}`,
        `STARTED ${m.a1.id} -> process:${m.p1.id}`,
        `STARTED ${m.a3.id} -> process:${m.p0.id}`,
        `HAS_PLAN ${m.s.id} -> ${view.nodes[view.nodes.length - 2].id}`,
        `HAS_STEP ${view.nodes[view.nodes.length - 2].id} -> ${view.nodes[view.nodes.length - 1].id}`,
        `ATTEMPT ${view.nodes[view.nodes.length - 1].id} -> ${m.a2.id}`,
        `ATTEMPT ${view.nodes[view.nodes.length - 1].id} -> ${m.a4.id}`,
      ]);
      expect(await ctx.graph().sessionGraph(m.s.id)).toEqual(view); // deterministic
    });

    it('sessionGraph filters keep the kernels, processes and edges of the included actions only', async () => {
      const m = await mixed();
      const processes = await ctx.graph().sessionGraph(m.s.id, { types: ['process'] });
      expect(labels(processes)).toEqual([
        'Session',
        'Action',
        'Action',
        'Process',
        'Process',
        'Plan',
        'Step',
      ]);
      expect(edgesOf(processes, 'STARTED')).toHaveLength(2);
      expect(edgesOf(processes, 'RAN_IN')).toEqual([]);

      const code = await ctx.graph().sessionGraph(m.s.id, { types: ['code'] });
      expect(labels(code)).toEqual([
        'Session',
        'Action',
        'Action',
        'File',
        'Sandbox',
        'Kernel',
        'Plan',
        'Step',
      ]);
      expect(edgesOf(code, 'RAN_IN').map((e) => [e.from, e.to, e.properties])).toEqual([
        [m.a2.id, `kernel:${m.k.id}`, { executionCount: 1, started: true }],
        [m.a2.id, `sandbox:${m.box.containerId}`, {}],
        [m.a4.id, `kernel:${m.k.id}`, { executionCount: 2, started: false }],
      ]);
      expect(edgesOf(code, 'STARTED')).toEqual([]);

      // The kernel is kept for the one included cell; the cell that began it is not there.
      const latest = await ctx.graph().sessionGraph(m.s.id, { limit: 1 });
      expect(labels(latest)).toEqual(['Session', 'Action', 'Kernel', 'Plan', 'Step']);
      expect(edgesOf(latest, 'RAN_IN').map((e) => [e.from, e.to])).toEqual([[m.a4.id, `kernel:${m.k.id}`]]);

      const started = await ctx.graph().sessionGraph(m.s.id, { status: ['succeeded'], since: at(3) });
      expect(labels(started)).toEqual(['Session', 'Action', 'Process', 'Plan', 'Step']);
      expect(edgesOf(started, 'STARTED').map((e) => e.to)).toEqual([`process:${m.p0.id}`]);

      const none = await ctx.graph().sessionGraph(m.s.id, { types: ['kernel'] });
      expect(labels(none)).toEqual(['Session', 'Plan', 'Step']);
    });

    it('failureContext names the kernel the action ran in and whether it began it (state lost), else null', async () => {
      const m = await mixed();
      const began = await ctx.graph().failureContext(m.s.id, m.a2.id, { before: 5 });
      expect(began?.kernel).toStrictEqual({ ...m.k, executionCount: 1, started: true });
      expect(began?.action.kernel).toStrictEqual(began?.kernel);
      const kept = await ctx.graph().failureContext(m.s.id, m.a4.id, { before: 5 });
      expect(kept?.kernel).toStrictEqual({ ...m.k, executionCount: 2, started: false });
      expect((await ctx.graph().failureContext(m.s.id, m.a1.id, { before: 5 }))?.kernel).toBeNull();
      expect(
        (await ctx.graph().failureContext(m.s.id, m.a3.id, { before: 5 }))?.action.startedProcess,
      ).toEqual(m.p0);
      // Summaries stay small: no kernel or process on the actions before it or in its retry chain.
      for (const summary of [...(kept?.before ?? []), ...(kept?.retryChain ?? [])]) {
        expect(summary).not.toHaveProperty('kernel');
        expect(summary).not.toHaveProperty('startedProcess');
      }
      expect(kept?.before).toHaveLength(3);
    });

    it('keeps kernels and processes across close and reopen; a later cell still reaches the one Kernel node', async () => {
      const m = await mixed();
      const view = await ctx.graph().sessionGraph(m.s.id);
      const actions = await listAll(ctx.graph(), m.s.id);
      await ctx.reopen();
      expect(await ctx.graph().sessionGraph(m.s.id)).toEqual(view);
      expect(await listAll(ctx.graph(), m.s.id)).toEqual(actions);

      const a5 = await completed(
        m.s.id,
        { kernel: { ...m.k, executionCount: 3, started: false } },
        { operation: 'node', tier: 'pooled', startedAt: at(6) },
      );
      const after = await ctx.graph().sessionGraph(m.s.id);
      expect(nodesOf(after, 'Kernel')).toEqual(nodesOf(view, 'Kernel'));
      expect(
        edgesOf(after, 'RAN_IN')
          .filter((e) => e.to === `kernel:${m.k.id}`)
          .map((e) => e.from),
      ).toEqual([m.a2.id, m.a4.id, a5.id]);
    });
  });
}
