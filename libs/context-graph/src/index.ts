export * from './context-graph.errors';
export * from './context-graph.module';
export * from './context-graph.port';
export * from './context-graph.types';
export {
  SqliteContextGraph,
  type SqliteContextGraphOptions,
  type SqlitePragmas,
} from './embedded/sqlite-context-graph';
export type { GroupCommitStats } from './embedded/group-commit-queue';
