import { type DynamicModule, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { ContextGraph } from './context-graph.port';
import { SqliteContextGraph } from './embedded/sqlite-context-graph';
import { Neo4jContextGraph, type Neo4jContextGraphOptions } from './neo4j/neo4j-context-graph';
import type { OutboxForwarderOptions } from './replication/outbox-forwarder';
import { ReplicatedContextGraph } from './replication/replicated-context-graph';
import { PostgresOutboxGraph, type PostgresOutboxGraphOptions } from './postgres/postgres-outbox-graph';

/** The embedded store: one SQLite file next to the engine. */
export interface EmbeddedContextGraphOptions {
  store: 'embedded';
  /** Database file; its parent directory is created. */
  sqlitePath: string;
  /** Wait for a lock held by another process before failing a write. Default 5000. */
  busyTimeoutMs?: number;
  /** Most writes in one group-commit transaction. Default 500. */
  maxBatchSize?: number;
}

/**
 * Neo4j as the store of record, behind a durable local outbox: records commit to the SQLite file first and
 * are copied to Neo4j in order (see `ReplicatedContextGraph`).
 */
export interface Neo4jGraphStoreOptions {
  store: 'neo4j';
  /** The local file holding every record and the outbox. */
  sqlitePath: string;
  neo4j: Neo4jContextGraphOptions;
  forwarder?: OutboxForwarderOptions;
  busyTimeoutMs?: number;
  maxBatchSize?: number;
}

/**
 * Engine replicas: Neo4j as the store of record behind an outbox in the replicas' shared Postgres (see
 * `PostgresOutboxGraph`). The store opens its own small pool on `databaseUrl`.
 */
export interface PostgresOutboxGraphStoreOptions extends Omit<PostgresOutboxGraphOptions, 'neo4j'> {
  store: 'postgres-outbox';
  databaseUrl: string;
  neo4j: Neo4jContextGraphOptions;
}

/** A graph built elsewhere (tests, benchmarks); the module still initialises and closes it. */
export interface InstanceContextGraphOptions {
  store: 'instance';
  graph: ContextGraph;
}

/** Which store backs the graph; callers of `ContextGraph` do not change with it. */
export type ContextGraphModuleOptions =
  | EmbeddedContextGraphOptions
  | Neo4jGraphStoreOptions
  | PostgresOutboxGraphStoreOptions
  | InstanceContextGraphOptions;

export const CONTEXT_GRAPH_OPTIONS = Symbol('switchyard:context-graph:options');

/** Builds the adapter for `options.store`, not yet initialised. */
export function createContextGraph(options: ContextGraphModuleOptions): ContextGraph {
  switch (options.store) {
    case 'embedded':
      return new SqliteContextGraph(options);
    case 'neo4j':
      return new ReplicatedContextGraph({
        local: new SqliteContextGraph({
          sqlitePath: options.sqlitePath,
          busyTimeoutMs: options.busyTimeoutMs,
          maxBatchSize: options.maxBatchSize,
          outbox: true,
        }),
        // Short driver retries: the forwarder retries with its own backoff, and reads fall back to the file.
        remote: new Neo4jContextGraph({ maxTransactionRetryTimeMs: 2000, ...options.neo4j }),
        forwarder: options.forwarder,
      });
    case 'postgres-outbox': {
      const { store: _store, neo4j, ...rest } = options;
      return new PostgresOutboxGraph({
        ...rest,
        // Short driver retries: the forwarder retries with its own backoff, and a read fails after its timeout.
        neo4j: new Neo4jContextGraph({ maxTransactionRetryTimeMs: 2000, ...neo4j }),
      });
    }
    case 'instance':
      return options.graph;
  }
}

/**
 * Owns the graph's lifetime: closes it (flushing queued writes) on application shutdown. Services that
 * still write while stopping must finish in `beforeApplicationShutdown`, which runs before this.
 */
@Injectable()
export class ContextGraphCloser implements OnApplicationShutdown {
  constructor(@Inject(ContextGraph) private readonly graph: ContextGraph) {}

  onApplicationShutdown(): Promise<void> {
    return this.graph.close();
  }
}

/**
 * Provides `ContextGraph` (the abstract class is the injection token) app-wide, initialised before any
 * consumer is constructed and closed on shutdown (call `app.enableShutdownHooks()` for signals).
 */
@Module({})
export class ContextGraphModule {
  static forRoot(options: ContextGraphModuleOptions): DynamicModule {
    return {
      module: ContextGraphModule,
      global: true,
      providers: [
        { provide: CONTEXT_GRAPH_OPTIONS, useValue: options },
        {
          provide: ContextGraph,
          inject: [CONTEXT_GRAPH_OPTIONS],
          useFactory: async (opts: ContextGraphModuleOptions): Promise<ContextGraph> => {
            const graph = createContextGraph(opts);
            try {
              await graph.init();
            } catch (error) {
              // Start-up stops here: release what init() opened (files, the Neo4j driver) before failing.
              await graph.close().catch(() => undefined);
              throw error;
            }
            return graph;
          },
        },
        ContextGraphCloser,
      ],
      exports: [ContextGraph],
    };
  }
}
