import { GraphStoreConnectionError, SqliteContextGraph } from '@switchyard/context-graph';
import { ConfigError, loadEngineConfig } from '../../platform/config/engine-config';
import { contextGraphOptions, graphStartupError } from './graph-store';

describe('graph store configuration', () => {
  it('is the embedded file by default, whatever NEO4J_* say', () => {
    const config = loadEngineConfig({ SWITCHYARD_DATA_DIR: '/srv/sy', NEO4J_URI: 'not a uri' });
    expect(config.graph).toEqual({ store: 'embedded' });
    expect(contextGraphOptions(config)).toEqual({ store: 'embedded', sqlitePath: '/srv/sy/graph.db' });
  });

  it('reads NEO4J_* with SWITCHYARD_GRAPH=neo4j, with defaults for all but the password', () => {
    const config = loadEngineConfig({
      SWITCHYARD_DATA_DIR: '/srv/sy',
      SWITCHYARD_GRAPH: 'neo4j',
      NEO4J_URI: 'neo4j+s://graph.internal:7687',
      NEO4J_PASSWORD: 'secret-secret',
    });
    expect(config.graph).toEqual({
      store: 'neo4j',
      neo4j: {
        uri: 'neo4j+s://graph.internal:7687',
        username: 'neo4j',
        password: 'secret-secret',
        database: 'neo4j',
        connectTimeoutMs: 30_000,
      },
    });
    expect(contextGraphOptions(config)).toEqual({
      store: 'neo4j',
      sqlitePath: '/srv/sy/graph.db',
      neo4j: config.graph.store === 'neo4j' && config.graph.neo4j,
    });
    expect(loadEngineConfig({ SWITCHYARD_GRAPH: 'neo4j' }).graph).toMatchObject({
      neo4j: { uri: 'bolt://127.0.0.1:7687', password: undefined },
    });
  });

  it.each([
    ['SWITCHYARD_GRAPH', 'postgres'],
    ['NEO4J_URI', 'http://localhost:7474'],
    ['NEO4J_URI', 'bolt://user:pw@host:7687'],
    ['NEO4J_URI', 'localhost:7687'],
    ['NEO4J_USERNAME', ''],
    ['NEO4J_DATABASE', 'no spaces allowed'],
    ['SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS', 'soon'],
  ])('rejects %s=%j naming the variable', (name, value) => {
    let error: unknown;
    try {
      loadEngineConfig({ SWITCHYARD_GRAPH: 'neo4j', [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map((p) => p.variable)).toEqual([name]);
  });

  it('uses a graph handed in instead (the bench’s no-op store)', () => {
    const graph = new SqliteContextGraph({ sqlitePath: '/unused' });
    expect(contextGraphOptions(loadEngineConfig({}), graph)).toEqual({ store: 'instance', graph });
  });

  it.each([
    ['uri', ['NEO4J_URI']],
    ['credentials', ['NEO4J_USERNAME', 'NEO4J_PASSWORD']],
    ['database', ['NEO4J_DATABASE']],
  ] as const)('turns a start-up failure on %s into a ConfigError naming %j', (setting, variables) => {
    const error = graphStartupError(new GraphStoreConnectionError(setting, 'Neo4j at bolt://x refused it'));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual(
      variables.map((variable) => ({ variable, message: 'Neo4j at bolt://x refused it' })),
    );
    const other = new Error('something else');
    expect(graphStartupError(other)).toBe(other);
  });
});
