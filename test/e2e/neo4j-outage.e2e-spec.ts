/**
 * Nothing is lost while Neo4j is down: the engine runs on SWITCHYARD_GRAPH=neo4j, the test Neo4j is stopped
 * mid-run (`scripts/neo4j.sh stop`), actions keep running and are answered as usual, `/health` and every graph
 * read say the copy lags, then Neo4j is started again on the same data and the outbox drains until both stores
 * hold the same nodes and edges.
 *
 * Stops and restarts the shared test instance: the e2e project runs one file at a time, so no other test is
 * using it meanwhile.
 */
import { holdTestNeo4j, neo4jScript, neo4jTestServer } from '../../libs/context-graph/src/testing';
import { EngineHarness } from '../support/engine-harness';
import { compareStores, neo4jEnv, waitForGraph, withEngineStores } from '../support/neo4j-graph';

jest.setTimeout(180_000);

const server = neo4jTestServer();
// Other test runs on this machine share the instance this file stops; the lock is held until the suite is done.
const testNeo4j = holdTestNeo4j(server);

describe('Neo4j outage', () => {
  let engine: EngineHarness;
  let neo4jDown = false;

  beforeAll(async () => {
    engine = await EngineHarness.start(neo4jEnv(server));
  });
  afterAll(async () => {
    // Whatever happened above, leave the shared instance running for the files after this one.
    if (neo4jDown) await neo4jScript('start', server.instance);
    await engine.stop();
  });

  it('keeps running actions while Neo4j is down, then catches up and agrees on every node and edge', async () => {
    const s1 = await engine.createSession({ metadata: { phase: 'before' } });
    await engine.action(s1, { type: 'file', op: 'write', path: 'notes.md', content: '# before\n' });
    await waitForGraph(engine, (g) => g.status === 'ok' && g.backlog === 0);

    await neo4jScript('stop', server.instance);
    neo4jDown = true;

    // Actions keep running and answer as usual, in the session from before and in a new one.
    const s2 = await engine.createSession({ metadata: { phase: 'during' } });
    const results = [
      await engine.action(s1, {
        type: 'file',
        op: 'edit',
        path: 'notes.md',
        find: 'before',
        replace: 'during',
      }),
      await engine.action(s1, { type: 'code', language: 'python', code: "open('out.txt','w').write('x')" }),
      await engine.action(s2, { type: 'code', language: 'python', code: 'raise SystemExit(4)' }),
      await engine.action(s2, { type: 'file', op: 'write', path: 'b.txt', content: 'b' }),
      await engine.action(s2, { type: 'file', op: 'read', path: 'b.txt' }),
    ];
    expect(results.map((r) => r.status)).toEqual([
      'succeeded',
      'succeeded',
      'failed',
      'succeeded',
      'succeeded',
    ]);
    const retried = await engine.request('POST', `/v1/sessions/${s2}/actions/${results[2].id}/retry`, {});
    expect(retried.body.status).toBe('failed');
    const deleted = await engine.createSession();
    await engine.action(deleted, { type: 'file', op: 'write', path: 'c.txt', content: 'c' });
    expect((await engine.request('DELETE', `/v1/sessions/${deleted}`)).status).toBe(204);

    const degraded = await waitForGraph(engine, (g) => g.status === 'degraded');
    expect(degraded).toMatchObject({ store: 'neo4j', status: 'degraded' });
    expect(degraded.backlog).toBeGreaterThan(0);

    // Reads answer from the local file, complete, and say Neo4j lags behind them.
    const graph = await engine.request('GET', `/v1/sessions/${s2}/graph`);
    expect(graph.status).toBe(200);
    expect(graph.headers.get('x-graph-status')).toBe('degraded');
    expect(Number(graph.headers.get('x-graph-lag'))).toBeGreaterThan(0);
    expect(graph.body.nodes.filter((n: { label: string }) => n.label === 'Action')).toHaveLength(4);
    const ctx = await engine.request('GET', `/v1/sessions/${s2}/actions/${retried.body.id}/context`);
    expect(ctx.status).toBe(200);
    expect(ctx.body.retryChain.map((e: { relation: string }) => e.relation)).toEqual(['ancestor', 'self']);
    expect(ctx.headers.get('x-graph-status')).toBe('degraded');

    await neo4jScript('start', server.instance);
    neo4jDown = false;
    expect(await waitForGraph(engine, (g) => g.status === 'ok' && g.backlog === 0)).toEqual({
      store: 'neo4j',
      status: 'ok',
      backlog: 0,
    });

    await withEngineStores(engine.dataDir, server, async (local, remote) => {
      const totals = await compareStores(local, remote, [s1, s2, deleted], testNeo4j.admin());
      // 3 sessions, 8 actions, 4 files; 8 HAS_ACTION, 5 NEXT, 7 READ/WROTE, 1 RETRY_OF.
      expect(totals).toEqual({ nodes: 15, edges: 21 });
      const ended = (await remote.sessionGraph(deleted)).nodes[0].properties;
      expect(ended).toMatchObject({ endReason: 'deleted' });
    });
    const after = await engine.request('GET', `/v1/sessions/${s2}/graph`);
    expect(after.headers.get('x-graph-status')).toBe('ok');
    expect(after.headers.get('x-graph-lag')).toBe('0');
    expect(after.body).toEqual(graph.body);
  });
});
