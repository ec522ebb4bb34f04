import { ContextGraphClosedError, GraphStoreConnectionError } from '../context-graph.errors';
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
import type { Neo4jContextGraph } from '../neo4j/neo4j-context-graph';
import { encodeArgs } from './outbox-args-codec';
import type { OutboxArgs, OutboxOp } from './outbox-ops';
import { PostgresOutbox } from './postgres-outbox';
import { SYSTEM_TIMERS } from '../replication/forwarder-retry';
import { type PostgresForwarderOptions, PostgresOutboxForwarder } from './postgres-outbox-forwarder';
import { OutboxListener } from './postgres-outbox-listener';

export interface PostgresOutboxGraphOptions {
  /** The replicas' shared Postgres, `postgres://user:password@host:port/database`: it holds the outbox. */
  databaseUrl: string;
  /** The store of record, not yet initialised: `init()` initialises it and `close()` closes it. */
  neo4j: Neo4jContextGraph;
  /** Most Postgres connections this store opens (plus one to LISTEN on). Default 4. */
  poolSize?: number;
  forwarder?: PostgresForwarderOptions;
  /**
   * How long a read (and `markRunningInterrupted`) waits for Neo4j to hold every record written before it, before
   * failing with `GraphStoreConnectionError`. Default 5000.
   */
  readTimeoutMs?: number;
  /** On close, how long to keep forwarding what is left while Neo4j answers; 0 leaves it to the other replicas. Default 2000. */
  drainOnCloseMs?: number;
}

/**
 * The graph of engine replicas: Neo4j is the store of record, and its durable outbox is a Postgres table every
 * replica shares, so a record survives the replica that wrote it and any replica may write any session's records.
 *
 * - Writes append one outbox entry (the port method's name and its arguments, see `outbox-args-codec.ts`) in one
 *   INSERT and resolve once it commits: they never wait for Neo4j. The checks a write makes (unknown session, an
 *   action ended already…) happen when it is applied: a write Neo4j refuses is logged and dropped, so the errors
 *   documented on the port's writes are not thrown here.
 * - A {@link PostgresOutboxForwarder} applies entries to Neo4j by calling the same method, one replica at a time,
 *   strictly in id order. A crash between applying and deleting applies entries again, so every Neo4j write is
 *   idempotent, also when an older entry is applied again after a newer one (a start after its completion
 *   changes nothing).
 * - Reads are read-your-writes across replicas: each first waits until every entry the outbox held when it began
 *   has been applied (applying them itself when it can), then asks Neo4j.
 */
export class PostgresOutboxGraph extends ContextGraph {
  private readonly outbox: PostgresOutbox;
  private readonly neo4j: Neo4jContextGraph;
  readonly forwarder: PostgresOutboxForwarder;
  private readonly listener: OutboxListener;
  /** Calls in flight, so `close()` can wait for them: writes before the last forwarding, reads after it. */
  private readonly writes = new Set<Promise<unknown>>();
  private readonly reads = new Set<Promise<unknown>>();
  private closing: Promise<void> | undefined;
  private lastBacklog = 0;
  /** `init()` went through: there is a Neo4j to forward to on close. */
  private running = false;

  constructor(private readonly options: PostgresOutboxGraphOptions) {
    super();
    this.outbox = new PostgresOutbox({ databaseUrl: options.databaseUrl, poolSize: options.poolSize });
    this.neo4j = options.neo4j;
    this.forwarder = new PostgresOutboxForwarder(this.outbox, this.neo4j, options.forwarder);
    this.listener = new OutboxListener(
      options.databaseUrl,
      () => this.forwarder.wake(),
      options.forwarder?.timers ?? SYSTEM_TIMERS,
    );
  }

  /** Creates the outbox table (once, whichever replica comes first), then initialises Neo4j, then forwards. */
  override async init(): Promise<void> {
    if (this.closing) throw new ContextGraphClosedError();
    try {
      await this.outbox.createSchema();
    } catch (error) {
      const where = this.outbox.where;
      throw new Error(`cannot prepare the graph outbox in Postgres at ${where}: ${message(error)}`, {
        cause: error,
      });
    }
    await this.neo4j.init(); // on failure the owner calls close(), which releases the pool too
    this.forwarder.start();
    this.running = true;
    await this.listener.start();
  }

  override recordSession(session: SessionRecord): Promise<void> {
    return this.enqueue('recordSession', session.id, [session]);
  }

  override recordActionStarted(action: ActionStart): Promise<void> {
    return this.enqueue('recordActionStarted', action.sessionId, [action]);
  }

  override recordApprovalDecision(actionId: string, decision: ApprovalDecision): Promise<void> {
    return this.enqueue('recordApprovalDecision', null, [actionId, decision]);
  }

  override recordActionCompleted(actionId: string, completion: ActionCompletion): Promise<void> {
    return this.enqueue('recordActionCompleted', completion.result.sessionId, [actionId, completion]);
  }

  override recordPlan(plan: PlanGraphRecord): Promise<void> {
    return this.enqueue('recordPlan', plan.sessionId, [plan]);
  }

  override recordCheckpoint(checkpoint: CheckpointRecord): Promise<void> {
    return this.enqueue('recordCheckpoint', checkpoint.sessionId, [checkpoint]);
  }

  override recordCheckpointDeleted(
    sessionId: string,
    checkpointId: string,
    deletedAt: string,
    reason: 'deleted' | 'pruned',
  ): Promise<void> {
    return this.enqueue('recordCheckpointDeleted', sessionId, [sessionId, checkpointId, deletedAt, reason]);
  }

