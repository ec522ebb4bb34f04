/**
 * The engine with SWITCHYARD_GRAPH=neo4j against the test Neo4j (`bash scripts/neo4j.sh start`, run by
 * `npm test`): start-up refuses bad settings naming the variable, actions are recorded locally and copied to
 * Neo4j, and both stores then hold the same graph. Fails, never skips, when no test Neo4j is running.
 */
import { holdTestNeo4j, neo4jTestServer } from '../../libs/context-graph/src/testing';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../../apps/engine/src/platform/config/engine-config';
import { EngineHarness } from '../support/engine-harness';
import { compareStores, neo4jEnv, waitForGraph, withEngineStores } from '../support/neo4j-graph';

const server = neo4jTestServer();
const testNeo4j = holdTestNeo4j(server);

describe('engine on Neo4j', () => {
  describe('start-up', () => {
    const dirs: string[] = [];
    afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

    it.each([
      ['a wrong password', { NEO4J_PASSWORD: 'not-the-password' }, ['NEO4J_USERNAME', 'NEO4J_PASSWORD']],
      ['an unknown user', { NEO4J_USERNAME: 'nobody' }, ['NEO4J_USERNAME', 'NEO4J_PASSWORD']],
      ['a database that does not exist', { NEO4J_DATABASE: 'nosuchdb' }, ['NEO4J_DATABASE']],
      [
        'an address where nothing listens',
        { NEO4J_URI: 'bolt://127.0.0.1:1', SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS: '300' },
        ['NEO4J_URI'],
      ],
    ])('fails with %s, naming the variable', async (_what, bad, variables) => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-neo4j-'));
      dirs.push(dataDir);
      const error = await EngineHarness.start({ ...neo4jEnv(server), ...bad }, { dataDir }).then(
        async (engine) => {
          await engine.stop();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.map((p) => p.variable)).toEqual(variables);
      expect((error as ConfigError).message).toMatch(/Neo4j/);
    });
  });

  describe('recording', () => {
    let engine: EngineHarness;
    beforeAll(async () => {
      engine = await EngineHarness.start(neo4jEnv(server));
    });
    afterAll(() => engine.stop());

    it('records locally, copies to Neo4j, and both stores answer the same', async () => {
      const sid = await engine.createSession({ metadata: { purpose: 'neo4j' } });
      await engine.action(sid, { type: 'file', op: 'write', path: 'a.txt', content: 'a' });
      const failed = await engine.action(sid, {
        type: 'code',
        language: 'python',
        code: 'import sys; sys.exit(3)',
      });
      expect(failed).toMatchObject({ status: 'failed', exitCode: 3 });
      await engine.action(sid, { type: 'file', op: 'edit', path: 'a.txt', find: 'a', replace: 'b' });

      const health = await waitForGraph(engine, (g) => g.backlog === 0);
      expect(health).toEqual({ store: 'neo4j', status: 'ok', backlog: 0 });

      await withEngineStores(engine.dataDir, server, async (local, remote) => {
        await compareStores(local, remote, [sid], testNeo4j.admin());
        const ctx = await engine.request('GET', `/v1/sessions/${sid}/actions/${failed.id}/context`);
        expect(ctx.headers.get('x-graph-store')).toBe('neo4j');
        expect(ctx.headers.get('x-graph-lag')).toBe('0');
        expect(ctx.body).toEqual(
          JSON.parse(JSON.stringify(await remote.failureContext(sid, failed.id, { before: 10 }))),
        );
        const lineage = await engine.request('GET', `/v1/sessions/${sid}/files/lineage?path=a.txt`);
        expect(lineage.body.entries.map((e: { access: string[] }) => e.access)).toEqual([
          ['write'],
          ['read', 'write'],
        ]);
      });
    });

    it('records checkpoints, restores and forks in Neo4j as locally: nodes, edges, lineage across the fork', async () => {
      const sid = await engine.createSession();
      await engine.action(sid, { type: 'file', op: 'write', path: 'f.txt', content: 'one' });
      const manual = await engine.request('POST', `/v1/sessions/${sid}/checkpoints`, { label: 'manual' });
      expect(manual.status).toBe(201);
      const failed = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        code: 'echo broken > f.txt; exit 1',
        checkpoint: 'before',
      });
      expect(failed).toMatchObject({ status: 'failed', checkpoint: { id: expect.any(String) } });
      const retry = await engine.request('POST', `/v1/sessions/${sid}/actions/${failed.id}/retry`, {
        restore: true,
        action: { type: 'code', language: 'bash', code: 'cat f.txt' },
      });
      expect(retry.body).toMatchObject({ status: 'succeeded', stdout: 'one' });
      expect(
        (await engine.request('POST', `/v1/sessions/${sid}/checkpoints/${manual.body.id}/restore`)).status,
      ).toBe(200);
      expect(
        (await engine.request('DELETE', `/v1/sessions/${sid}/checkpoints/${manual.body.id}`)).status,
      ).toBe(204);
      const fork = await engine.request('POST', `/v1/sessions/${sid}/fork`, {
        checkpointId: failed.checkpoint.id,
      });
      expect(fork.status).toBe(201);
      await engine.action(fork.body.id, { type: 'file', op: 'write', path: 'f.txt', content: 'fork' });

      await waitForGraph(engine, (g) => g.backlog === 0);
      await withEngineStores(engine.dataDir, server, async (local, remote) => {
        await compareStores(local, remote, [sid, fork.body.id], testNeo4j.admin());
        const graph = await engine.request('GET', `/v1/sessions/${fork.body.id}/graph`);
        expect(graph.headers.get('x-graph-store')).toBe('neo4j');
        expect(graph.body.edges).toContainEqual(
          expect.objectContaining({ type: 'FORKED_FROM', from: fork.body.id, to: sid }),
        );
        const source = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
        const types = new Set(source.edges.map((e: { type: string }) => e.type));
        for (const t of ['HAS_CHECKPOINT', 'BEFORE', 'RESTORED', 'FORKED_FROM']) expect(types).toContain(t);
        const ctx = await engine.request('GET', `/v1/sessions/${sid}/actions/${failed.id}/context`);
        expect(ctx.body.checkpoint).toMatchObject({ id: failed.checkpoint.id, auto: true });
        const lineage = await engine.request('GET', `/v1/sessions/${fork.body.id}/files/lineage?path=f.txt`);
        expect(lineage.body.entries.map((e: { sessionId: string }) => e.sessionId)).toEqual([
          sid,
          fork.body.id,
        ]);
        expect(lineage.body).toEqual(
          JSON.parse(JSON.stringify(await remote.fileLineage(fork.body.id, 'f.txt'))),
        );
      });
    });
  });
});
