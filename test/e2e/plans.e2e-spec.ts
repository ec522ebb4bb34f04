import { EngineHarness } from '../support/engine-harness';

const bash = (code: string) => ({ type: 'code', language: 'bash', code });
/** Prints its start and end times (ns) around a sleep. */
const timed = (seconds: number) => bash(`date +%s%N; sleep ${seconds}; date +%s%N`);

describe('plans', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '0' });
  });
  afterAll(() => engine.stop());

  const submit = (sid: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    engine.request('POST', `/v1/sessions/${sid}/plans`, body, { headers });
  const action = async (sid: string, id: string): Promise<any> =>
    (await engine.request('GET', `/v1/sessions/${sid}/actions/${id}`)).body;
  const span = async (sid: string, step: any): Promise<[number, number]> => {
    const r = await action(sid, step.attempts.at(-1).actionId);
    const [start, end] = r.stdout.trim().split('\n').map(Number);
    return [start / 1e6, end / 1e6];
  };
  const waitFor = async (sid: string, planId: string, pred: (p: any) => boolean): Promise<any> => {
    for (let i = 0; i < 300; i++) {
      const p = (await engine.request('GET', `/v1/sessions/${sid}/plans/${planId}`)).body;
      if (pred(p)) return p;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('plan did not reach the expected state');
  };

  it('runs a diamond in dependency order, the parallel branches overlapping with maxParallel 2', async () => {
    const sid = await engine.createSession({ maxConcurrentActions: 2 });
    const res = await submit(sid, {
      goal: 'diamond',
      maxParallel: 2,
      wait: true,
      steps: [
        { id: 'a', action: timed(0.2) },
        { id: 'b', action: timed(0.8), dependsOn: ['a'] },
        { id: 'c', action: timed(0.8), dependsOn: ['a'] },
        { id: 'd', action: timed(0.1), dependsOn: ['b', 'c'] },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('succeeded');
    const steps = Object.fromEntries(res.body.steps.map((s: any) => [s.id, s]));
    expect(Object.values(steps).map((s: any) => s.status)).toEqual([
      'succeeded',
      'succeeded',
      'succeeded',
      'succeeded',
    ]);
    const [a, b, c, d] = await Promise.all(['a', 'b', 'c', 'd'].map((id) => span(sid, steps[id])));
    expect(b[0]).toBeGreaterThanOrEqual(a[1]);
    expect(c[0]).toBeGreaterThanOrEqual(a[1]);
    expect(Math.max(b[0], c[0])).toBeLessThan(Math.min(b[1], c[1])); // b and c overlap
    expect(d[0]).toBeGreaterThanOrEqual(Math.max(b[1], c[1]));
    expect(steps.a.startedAt).toBeDefined();
    expect(steps.d.endedAt).toBeDefined();
  });

  it.each([
    [
      'a cycle',
      [
        { id: 'a', action: bash('true'), dependsOn: ['b'] },
        { id: 'b', action: bash('true'), dependsOn: ['a'] },
      ],
      'dependency cycle: a → b → a',
    ],
    [
      'an unknown dependency',
      [{ id: 'a', action: bash('true'), dependsOn: ['ghost'] }],
      'step "a" depends on unknown step "ghost"',
    ],
    [
      'a duplicate id',
      [
        { id: 'a', action: bash('true') },
        { id: 'a', action: bash('true') },
      ],
      'duplicate step id "a"',
    ],
    [
      'an invalid action',
      [{ id: 'a', action: { type: 'code', language: 'cobol', code: 'x' } }],
      'steps[0].action.language',
    ],
  ])('refuses %s with 400 naming the steps, and runs nothing', async (_, steps, expected) => {
    const sid = await engine.createSession();
    const res = await submit(sid, { steps });
    expect(res.status).toBe(400);
    expect(
      res.body.error.fields
        .map((e: { path: string; message: string }) => `${e.path}: ${e.message}`)
        .join('\n'),
    ).toContain(expected);
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions).toEqual([]);
  });

  /** prepare → compute → report, where compute fails (its input is missing) until a replan fixes it. */
  const failsAtCompute = () => [
    { id: 'prepare', action: bash('echo data > input.txt') },
    { id: 'compute', action: bash('cat missing.txt'), dependsOn: ['prepare'] },
    { id: 'report', action: bash('cat result.txt'), dependsOn: ['compute'] },
  ];

  it('stops at a failing step with its failure context; a replan replaces it and the plan finishes', async () => {
    const sid = await engine.createSession();
    const res = await submit(sid, {
      wait: true,
      steps: failsAtCompute(),
    });
    expect(res.body.status).toBe('needs_replan');
    expect(res.body.failedStep).toBe('compute');
    expect(res.body.failureContext.action).toMatchObject({
      status: 'failed',
      exitCode: 1,
      input: { code: 'cat missing.txt' },
    });
    expect(res.body.failureContext.action.stderrTail).toContain('missing.txt');
    const report = res.body.steps.find((s: any) => s.id === 'report');
    expect(report.status).toBe('pending');

    const replanned = await engine.request('POST', `/v1/sessions/${sid}/plans/${res.body.id}/replan`, {
      wait: true,
      steps: [{ id: 'compute', action: bash('wc -c < input.txt > result.txt'), dependsOn: ['prepare'] }],
    });
    expect(replanned.status).toBe(200);
    expect(replanned.body.status).toBe('succeeded');
    const compute = replanned.body.steps.find((s: any) => s.id === 'compute');
    expect(compute).toMatchObject({ version: 2, status: 'succeeded' });
    expect(compute.replaced[0]).toMatchObject({ version: 1, status: 'failed' });
    // Nothing of version 1 stays on version 2: its times and failure are its own.
    expect(compute.attempts).toHaveLength(1);
    expect(compute.reason).toBeUndefined();
    expect(Date.parse(compute.endedAt)).toBeGreaterThanOrEqual(Date.parse(compute.startedAt));
    expect(Date.parse(compute.startedAt)).toBeGreaterThanOrEqual(Date.parse(compute.replaced[0].endedAt));
    const reportStep = replanned.body.steps.find((s: any) => s.id === 'report');
    expect((await action(sid, reportStep.attempts[0].actionId)).stdout).toBe('5\n');
    // Once ended, a plan cannot be replanned.
    const late = await engine.request('POST', `/v1/sessions/${sid}/plans/${res.body.id}/replan`, {
      steps: [{ id: 'extra', action: bash('true') }],
    });
    expect(late.status).toBe(409);
  });

  it('records the replanned plan in the context graph: steps, versions, attempts, and the failed step', async () => {
    const sid = await engine.createSession();
    const res = await submit(sid, {
      goal: 'graph',
      wait: true,
      steps: failsAtCompute(),
    });
    expect(res.body.status).toBe('needs_replan');
    const planId = res.body.id;
    const replanned = await engine.request('POST', `/v1/sessions/${sid}/plans/${planId}/replan`, {
      wait: true,
      steps: [{ id: 'compute', action: bash('wc -c < input.txt > result.txt'), dependsOn: ['prepare'] }],
    });
    expect(replanned.body.status).toBe('succeeded');
    const steps = Object.fromEntries(replanned.body.steps.map((s: any) => [s.id, s]));
    const failedActionId = steps.compute.replaced[0].attempts[0].actionId;
    const actionOf = (id: string) => steps[id].attempts[0].actionId;
    const node = (id: string, version: number) => `step:${planId}:${id}:${version}`;

    const graph = await engine.request('GET', `/v1/sessions/${sid}/graph`);
    expect(graph.status).toBe(200);
    expect(graph.body.nodes.find((n: any) => n.id === planId)).toEqual({
      id: planId,
      label: 'Plan',
      properties: {
        goal: 'graph',
        status: 'succeeded',
        createdAt: replanned.body.createdAt,
        endedAt: replanned.body.endedAt,
        maxParallel: 1,
      },
    });
    expect(graph.body.nodes.filter((n: any) => n.label === 'Step').map((n: any) => n.id)).toEqual([
      node('compute', 1),
      node('compute', 2),
      node('prepare', 1),
      node('report', 1),
    ]);
    const edges = (type: string): string[] =>
      graph.body.edges.filter((e: any) => e.type === type).map((e: any) => `${e.from} -> ${e.to}`);
    expect(edges('HAS_PLAN')).toEqual([`${sid} -> ${planId}`]);
    expect(edges('HAS_STEP')).toEqual(
      [node('compute', 1), node('compute', 2), node('prepare', 1), node('report', 1)].map(
        (n) => `${planId} -> ${n}`,
      ),
    );
    expect(edges('DEPENDS_ON')).toEqual([
      `${node('compute', 1)} -> ${node('prepare', 1)}`,
      `${node('compute', 2)} -> ${node('prepare', 1)}`,
      `${node('report', 1)} -> ${node('compute', 2)}`,
    ]);
    expect(edges('ATTEMPT')).toEqual([
      `${node('compute', 1)} -> ${failedActionId}`,
      `${node('compute', 2)} -> ${actionOf('compute')}`,
      `${node('prepare', 1)} -> ${actionOf('prepare')}`,
      `${node('report', 1)} -> ${actionOf('report')}`,
    ]);
    expect(edges('REPLACES')).toEqual([`${node('compute', 2)} -> ${node('compute', 1)}`]);

    const ctx = await engine.request('GET', `/v1/sessions/${sid}/actions/${failedActionId}/context`);
    expect(ctx.status).toBe(200);
    expect(ctx.body.planStep).toEqual({ planId, stepId: 'compute', version: 1 });
  });

  it('allowFailure lets the plan go on: the failed step dependents are skipped, the rest runs', async () => {
    const sid = await engine.createSession();
    const res = await submit(sid, {
      wait: true,
      steps: [
        { id: 'optional', action: bash('exit 3'), allowFailure: true },
        { id: 'after-optional', action: bash('true'), dependsOn: ['optional'] },
        { id: 'independent', action: bash('echo fine') },
      ],
    });
    expect(res.body.status).toBe('succeeded');
    const status = Object.fromEntries(res.body.steps.map((s: any) => [s.id, s.status]));
    expect(status).toEqual({ optional: 'failed', 'after-optional': 'skipped', independent: 'succeeded' });
  });

  it('retries a step, linking each attempt to the previous one', async () => {
    const sid = await engine.createSession();
    const res = await submit(sid, {
      wait: true,
      steps: [
        {
          id: 'flaky',
          action: bash('if [ -f flag ]; then echo second; else touch flag; exit 1; fi'),
          retry: { attempts: 2, backoffMs: 50 },
        },
      ],
    });
    expect(res.body.status).toBe('succeeded');
    const [first, second] = res.body.steps[0].attempts;
    expect(first.status).toBe('failed');
    expect(second.status).toBe('succeeded');
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    expect(graph.edges).toContainEqual(
      expect.objectContaining({ type: 'RETRY_OF', from: second.actionId, to: first.actionId }),
    );
  });

  it('cancel stops a running step (its action cancelled) and the steps after it', async () => {
    const sid = await engine.createSession();
    const res = await submit(sid, {
      steps: [
        { id: 'long', action: bash('sleep 30') },
        { id: 'next', action: bash('true'), dependsOn: ['long'] },
      ],
    });
    expect(res.status).toBe(202);
    const running = await waitFor(sid, res.body.id, (p) => p.steps[0].attempts.length === 1);
    const cancelled = await engine.request('POST', `/v1/sessions/${sid}/plans/${res.body.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('cancelled');
    expect(cancelled.body.steps.map((s: any) => s.status)).toEqual(['cancelled', 'cancelled']);
    expect((await action(sid, running.steps[0].attempts[0].actionId)).status).toBe('cancelled');
    expect((await engine.request('POST', `/v1/sessions/${sid}/plans/${res.body.id}/cancel`)).status).toBe(
      409,
    );
  });

  it('an Idempotency-Key returns the same plan instead of a second one', async () => {
    const sid = await engine.createSession();
    const body = { wait: true, steps: [{ id: 'count', action: bash('echo x >> n.txt') }] };
    const first = await submit(sid, body, { 'Idempotency-Key': 'plan-key' });
    const second = await submit(sid, body, { 'Idempotency-Key': 'plan-key' });
    expect(second.body.id).toBe(first.body.id);
    expect((await engine.request('GET', `/v1/sessions/${sid}/plans`)).body.plans).toHaveLength(1);
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions).toHaveLength(1);
  });
});
