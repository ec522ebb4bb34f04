import type { StoredCheckpoint } from '../context-graph.checkpoints';
import type { ActionRecord } from '../context-graph.types';
import type { ForkRecord } from '../checkpoint.types';
import type { SessionState, StoredPlan } from '../context-graph.views';

/**
 * An action as copied to a replica: its full current record (with its approval and caller: a decision re-sends
 * the action), and the action before it (for `NEXT`).
 */
export interface ReplicaAction extends ActionRecord {
  /** The session's action with `seq - 1`, if any. */
  prevId?: string;
}

/** Current state of what a run of outbox entries named. */
export interface ReplicaChanges {
  /** Sessions to create or update, applied first. */
  sessions: SessionState[];
  /** Actions to create or update, in outbox order (so an action's predecessor comes before it). */
  actions: ReplicaAction[];
  /** Plans to upsert, after the actions (their `ATTEMPT` edges need them); absent when there are none. */
  plans?: StoredPlan[];
  /**
   * Checkpoints to upsert with every restore of them, after the actions (`BEFORE` and `RESTORED` start or end
   * there); absent when there are none.
   */
  checkpoints?: StoredCheckpoint[];
  /** Fork origins to record, after the sessions; absent when there are none. */
  forks?: ForkRecord[];
}

/** The oldest outbox entries, read for copying. */
export interface OutboxBatch extends ReplicaChanges {
  /** Highest entry id covered; pass to `outboxAck` once the changes are copied. 0 when the outbox is empty. */
  lastId: number;
  /** How many entries the batch covers (duplicates of the same record included). */
  entries: number;
}

/**
 * A store that accepts copies of records. Applying must be idempotent and must converge on the given state:
 * applying the same changes twice, or an older batch again after a newer one, leaves the same graph.
 */
export interface ReplicaTarget {
  applyReplica(changes: ReplicaChanges): Promise<void>;
  /** Resolves when the replica answers; rejects otherwise. */
  ping(): Promise<void>;
}
