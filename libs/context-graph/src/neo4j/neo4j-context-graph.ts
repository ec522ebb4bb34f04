import { Logger } from '@nestjs/common';
import type { ActionStatus } from '@switchyard/common';
import neo4j, {
  type Driver,
  type ManagedTransaction,
  type QueryResult,
  type RecordShape,
} from 'neo4j-driver';
import { isOpen, OPEN_STATUSES } from '../context-graph.approvals';
import {
  ActionAlreadyCompletedError,
  ActionNotRecordedError,
  ContextGraphClosedError,
  GraphStoreConnectionError,
  SessionNotRecordedError,
} from '../context-graph.errors';
import { ContextGraph } from '../context-graph.port';
import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  ApprovalDecision,
  FailureContext,
  FailureContextQuery,
  FileLineage,
  GraphFilter,
  GraphHealth,
  GraphView,
  ListActionsQuery,
  Page,
  PlanGraphRecord,
  SessionActivity,
  SessionRecord,
} from '../context-graph.types';
import type { CheckpointRecord, CheckpointState, ForkRecord, RestoreRecord } from '../checkpoint.types';
import { INTERRUPTED_ERROR, resolvePlan } from '../context-graph.views';
import type { ReplicaChanges, ReplicaTarget } from '../replication/replication.types';
import { startApprovalParams, writeApprovalDecision } from './neo4j-approvals';
import {
  checkpointReplicaParam,
  forkReplicaParam,
  writeCheckpoint,
  writeCheckpointDeleted,
  writeFork,
  writeRestore,
} from './neo4j-checkpoints';
import {
  classifyNeo4jFailure,
  createNeo4jDriver,
  errorMessage,
  ignoreConcurrentSchema,
} from './neo4j-connection';
import * as Q from './neo4j-cypher';
import {
  readAction,
  readActions,
  readCheckpoint,
  readFailureContext,
  readFileLineage,
  readLastActionSeq,
  type ReadStatement,
  readSessionActivity,
  readSessionGraph,
} from './neo4j-reads';
import {
  completionProperties,
  planParam,
  replicaParam,
  sandboxParam,
  startProperties,
  touchParams,
} from './neo4j-records';
import { statefulParams } from './neo4j-stateful';
import type { WriteStatement } from './neo4j-write';

export interface Neo4jContextGraphOptions {
  /** `bolt://host:7687`, `neo4j://…`, or their `+s`/`+ssc` TLS forms. */
  uri: string;
  /** Default `neo4j`. */
  username?: string;
  /** Without one, the driver connects without authentication. */
  password?: string;
  /** Default `neo4j`. */
  database?: string;
  /** How long `init()` keeps trying to reach Neo4j before failing. Default 30000. */
  connectTimeoutMs?: number;
  /** How long the driver keeps retrying one transaction on transient errors. Default 30000. */
  maxTransactionRetryTimeMs?: number;
  /** How long a failed `health()` probe is remembered, and a good one trusted. Default 1000. */
  healthCacheMs?: number;
  /** Tests and tools: a driver to use instead of one built from the options (closed by `close()`). */
  driver?: Driver;
}

/**
 * `ContextGraph` on Neo4j through the official driver: one driver (closed by `close()`), managed transactions
 * (`executeRead`/`executeWrite`, so transient errors are retried), Cypher with parameters only, schema created
 * by `init()`. Every query is one statement, so one round trip. Also a {@link ReplicaTarget}: the engine's
 * outbox forwarder copies the embedded store into it with {@link applyReplica}.
 */
export class Neo4jContextGraph extends ContextGraph implements ReplicaTarget {
  private readonly logger = new Logger('Neo4jContextGraph');
  private driver: Driver | undefined;
  private readonly database: string;
  private closed = false;
  private initialised = false;
  private readonly inFlight = new Set<Promise<unknown>>();
  private queries = 0;
  private probe: { at: number; health: Promise<GraphHealth> } | undefined;
  /** One statement in its own write transaction, rows as plain objects: for writers kept in other files. */
  private readonly writeStatement: WriteStatement = async (query, params) =>
    (await this.write((tx) => this.run(tx, query, params))).records.map((r) => r.toObject());
  /** One statement in its own read transaction, rows as plain objects: for the read queries (neo4j-reads.ts). */
  private readonly readStatement: ReadStatement = async (query, params) =>
    (await this.read((tx) => this.run(tx, query, params))).records.map((r) => r.toObject());

  constructor(private readonly options: Neo4jContextGraphOptions) {
    super();
    this.database = options.database ?? 'neo4j';
  }

