// Test-only entry: kept out of index.ts so production code never loads Jest-facing helpers.
export { describeContextGraphContract, type ContextGraphFixture } from './context-graph.contract';
export {
  lockNeo4j,
  neo4jInstanceDir,
  neo4jScript,
  neo4jTestDriver,
  neo4jTestServer,
  wipeNeo4j,
  type Neo4jTestServer,
} from './neo4j/neo4j.testing';
