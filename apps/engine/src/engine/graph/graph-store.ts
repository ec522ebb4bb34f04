import {
  type ContextGraph,
  type ContextGraphModuleOptions,
  GraphStoreConnectionError,
  type GraphStoreSetting,
} from '@switchyard/context-graph';
import * as path from 'node:path';
import { ConfigError, type EngineConfig } from '../../platform/config/engine-config';

/** The variables to check when Neo4j refuses a setting at start-up. */
export const GRAPH_SETTING_VARIABLES: Record<GraphStoreSetting, string[]> = {
  uri: ['NEO4J_URI'],
  credentials: ['NEO4J_USERNAME', 'NEO4J_PASSWORD'],
  database: ['NEO4J_DATABASE'],
};

/**
 * The graph store for this configuration: the SQLite file in the data dir, either alone (`embedded`) or as
 * the durable outbox in front of Neo4j (`neo4j`); with replicas (SWITCHYARD_STATE=postgres), Neo4j behind an outbox
 * in the shared Postgres, so a record any replica acknowledged outlives it. `instance` replaces it (the bench's
 * no-op store).
 */
export function contextGraphOptions(
  config: EngineConfig,
  instance?: ContextGraph,
): ContextGraphModuleOptions {
  if (instance) return { store: 'instance', graph: instance };
  const sqlitePath = path.join(config.dataDir, 'graph.db');
  const graph = config.graph;
  switch (graph.store) {
    case 'embedded':
      return { store: 'embedded', sqlitePath };
    case 'neo4j':
      if (config.state.store === 'postgres') {
        return { store: 'postgres-outbox', databaseUrl: config.state.databaseUrl, neo4j: graph.neo4j };
      }
      return { store: 'neo4j', sqlitePath, neo4j: graph.neo4j };
  }
}

/** A start-up failure of the graph store as a `ConfigError` naming the variables at fault; others unchanged. */
export function graphStartupError(error: unknown): unknown {
  if (!(error instanceof GraphStoreConnectionError)) return error;
  return new ConfigError(
    GRAPH_SETTING_VARIABLES[error.setting].map((variable) => ({ variable, message: error.message })),
  );
}
