import * as path from 'node:path';
import {
  Neo4jContextGraph,
  SqliteContextGraph,
  type ContextGraph,
  type GraphHealth,
} from '@switchyard/context-graph';
import type { Driver } from 'neo4j-driver';
import type { Neo4jTestServer } from '../../libs/context-graph/src/testing';
import type { EngineHarness } from './engine-harness';

/** Engine variables for the Neo4j store on a test server. */
export function neo4jEnv(server: Neo4jTestServer): Record<string, string> {
  return {
    SWITCHYARD_GRAPH: 'neo4j',
    NEO4J_URI: server.uri,
    NEO4J_USERNAME: server.username,
    NEO4J_PASSWORD: server.password,
    SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS: '10000',
  };
}

/** Polls `/health` until the graph part satisfies `done`; fails after `timeoutMs` with the last answer. */
export async function waitForGraph(
  engine: EngineHarness,
  done: (graph: GraphHealth) => boolean,
  timeoutMs = 60_000,
): Promise<GraphHealth> {
  const deadline = Date.now() + timeoutMs;
  let last: GraphHealth | undefined;
  while (Date.now() < deadline) {
    last = (await engine.request<{ graph: GraphHealth }>('GET', '/health')).body.graph;
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`graph health never reached the expected state; last: ${JSON.stringify(last)}`);
}

async function everyAction(graph: ContextGraph, sessionId: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await graph.listActions(sessionId, { limit: 500, cursor });
    ids.push(...page.items.map((a) => a.id));
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}

/**
 * Both stores hold the same sessions: every node, edge and property of each session graph, every action
 * record, every failure context and file lineage; and Neo4j holds nothing else for those sessions (raw
 * counts, which would show duplicate edges or stray nodes the graph view cannot).
 */
export async function compareStores(
  local: SqliteContextGraph,
  remote: Neo4jContextGraph,
  sessionIds: string[],
  driver: Driver,
): Promise<{ nodes: number; edges: number }> {
  const totals = { nodes: 0, edges: 0 };
  for (const sid of sessionIds) {
    const view = await local.sessionGraph(sid);
    expect(view.nodes.length).toBeGreaterThan(1);
    expect(await remote.sessionGraph(sid)).toEqual(view);
    const ids = await everyAction(local, sid);
    expect(await everyAction(remote, sid)).toEqual(ids);
    for (const id of ids) {
      expect(await remote.getAction(sid, id)).toEqual(await local.getAction(sid, id));
      expect(await remote.failureContext(sid, id, { before: 5 })).toStrictEqual(
        await local.failureContext(sid, id, { before: 5 }),
      );
    }
    for (const file of view.nodes.filter((n) => n.label === 'File')) {
      const path = file.properties.path as string;
      expect(await remote.fileLineage(sid, path)).toStrictEqual(await local.fileLineage(sid, path));
    }
    const { records } = await driver.executeQuery(
      `MATCH (s:Session {id: $sid})
       CALL (s) { MATCH (s)-[r]->() RETURN count(r) AS fromSession }
       CALL (s) { MATCH (a:Action {sessionId: s.id})-[r]->() RETURN count(r) AS fromActions }
       CALL (s) { MATCH (c:Checkpoint {sessionId: s.id})-[r]->() RETURN count(r) AS fromCheckpoints }
       CALL (s) { MATCH (s)-[:HAS_PLAN]->(:Plan)-[:HAS_STEP]->(st:Step) RETURN count(DISTINCT st) AS steps }
       CALL (s) { MATCH (s)-[:HAS_PLAN]->(p:Plan)-[r]->() RETURN count(r) AS fromPlans }
       CALL (s) { MATCH (s)-[:HAS_PLAN]->(:Plan)-[:HAS_STEP]->(st:Step)-[r]->() RETURN count(r) AS fromSteps }
       CALL (s) { MATCH (:Session)-[r:FORKED_FROM]->(s) RETURN count(r) AS forksIn }
       CALL (s) { MATCH (n) WHERE n.sessionId = s.id RETURN count(n) AS owned }
       CALL (s) {
         MATCH (o:Session) WHERE (s)-[:FORKED_FROM]->(o) OR (o)-[:FORKED_FROM]->(s) RETURN count(o) AS linked
       }
       RETURN owned + steps + 1 + linked AS nodes,
         fromSession + fromActions + fromCheckpoints + fromPlans + fromSteps + forksIn AS edges`,
      { sid },
      { database: 'neo4j' },
    );
    expect(records[0]?.toObject()).toEqual({ nodes: view.nodes.length, edges: view.edges.length });
    totals.nodes += view.nodes.length;
    totals.edges += view.edges.length;
  }
  return totals;
}

/**
 * Opens, beside a stopped or running engine, the two stores it writes with `SWITCHYARD_GRAPH=neo4j`: its local
 * SQLite graph (with the outbox) in `dataDir` and the Neo4j on `server`; runs `use` and closes both.
 */
export async function withEngineStores<T>(
  dataDir: string,
  server: Neo4jTestServer,
  use: (local: SqliteContextGraph, remote: Neo4jContextGraph) => Promise<T>,
): Promise<T> {
  const local = new SqliteContextGraph({ sqlitePath: path.join(dataDir, 'graph.db'), outbox: true });
  const remote = new Neo4jContextGraph({
    uri: server.uri,
    username: server.username,
    password: server.password,
  });
  await Promise.all([local.init(), remote.init()]);
  try {
    return await use(local, remote);
  } finally {
    await Promise.all([local.close(), remote.close()]);
  }
}