  /**
   * Reaches Neo4j (retrying while it is unreachable, up to `connectTimeoutMs`), then creates the schema.
   * Throws `GraphStoreConnectionError` naming the setting at fault.
   */
  override async init(): Promise<void> {
    if (this.closed) throw new ContextGraphClosedError();
    if (this.initialised) return;
    this.driver ??= this.options.driver ?? createNeo4jDriver(this.options);
    const deadline = Date.now() + (this.options.connectTimeoutMs ?? 30_000);
    for (let attempt = 1; ; attempt++) {
      try {
        // One attempt (no driver retries): an unreachable server is retried here, up to the deadline.
        await this.driver.verifyConnectivity({ database: this.database });
        for (const statement of Q.SCHEMA) {
          await this.write((tx) => this.run(tx, statement)).catch(ignoreConcurrentSchema);
        }
        await this.write((tx) => this.run(tx, Q.AWAIT_INDEXES));
        break;
      } catch (error) {
        const failure = classifyNeo4jFailure(error, this.options.uri, this.database);
        if (failure.setting !== 'uri' || !failure.transient || Date.now() >= deadline) {
          throw new GraphStoreConnectionError(failure.setting, failure.message, { cause: error });
        }
        this.logger.warn({ msg: 'Neo4j not reachable yet, retrying', uri: this.options.uri, attempt });
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 100 * attempt)));
      }
    }
    this.initialised = true;
  }

  override recordSession(session: SessionRecord): Promise<void> {
    return this.track(async () => {
      await this.write((tx) =>
        this.run(tx, Q.RECORD_SESSION, {
          id: session.id,
          tenant: session.tenant,
          createdAt: session.createdAt,
          metadata: JSON.stringify(session.metadata),
        }),
      );
    });
  }

  override recordActionStarted(a: ActionStart): Promise<void> {
    return this.track(async () => {
      const result = await this.write((tx) =>
        this.run(tx, Q.RECORD_ACTION_STARTED, {
          id: a.id,
          sessionId: a.sessionId,
          retryOf: a.retryOf ?? null,
          retryReason: a.retryReason ?? null,
          props: startProperties(a),
          ...startApprovalParams(a),
        }),
      );
      const row = result.records[0];
      if (!row) throw new SessionNotRecordedError(a.sessionId);
      if (!row.get('hasOriginal')) throw new ActionNotRecordedError(a.retryOf!, a.sessionId);
      if (!row.get('hasCaller')) throw new ActionNotRecordedError(a.calledBy!.actionId, a.sessionId);
    });
  }

  override recordApprovalDecision(actionId: string, decision: ApprovalDecision): Promise<void> {
    return this.track(() => writeApprovalDecision(this.writeStatement, actionId, decision));
  }

  override recordActionCompleted(actionId: string, c: ActionCompletion): Promise<void> {
    return this.track(async () => {
      const result = await this.write((tx) =>
        this.run(tx, Q.RECORD_ACTION_COMPLETED, {
          id: actionId,
          props: completionProperties(c),
          ...touchParams(c.files),
          sandbox: c.sandbox ? [sandboxParam(c.sandbox)] : [],
          ...statefulParams(c.kernel, c.startedProcess, c.reached),
          open: OPEN_STATUSES,
        }),
      );
      const before = result.records[0]?.get('before') as ActionStatus | undefined;
      if (before === undefined) throw new ActionNotRecordedError(actionId);
      if (!isOpen(before)) throw new ActionAlreadyCompletedError(actionId, before);
    });
  }

  override recordPlan(plan: PlanGraphRecord): Promise<void> {
    return this.track(async () => {
      const result = await this.write((tx) =>
        this.run(tx, Q.RECORD_PLANS, { plans: [planParam(resolvePlan(plan))] }),
      );
      if (result.records.length === 0) throw new SessionNotRecordedError(plan.sessionId);
    });
  }

  override recordCheckpoint(c: CheckpointRecord): Promise<void> {
    return this.track(() => writeCheckpoint(this.writeStatement, c));
  }

  override recordCheckpointDeleted(
    sessionId: string,
    checkpointId: string,
    deletedAt: string,
    reason: 'deleted' | 'pruned',
  ): Promise<void> {
    return this.track(() =>
      writeCheckpointDeleted(this.writeStatement, sessionId, checkpointId, deletedAt, reason),
    );
  }

  override recordRestore(r: RestoreRecord): Promise<void> {
    return this.track(() => writeRestore(this.writeStatement, r));
  }

  override recordFork(f: ForkRecord): Promise<void> {
    return this.track(() => writeFork(this.writeStatement, f));
  }

  override getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined> {
    return this.track(() => readAction(this.readStatement, sessionId, actionId));
  }

  override lastActionSeq(sessionId: string): Promise<number> {
    return this.track(() => readLastActionSeq(this.readStatement, sessionId));
  }

  override getCheckpoint(sessionId: string, checkpointId: string): Promise<CheckpointState | undefined> {
    return this.track(() => readCheckpoint(this.readStatement, sessionId, checkpointId));
  }

  override listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>> {
    return this.track(() => readActions(this.readStatement, sessionId, query));
  }

  override sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView> {
    return this.track(() => readSessionGraph(this.readStatement, sessionId, filter));
  }

  override failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined> {
    return this.track(() => readFailureContext(this.readStatement, sessionId, actionId, query));
  }

  override fileLineage(sessionId: string, path: string): Promise<FileLineage> {
    return this.track(() => readFileLineage(this.readStatement, sessionId, path));
  }

  override sessionActivity(sessionIds: readonly string[]): Promise<Map<string, SessionActivity>> {
    return this.track(() => readSessionActivity(this.readStatement, sessionIds));
  }

  /** Probes Neo4j (at most once per `healthCacheMs`); degraded while it cannot be reached. */
  override async health(): Promise<GraphHealth> {
    if (this.closed) throw new ContextGraphClosedError();
    const now = Date.now();
    if (!this.probe || now - this.probe.at >= (this.options.healthCacheMs ?? 1000)) {
      this.probe = { at: now, health: this.checkConnectivity() };
    }
    return this.probe.health;
  }

  override markRunningInterrupted(endedAt: string, sessionIds?: readonly string[]): Promise<number> {
    return this.track(async () => {
      const result = await this.write((tx) =>
        this.run(tx, Q.MARK_RUNNING_INTERRUPTED, {
          open: OPEN_STATUSES,
          sessionIds: sessionIds ?? null,
          endedAt,
          errorClass: INTERRUPTED_ERROR.class,
          errorMessage: INTERRUPTED_ERROR.message,
        }),
      );
      return result.records[0].get('n') as number;
    });
  }

  override endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void> {
    return this.track(async () => {
      const result = await this.write((tx) =>
        this.run(tx, Q.END_SESSION, { id: sessionId, endedAt, reason }),
      );
      if ((result.records[0].get('n') as number) === 0) throw new SessionNotRecordedError(sessionId);
    });
  }

  /**
   * Copies records in one transaction: sessions first, then actions in the given order, plans, checkpoints
   * and forks. Idempotent.
   */
  async applyReplica(changes: ReplicaChanges): Promise<void> {
    return this.track(async () => {
      await this.write(async (tx) => {
        if (changes.sessions.length > 0) {
          await this.run(tx, Q.REPLICATE_SESSIONS, {
            sessions: changes.sessions.map((s) => ({
              id: s.id,
              tenant: s.tenant,
              createdAt: s.createdAt,
              metadata: JSON.stringify(s.metadata),
              endedAt: s.endedAt ?? null,
              endReason: s.endReason ?? null,
            })),
          });
        }
        if (changes.actions.length > 0) {
          await this.run(tx, Q.REPLICATE_ACTIONS, { actions: changes.actions.map(replicaParam) });
        }
        if (changes.plans && changes.plans.length > 0) {
          await this.run(tx, Q.RECORD_PLANS, { plans: changes.plans.map(planParam) });
        }
        if (changes.checkpoints && changes.checkpoints.length > 0) {
          await this.run(tx, Q.REPLICATE_CHECKPOINTS, {
            checkpoints: changes.checkpoints.map(checkpointReplicaParam),
          });
        }
        if (changes.forks && changes.forks.length > 0) {
          await this.run(tx, Q.REPLICATE_FORKS, { forks: changes.forks.map(forkReplicaParam) });
        }
      });
    });
  }

  /** Resolves when Neo4j answers (one attempt, no retries). */
  async ping(): Promise<void> {
    await this.connection().verifyConnectivity({ database: this.database });
  }

  /** Waits for the calls in flight, then closes the driver. Idempotent; later calls: `ContextGraphClosedError`. */
  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    const driver = this.driver;
    this.driver = undefined;
    await driver?.close();
  }

  /** Statements sent since construction: each port method sends one (the tests check there is no N+1). */
  statementCount(): number {
    return this.queries;
  }

  private async checkConnectivity(): Promise<GraphHealth> {
    try {
      await this.connection().verifyConnectivity({ database: this.database });
      return { store: 'neo4j', status: 'ok', backlog: 0 };
    } catch (error) {
      return { store: 'neo4j', status: 'degraded', backlog: 0, error: errorMessage(error) };
    }
  }

  private connection(): Driver {
    if (this.closed) throw new ContextGraphClosedError();
    if (!this.driver) throw new Error('Neo4jContextGraph.init() must be called first');
    return this.driver;
  }

  /** Runs a port call, so `close()` can wait for it. */
  private track<T>(work: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ContextGraphClosedError());
    const promise = work();
    this.inFlight.add(promise);
    const forget = (): void => void this.inFlight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  private async read<T>(work: (tx: ManagedTransaction) => Promise<T>): Promise<T> {
    const session = this.connection().session({
      database: this.database,
      defaultAccessMode: neo4j.session.READ,
    });
    try {
      return await session.executeRead(work);
    } finally {
      await session.close();
    }
  }

  private async write<T>(work: (tx: ManagedTransaction) => Promise<T>): Promise<T> {
    const session = this.connection().session({
      database: this.database,
      defaultAccessMode: neo4j.session.WRITE,
    });
    try {
      return await session.executeWrite(work);
    } finally {
      await session.close();
    }
  }

  private run(
    tx: ManagedTransaction,
    query: string,
    params: Record<string, unknown> = {},
  ): Promise<QueryResult<RecordShape>> {
    this.queries++;
    return tx.run(query, params);
  }
}