  override recordRestore(restore: RestoreRecord): Promise<void> {
    return this.enqueue('recordRestore', restore.sessionId, [restore]);
  }

  override recordFork(fork: ForkRecord): Promise<void> {
    return this.enqueue('recordFork', fork.sessionId, [fork]);
  }

  override endSession(sessionId: string, endedAt: string, reason: 'deleted' | 'expired'): Promise<void> {
    return this.enqueue('endSession', sessionId, [sessionId, endedAt, reason]);
  }

  override getAction(sessionId: string, actionId: string): Promise<ActionRecord | undefined> {
    return this.read((g) => g.getAction(sessionId, actionId));
  }

  override lastActionSeq(sessionId: string): Promise<number> {
    return this.read((g) => g.lastActionSeq(sessionId));
  }

  override getCheckpoint(sessionId: string, checkpointId: string): Promise<CheckpointState | undefined> {
    return this.read((g) => g.getCheckpoint(sessionId, checkpointId));
  }

  override listActions(sessionId: string, query: ListActionsQuery): Promise<Page<ActionRecord>> {
    return this.read((g) => g.listActions(sessionId, query));
  }

  override sessionGraph(sessionId: string, filter?: GraphFilter): Promise<GraphView> {
    return this.read((g) => g.sessionGraph(sessionId, filter));
  }

  override failureContext(
    sessionId: string,
    actionId: string,
    query: FailureContextQuery,
  ): Promise<FailureContext | undefined> {
    return this.read((g) => g.failureContext(sessionId, actionId, query));
  }

  override fileLineage(sessionId: string, path: string): Promise<FileLineage> {
    return this.read((g) => g.fileLineage(sessionId, path));
  }

  override sessionActivity(sessionIds: readonly string[]): Promise<Map<string, SessionActivity>> {
    return this.read((g) => g.sessionActivity(sessionIds));
  }

  /**
   * A recovery step, so it reports what it did: applies the outbox first (the starts it ends may still be there),
   * then marks Neo4j's open actions directly and returns how many it marked.
   */
  override markRunningInterrupted(endedAt: string, sessionIds?: readonly string[]): Promise<number> {
    return this.read((g) => g.markRunningInterrupted(endedAt, sessionIds));
  }

  /** Neo4j's health, `degraded` too while entries cannot be applied, with how many wait (`backlog`). */
  override async health(): Promise<GraphHealth> {
    if (this.closing) throw new ContextGraphClosedError();
    const [neo4j, backlog] = await Promise.all([
      this.neo4j.health(),
      this.outbox.size().then(
        (n) => n,
        (error: unknown) => new Error(`cannot count the outbox in Postgres: ${message(error)}`),
      ),
    ]);
    if (typeof backlog === 'number') this.lastBacklog = backlog;
    const forwarder = this.forwarder.state();
    const error =
      backlog instanceof Error
        ? backlog.message
        : neo4j.status === 'degraded'
          ? neo4j.error
          : forwarder.error;
    const degraded =
      backlog instanceof Error || neo4j.status === 'degraded' || forwarder.status === 'degraded';
    return {
      store: 'neo4j',
      status: degraded ? 'degraded' : 'ok',
      backlog: this.lastBacklog,
      ...(degraded && error !== undefined && { error }),
    };
  }

  /**
   * Stops taking calls, lets those in flight finish, forwards what is left for up to `drainOnCloseMs` (entries
   * still waiting stay in Postgres for the other replicas), then closes Neo4j and the pool. Idempotent.
   */
  override close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** Waits until Neo4j holds every entry written so far, for at most `timeoutMs`; true if it does. */
  drain(timeoutMs: number): Promise<boolean> {
    return this.forwarder.catchUp(timeoutMs);
  }

  private async shutdown(): Promise<void> {
    await Promise.allSettled([...this.writes]);
    try {
      const drainMs = this.options.drainOnCloseMs ?? 2000;
      if (this.running && drainMs > 0 && this.forwarder.state().status === 'ok') {
        await this.forwarder.catchUp(drainMs).catch(() => false);
      }
      await this.forwarder.close(); // reads still waiting for it give up (ContextGraphClosedError)
      await this.listener.stop();
      await Promise.allSettled([...this.reads]);
    } finally {
      await Promise.allSettled([this.neo4j.close(), this.outbox.close()]);
    }
  }

  private enqueue<Op extends OutboxOp>(
    op: Op,
    sessionId: string | null,
    args: OutboxArgs<Op>,
  ): Promise<void> {
    return this.track(this.writes, async () => {
      await this.outbox.append(sessionId, op, encodeArgs(args));
      this.forwarder.wake();
    });
  }

  /** After every entry written before it has reached Neo4j, asks Neo4j. */
  private read<T>(query: (graph: Neo4jContextGraph) => Promise<T>): Promise<T> {
    return this.track(this.reads, async () => {
      const timeoutMs = this.options.readTimeoutMs ?? 5000;
      if (!(await this.forwarder.catchUp(timeoutMs))) {
        if (this.closing) throw new ContextGraphClosedError();
        const why = this.forwarder.state().error ?? 'another replica is still applying it';
        throw new GraphStoreConnectionError(
          'uri',
          `Neo4j did not catch up with the graph outbox within ${timeoutMs} ms (${why}); try again later`,
        );
      }
      return query(this.neo4j);
    });
  }

  /** Runs a port call, so `close()` can wait for it. */
  private track<T>(inFlight: Set<Promise<unknown>>, work: () => Promise<T>): Promise<T> {
    if (this.closing) return Promise.reject(new ContextGraphClosedError());
    const promise = work();
    inFlight.add(promise);
    const forget = (): void => void inFlight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
