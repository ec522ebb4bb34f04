import { IsIn, IsOptional, IsString, Matches, MinLength, ValidateIf } from 'class-validator';
import { IntVar } from './env-parsing';

const neo4jOnly = ValidateIf((e: GraphEnv) => e.SWITCHYARD_GRAPH === 'neo4j');

/** Where the context graph lives; the NEO4J_* variables are read only with SWITCHYARD_GRAPH=neo4j. */
export class GraphEnv {
  /**
   * Where the context graph lives: `embedded` (SQLite, `graph.db` in the data dir) or `neo4j` (Neo4j, behind a local
   * outbox in `graph.db`).
   */
  @IsOptional()
  @IsIn(['embedded', 'neo4j'])
  SWITCHYARD_GRAPH: 'embedded' | 'neo4j' = 'embedded';

  /** Neo4j's Bolt address. */
  @neo4jOnly
  @Matches(/^(bolt|neo4j)(\+s|\+ssc)?:\/\/[^\s/?#@:]+(:\d{1,5})?\/?$/, {
    message: 'must be bolt://host[:port] or neo4j://host[:port] (bolt+s, neo4j+s… for TLS)',
  })
  NEO4J_URI = 'bolt://127.0.0.1:7687';

  /** The user the engine connects to Neo4j as (with NEO4J_PASSWORD). */
  @neo4jOnly
  @IsString()
  @MinLength(1)
  NEO4J_USERNAME = 'neo4j';

  /** Password of NEO4J_USERNAME. Unset: connect without authentication. */
  @IsOptional()
  @IsString()
  NEO4J_PASSWORD?: string = undefined;

  /** The Neo4j database that holds the graph. */
  @neo4jOnly
  @Matches(/^[A-Za-z][A-Za-z0-9.-]{2,62}$/, { message: 'must be a Neo4j database name' })
  NEO4J_DATABASE = 'neo4j';

  /** How long start-up retries an unreachable Neo4j before failing on NEO4J_URI. */
  @IntVar(0, 600_000)
  SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS = 30_000;
}

/** Which store holds the context graph (see `apps/engine/src/engine/graph/graph-store.ts`). */
export type GraphConfig =
  | { store: 'embedded' }
  | {
      store: 'neo4j';
      neo4j: { uri: string; username: string; password?: string; database: string; connectTimeoutMs: number };
    };

export function graphConfig(env: GraphEnv): GraphConfig {
  if (env.SWITCHYARD_GRAPH === 'embedded') return { store: 'embedded' };
  return {
    store: 'neo4j',
    neo4j: {
      uri: env.NEO4J_URI,
      username: env.NEO4J_USERNAME,
      password: env.NEO4J_PASSWORD,
      database: env.NEO4J_DATABASE,
      connectTimeoutMs: env.SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS,
    },
  };
}
