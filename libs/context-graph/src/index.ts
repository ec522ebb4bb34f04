export * from './context-graph.errors';
export * from './context-graph.module';
export * from './context-graph.port';
export * from './context-graph.types';
export * from './checkpoint.types';
export {
  SqliteContextGraph,
  type SqliteContextGraphOptions,
  type SqlitePragmas,
} from './embedded/sqlite-context-graph';
export type { GroupCommitStats } from './embedded/group-commit-queue';
export type { SessionState } from './context-graph.views';
export { Neo4jContextGraph, type Neo4jContextGraphOptions } from './neo4j/neo4j-context-graph';
export {
  OutboxForwarder,
  type ForwarderState,
  type ForwarderTimers,
  type Outbox,
  type OutboxForwarderOptions,
} from './replication/outbox-forwarder';
export {
  ReplicatedContextGraph,
  type ReplicatedContextGraphOptions,
} from './replication/replicated-context-graph';
export { PostgresOutboxGraph, type PostgresOutboxGraphOptions } from './postgres/postgres-outbox-graph';
export type { PostgresForwarderOptions, PostgresForwarderState } from './postgres/postgres-outbox-forwarder';
export type {
  OutboxBatch,
  ReplicaAction,
  ReplicaChanges,
  ReplicaTarget,
} from './replication/replication.types';
