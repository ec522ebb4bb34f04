import { type DynamicModule, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { ContextGraph } from './context-graph.port';
import { SqliteContextGraph } from './embedded/sqlite-context-graph';

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

/** Which store backs the graph. A Neo4j store becomes another member of this union; callers do not change. */
export type ContextGraphModuleOptions = EmbeddedContextGraphOptions;

export const CONTEXT_GRAPH_OPTIONS = Symbol('switchyard:context-graph:options');

/** Builds the adapter for `options.store`, not yet initialised. */
export function createContextGraph(options: ContextGraphModuleOptions): ContextGraph {
  switch (options.store) {
    case 'embedded':
      return new SqliteContextGraph(options);
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
            await graph.init();
            return graph;
          },
        },
        ContextGraphCloser,
      ],
      exports: [ContextGraph],
    };
  }
}
