import { Logger } from '@nestjs/common';
import { SwitchyardError } from '@switchyard/common';
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
import type { SqliteContextGraph } from '../embedded/sqlite-context-graph';
import { OutboxForwarder, type OutboxForwarderOptions } from './outbox-forwarder';
import type { ReplicaTarget } from './replication.types';

export interface ReplicatedContextGraphOptions {
  /** The embedded store, opened with `outbox: true`: every record is committed here first. */
  local: SqliteContextGraph;
  /** The store records are copied to (Neo4j). */
  remote: ContextGraph & ReplicaTarget;
  forwarder?: OutboxForwarderOptions;
  /** On close, how long to keep copying what is left while the remote answers. Default 2000. */
  drainOnCloseMs?: number;
}

/**
 * The engine's graph when Neo4j is the store of record: durable locally first, copied to Neo4j in order.
 *
 * Writes commit to the embedded SQLite file together with an outbox entry (one transaction, fsynced) and
 * answer at once, so recording never waits on Neo4j and nothing is lost while it is slow or down; an
 * {@link OutboxForwarder} copies the entries to Neo4j in order, idempotently, retrying with backoff.
 *
 * Reads go to Neo4j when it is healthy and holds every record of the session (no outbox entry of that
 * session, of its fork origins or of its forks waits), and to the local file otherwise: the local file always
 * has the session's records, so an answer never misses a write the caller already saw acknowledged, and Neo4j
 * still serves reads whenever it is current. `health()` says how far Neo4j is behind (`backlog`) so readers
 * know what Neo4j lacks.
 */
export class ReplicatedContextGraph extends ContextGraph {
  private readonly logger = new Logger('ReplicatedContextGraph');
  readonly forwarder: OutboxForwarder;
  private readonly local: SqliteContextGraph;
  private readonly remote: ContextGraph & ReplicaTarget;
  private closed = false;

  constructor(private readonly options: ReplicatedContextGraphOptions) {
    super();
    this.local = options.local;
    this.remote = options.remote;
    this.forwarder = new OutboxForwarder(this.local, this.remote, options.forwarder);
  }

  /** Opens the local file, then Neo4j (a bad address or login fails here), then starts copying. */
  override async init(): Promise<void> {
    await this.local.init();
    await this.remote.init(); // on failure the owner calls close(), which releases both
    this.forwarder.start();
  }

  override recordSession(session: SessionRecord): Promise<void> {
    return this.written(this.local.recordSession(session));
  }

  override recordActionStarted(action: ActionStart): Promise<void> {
    return this.written(this.local.recordActionStarted(action));
  }

  override recordApprovalDecision(actionId: string, decision: ApprovalDecision): Promise<void> {
    return this.written(this.local.recordApprovalDecision(actionId, decision));
  }

  override recordActionCompleted(actionId: string, completion: ActionCompletion): Promise<void> {
    return this.written(this.local.recordActionCompleted(actionId, completion));
  }

  override recordActionWhole(action: ActionStart, completion: ActionCompletion): Promise<void> {
    return this.written(this.local.recordActionWhole(action, completion));
  }

  override recordPlan(plan: PlanGraphRecord): Promise<void> {
    return this.written(this.local.recordPlan(plan));
  }

  override recordCheckpoint(checkpoint: CheckpointRecord): Promise<void> {
    return this.written(this.local.recordCheckpoint(checkpoint));
  }

  override recordCheckpointDeleted(
    sessionId: string,
    checkpointId: string,
    deletedAt: string,
    reason: 'deleted' | 'pruned',
  ): Promise<void> {
    return this.written(this.local.recordCheckpointDeleted(sessionId, checkpointId, deletedAt, reason));
  }

  override recordRestore(restore: RestoreRecord): Promise<void> {
    return this.written(this.local.recordRestore(restore));
  }

  override recordFork(fork: ForkRecord): Promise<void> {
    return this.written(this.local.recordFork(fork));
  }

  /** Only this engine's file: its outbox names each interrupted action, so Neo4j gets exactly those. */
  override markRunningInterrupted(endedAt: string, sessionIds?: readonly string[]): Promise<number> {
    return this.written(this.local.markRunningInterrupted(endedAt, sessionIds));
  }

  override endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void> {
    return this.written(this.local.endSession(sessionId, endedAt, reason));
  }

  override getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined> {
    return this.read(sessionId, (g) => g.getAction(sessionId, actionId));
  }

  override lastActionSeq(sessionId: string): Promise<number> {
    return this.read(sessionId, (g) => g.lastActionSeq(sessionId));
  }

  override getCheckpoint(sessionId: string, checkpointId: string): Promise<CheckpointState | undefined> {
    return this.read(sessionId, (g) => g.getCheckpoint(sessionId, checkpointId));
  }

  override listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>> {
    return this.read(sessionId, (g) => g.listActions(sessionId, query));
  }

  override sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView> {
    return this.read(sessionId, (g) => g.sessionGraph(sessionId, filter));
  }

  override failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined> {
    return this.read(sessionId, (g) => g.failureContext(sessionId, actionId, query));
  }

  override fileLineage(sessionId: string, path: string): Promise<FileLineage> {
    return this.read(sessionId, (g) => g.fileLineage(sessionId, path));
  }

  /** From Neo4j only when it holds every record of every session asked about (their own records suffice). */
  override sessionActivity(sessionIds: readonly string[]): Promise<Map<string, SessionActivity>> {
    return this.readFrom(!this.local.outboxHoldsAny(sessionIds), (g) => g.sessionActivity(sessionIds));
  }

  /** `degraded` while Neo4j cannot be reached, with how many records wait locally. */
  override async health(): Promise<GraphHealth> {
    await this.local.health(); // throws once closed
    let state = this.forwarder.state();
    if (state.status === 'ok') {
      const remote = await this.remote.health();
      if (remote.status === 'degraded') {
        this.forwarder.reportFailure(new Error(remote.error ?? 'Neo4j is not reachable'));
        state = this.forwarder.state();
      }
    }
    return {
      store: 'neo4j',
      status: state.status,
      backlog: state.backlog,
      ...(state.error !== undefined && { error: state.error }),
    };
  }

  /** Copies what is left for a moment (when Neo4j answers), then closes both stores. Idempotent. */
  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      if (this.forwarder.state().status === 'ok')
        await this.forwarder.drain(this.options.drainOnCloseMs ?? 2000);
      await this.forwarder.close();
    } finally {
      await Promise.all([this.local.close(), this.remote.close()]);
    }
  }

  /** Waits until Neo4j has every record, for at most `timeoutMs`; true if it does. */
  drain(timeoutMs: number): Promise<boolean> {
    return this.forwarder.drain(timeoutMs);
  }

  private async written<T>(write: Promise<T>): Promise<T> {
    const value = await write;
    this.forwarder.wake();
    return value;
  }

  private read<T>(sessionId: string, query: (graph: ContextGraph) => Promise<T>): Promise<T> {
    return this.readFrom(!this.local.outboxHolds(sessionId), query);
  }

  /** Neo4j when it is healthy and `current` (it has what the answer draws on), else the local file. */
  private async readFrom<T>(current: boolean, query: (graph: ContextGraph) => Promise<T>): Promise<T> {
    if (this.forwarder.state().status === 'ok' && current) {
      try {
        return await query(this.remote);
      } catch (error) {
        if (error instanceof SwitchyardError) throw error; // the caller's mistake, the same on both stores
        this.logger.warn({ msg: 'Neo4j read failed; answering from the local store', error: String(error) });
        this.forwarder.reportFailure(error);
      }
    }
    return query(this.local);
  }
}
