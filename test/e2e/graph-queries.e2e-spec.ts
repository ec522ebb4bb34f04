/**
 * Graph queries over HTTP on the embedded store: the failure context a reflection loop reads, file lineage,
 * and the filtered session graph a planner pulls, with their validation (400 naming the field, 404 for an
 * unknown session or action) and the headers saying where the graph stands.
 */
import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';

interface Summary {
  id: string;
  seq: number;
  status: string;
  relation?: string;
  access?: string[];
}

describe('graph queries (embedded store)', () => {
  let engine: EngineHarness;
  let sid: string;
  /** write app.py (1/0) · run it (writes out.txt, fails) · read app.py · fix it · retry the run. */
  let ids: { write: string; run: string; read: string; fix: string; retry: string };

  beforeAll(async () => {
    engine = await EngineHarness.start();
    sid = await engine.createSession({ metadata: { purpose: 'graph-queries' } });
    const write = await engine.action(sid, {
      type: 'file',
      op: 'write',
      path: 'src/app.py',
      content: 'print(1/0)\n',
    });
    const run = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: "open('out.txt', 'w').write('partial')\nexec(open('src/app.py').read())",
    });
    expect(run).toMatchObject({ status: 'failed', exitCode: 1 });
    const read = await engine.action(sid, { type: 'file', op: 'read', path: 'src/app.py' });
    const fix = await engine.action(sid, {
      type: 'file',
      op: 'edit',
      path: 'src/app.py',
      find: '1/0',
      replace: '1/1',
    });
    const retried = await engine.request('POST', `/v1/sessions/${sid}/actions/${run.id}/retry`, {});
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'succeeded', stdout: '1.0\n' });
    ids = { write: write.id, run: run.id, read: read.id, fix: fix.id, retry: retried.body.id };
  });
  afterAll(() => engine.stop());

  const get = (path: string) => engine.request('GET', `/v1/sessions/${sid}${path}`);

  it('GET …/actions/:id/context: the failed action, its retries, what came before, its files', async () => {
    const res = await get(`/actions/${ids.run}/context?before=1`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-graph-store')).toBe('embedded');
    expect(res.headers.get('x-graph-status')).toBe('ok');
    expect(res.headers.get('x-graph-lag')).toBe('0');
    const ctx = res.body;
    expect(ctx.action).toMatchObject({
      id: ids.run,
      seq: 2,
      status: 'failed',
      exitCode: 1,
      input: { type: 'code', language: 'python' },
      files: [{ path: 'out.txt', access: 'write' }],
    });
    expect(ctx.action.outputExcerpt).toContain('ZeroDivisionError');
    expect(ctx.retryChain.map((e: Summary) => [e.id, e.relation, e.status])).toEqual([
      [ids.run, 'self', 'failed'],
      [ids.retry, 'descendant', 'succeeded'],
    ]);
    expect(ctx.before.map((a: Summary) => a.id)).toEqual([ids.write]);
    expect(ctx.files).toEqual([{ path: 'out.txt', access: ['write'] }]); // nothing wrote it before
    expect(ctx.planStep).toBeNull();
  });

  it('the retry’s context points back at the original and at who last wrote its files', async () => {
    const ctx = (await get(`/actions/${ids.retry}/context`)).body;
    expect(ctx.retryChain.map((e: Summary) => [e.id, e.relation])).toEqual([
      [ids.run, 'ancestor'],
      [ids.retry, 'self'],
    ]);
    expect(ctx.action.retryOf).toBe(ids.run);
    // Default `before` is 10: everything earlier in the session.
    expect(ctx.before.map((a: Summary) => a.seq)).toEqual([1, 2, 3, 4]);
    expect(ctx.files).toEqual([
      {
        path: 'out.txt',
        access: ['write'],
        lastWrittenBy: expect.objectContaining({ id: ids.run, status: 'failed' }),
      },
    ]);
  });

  it('GET …/files/lineage: who wrote and read a file, in order', async () => {
    const res = await get('/files/lineage?path=src/app.py');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-graph-lag')).toBe('0');
    expect(res.body.path).toBe('src/app.py');
    expect(res.body.entries.map((e: Summary) => [e.id, e.access])).toEqual([
      [ids.write, ['write']],
      [ids.read, ['read']],
      [ids.fix, ['read', 'write']],
    ]);
    expect((await get('/files/lineage?path=./src//app.py')).body).toEqual(res.body);
    expect((await get('/files/lineage?path=never.txt')).body).toEqual({ path: 'never.txt', entries: [] });
  });

  it('GET …/graph filters by types, status, since and limit', async () => {
    const actions = async (query: string): Promise<string[]> => {
      const res = await get(`/graph?${query}`);
      expect(res.status).toBe(200);
      return res.body.nodes
        .filter((n: { label: string }) => n.label === 'Action')
        .map((n: { id: string }) => n.id);
    };
    expect(await actions('types=code')).toEqual([ids.run, ids.retry]);
    expect(await actions('status=failed')).toEqual([ids.run]);
    expect(await actions('types=file&status=succeeded&limit=2')).toEqual([ids.read, ids.fix]);
    expect(await actions('types=code&types=file&limit=1')).toEqual([ids.retry]);
    expect(await actions('types=code,file&limit=1')).toEqual([ids.retry]);
    const readAction = (await get(`/actions/${ids.read}`)).body;
    expect(await actions(`since=${encodeURIComponent(readAction.startedAt)}`)).toEqual([
      ids.read,
      ids.fix,
      ids.retry,
    ]);

    const code = (await get('/graph?types=code')).body;
    expect(code.edges).toContainEqual({ from: ids.retry, to: ids.run, type: 'RETRY_OF', properties: {} });
    expect(code.edges.filter((e: { type: string }) => e.type === 'NEXT')).toEqual([]); // not consecutive
    expect(
      code.nodes.filter((n: { label: string }) => n.label === 'File').map((n: { id: string }) => n.id),
    ).toEqual([`file:${sid}:out.txt`]);
  });

  it.each([
    ['/graph?types=shell', 'types'],
    ['/graph?status=done', 'status'],
    ['/graph?limit=0', 'limit'],
    ['/graph?limit=10001', 'limit'],
    ['/graph?since=yesterday', 'since'],
    ['/graph?colour=red', 'colour'],
    ['/actions/ACTION/context?before=101', 'before'],
    ['/actions/ACTION/context?before=some', 'before'],
    ['/files/lineage', 'path'],
    ['/files/lineage?path=', 'path'],
  ])('GET …%s answers 400 naming %s', async (path, field) => {
    const res = await get(path.replace('ACTION', ids.run));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual([field]);
  });

  it('answers 404 for an unknown session or action', async () => {
    for (const path of ['/graph', `/actions/${ids.run}/context`, '/files/lineage?path=a']) {
      const res = await engine.request('GET', `/v1/sessions/ses_nope${path}`);
      expect(res.status).toBe(404);
    }
    const res = await get('/actions/act_nope/context');
    expect(res.status).toBe(404);
    expect(res.body.error.message).toContain('act_nope');
  });

  it('/health reports the embedded graph with nothing waiting', async () => {
    const res = await engine.request('GET', '/health');
    expect(res.body.graph).toEqual({ store: 'embedded', status: 'ok', backlog: 0 });
  });
});
