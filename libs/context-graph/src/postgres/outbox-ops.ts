import type { ContextGraph } from '../context-graph.port';
import { decodeArgs } from './outbox-args-codec';

/** The port's writes, each of which an outbox entry names (`op`) and the forwarder calls again on Neo4j. */
export const OUTBOX_OPS = [
  'recordSession',
  'recordActionStarted',
  'recordApprovalDecision',
  'recordActionCompleted',
  'recordPlan',
  'recordCheckpoint',
  'recordCheckpointDeleted',
  'recordRestore',
  'recordFork',
  'endSession',
] as const satisfies readonly (keyof ContextGraph)[];

export type OutboxOp = (typeof OUTBOX_OPS)[number];

/** The arguments of write `op`, as the port declares them. */
export type OutboxArgs<Op extends OutboxOp> = Parameters<ContextGraph[Op]>;

/** One outbox entry as read back for forwarding. */
export interface OutboxEntry {
  /** The `bigserial` id, as text (exact beyond 2^53). */
  id: string;
  sessionId: string | null;
  op: string;
  /** The `jsonb` value as `pg` parses it: encoded by `outbox-args-codec.ts`. */
  args: unknown;
}

const KNOWN: ReadonlySet<string> = new Set(OUTBOX_OPS);

export function isOutboxOp(op: string): op is OutboxOp {
  return KNOWN.has(op);
}

/**
 * Calls the entry's write on `graph` with its arguments. An entry this version cannot read (a write it does not
 * know, or an encoding from a newer replica) rejects with a plain `Error`: the forwarder retries it rather than drop
 * a record.
 */
export async function applyEntry(
  graph: ContextGraph,
  entry: Pick<OutboxEntry, 'op' | 'args'>,
): Promise<void> {
  if (!isOutboxOp(entry.op)) throw new Error(`unknown outbox operation ${JSON.stringify(entry.op)}`);
  const write = graph[entry.op] as (...args: unknown[]) => Promise<void>;
  await write.apply(graph, decodeArgs(entry.args));
}
