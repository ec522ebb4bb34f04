// Test-only entry: kept out of index.ts so production code never loads Jest-facing helpers.
import type { Driver } from 'neo4j-driver';
import { lockNeo4j, neo4jTestDriver, type Neo4jTestServer } from './neo4j/neo4j.testing';

export { describeContextGraphContract, type ContextGraphFixture } from './context-graph.contract';
export { neo4jScript, neo4jTestServer, wipeNeo4j, type Neo4jTestServer } from './neo4j/neo4j.testing';

/**
 * Holds the shared test Neo4j for the calling test file, from before its first test to after its last: the
 * instance's lock (other test runs on this machine use the same instance) and an admin driver. Call at the top
 * level of the file, so that its suites' own `afterAll` hooks run before the lock is released.
 */
export function holdTestNeo4j(server: Neo4jTestServer): { admin: () => Driver } {
  let driver: Driver | undefined;
  let release: (() => void) | undefined;
  beforeAll(async () => {
    release = await lockNeo4j(server);
    driver = neo4jTestDriver(server);
  }, 600_000);
  afterAll(async () => {
    await driver?.close();
    release?.();
  });
  return {
    admin: () => {
      if (!driver) throw new Error('the test Neo4j is not held yet (holdTestNeo4j hooks have not run)');
      return driver;
    },
  };
}
