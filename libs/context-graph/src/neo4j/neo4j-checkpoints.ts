import neo4j from 'neo4j-driver';
import {
  type CheckpointGraphInput,
  checkpointNodeId,
  forkRecord,
  latestCheckpointRef,
  sameFork,
  type StoredCheckpoint,
  storedCheckpoint,
} from '../context-graph.checkpoints';
import {
  ActionNotRecordedError,
  CheckpointNotRecordedError,
  ForkConflictError,
  SessionNotRecordedError,
} from '../context-graph.errors';
import type { CheckpointRecord, CheckpointRef, ForkRecord, RestoreRecord } from '../checkpoint.types';
import * as Q from './neo4j-cypher';
import type { WriteStatement } from './neo4j-write';

// Workspace checkpoints, restores and forks in the Neo4j store: their writes (one statement each, the row it
// answers turned into the port's errors), the parameters their statements (in neo4j-cypher.ts) read, and the
// records rebuilt from what those statements return. Kept apart from the store so its file does not grow with
// every new kind of node.

/** Node properties as they come back (integers already JS numbers). */
type Props = Record<string, unknown>;

export async function writeCheckpoint(write: WriteStatement, c: CheckpointRecord): Promise<void> {
  const [row] = await write(Q.RECORD_CHECKPOINT, {
    id: checkpointNodeId(c.id),
    sessionId: c.sessionId,
    beforeActionId: c.beforeActionId ?? null,
    props: checkpointProperties(c),
  });
  if (!row.hasSession) throw new SessionNotRecordedError(c.sessionId);
  if (!row.hasAction) throw new ActionNotRecordedError(c.beforeActionId!, c.sessionId);
}

export async function writeCheckpointDeleted(
  write: WriteStatement,
  sessionId: string,
  checkpointId: string,
  deletedAt: string,
  reason: 'deleted' | 'pruned',
): Promise<void> {
  const [row] = await write(Q.RECORD_CHECKPOINT_DELETED, {
    id: checkpointNodeId(checkpointId),
    sessionId,
    deletedAt,
    reason,
  });
  if (row.n === 0) throw new CheckpointNotRecordedError(checkpointId, sessionId);
}

export async function writeRestore(write: WriteStatement, r: RestoreRecord): Promise<void> {
  const [row] = await write(Q.RECORD_RESTORE, {
    sessionId: r.sessionId,
    actionId: r.actionId ?? null,
    checkpointId: checkpointNodeId(r.checkpointId),
    restoredAt: r.restoredAt,
    planId: r.planId ?? null,
  });
  if (!row.hasSession) throw new SessionNotRecordedError(r.sessionId);
  if (!row.hasAction) throw new ActionNotRecordedError(r.actionId!, r.sessionId);
  if (!row.hasCheckpoint) throw new CheckpointNotRecordedError(r.checkpointId, r.sessionId);
}

/** Checks in the order the port documents (as the embedded store does): sessions, checkpoint, origin, cycle. */
export async function writeFork(write: WriteStatement, f: ForkRecord): Promise<void> {
  const [row] = await write(Q.RECORD_FORK, {
    sessionId: f.sessionId,
    fromSessionId: f.fromSessionId,
    checkpointId: f.checkpointId === undefined ? null : checkpointNodeId(f.checkpointId),
    props: forkProperties(f),
  });
  if (!row.hasSession) throw new SessionNotRecordedError(f.sessionId);
  if (!row.hasSource) throw new SessionNotRecordedError(f.fromSessionId);
  if (!row.hasCheckpoint) throw new CheckpointNotRecordedError(f.checkpointId!, f.fromSessionId);
  const existing = row.existing as Props | null;
  if (existing && !sameFork(toFork(existing), f)) {
    throw new ForkConflictError(f.sessionId, f.fromSessionId, 'already_forked');
  }
  if (!existing && row.cycle) throw new ForkConflictError(f.sessionId, f.fromSessionId, 'cycle');
}

/**
 * A `Checkpoint` node's properties: the graph's node id as `id`, the engine's as `checkpointId` (like kernels),
 * counts as Cypher integers. Nulls for what is not set, so the replica's `+=` converges.
 */
function checkpointProperties(c: CheckpointRecord): Props {
  return {
    id: checkpointNodeId(c.id),
    checkpointId: c.id,
    sessionId: c.sessionId,
    label: c.label ?? null,
    createdAt: c.createdAt,
    files: neo4j.int(c.files),
    directories: neo4j.int(c.directories),
    bytes: neo4j.int(c.bytes),
    auto: c.auto,
    seq: neo4j.int(c.seq),
  };
}

/** A `FORKED_FROM` edge's properties (absent `checkpointId` left out: `SET e = $props` keeps no nulls). */
function forkProperties(f: ForkRecord): Props {
  return {
    forkedAt: f.forkedAt,
    seq: neo4j.int(f.seq),
    ...(f.checkpointId !== undefined && { checkpointId: f.checkpointId }),
  };
}

/** A stored checkpoint as `REPLICATE_CHECKPOINTS` takes it: node, deletion, edges split by where they start. */
export function checkpointReplicaParam(c: StoredCheckpoint): Props {
  const restore = (r: RestoreRecord): Props => ({
    actionId: r.actionId ?? null,
    restoredAt: r.restoredAt,
    planId: r.planId ?? null,
  });
  return {
    id: checkpointNodeId(c.id),
    sessionId: c.sessionId,
    props: checkpointProperties(c),
    deletedAt: c.deletedAt ?? null,
    deleteReason: c.deleteReason ?? null,
    before: c.beforeActionId === undefined ? [] : [c.beforeActionId],
    sessionRestores: c.restores.filter((r) => r.actionId === undefined).map(restore),
    actionRestores: c.restores.filter((r) => r.actionId !== undefined).map(restore),
  };
}

export function forkReplicaParam(f: ForkRecord): Props {
  return { sessionId: f.sessionId, fromSessionId: f.fromSessionId, props: forkProperties(f) };
}

/** The checkpoint taken before an action, from the `checkpoints` of its projection (the latest of them). */
export function checkpointRefOf(p: Props): CheckpointRef | undefined {
  return latestCheckpointRef((p.checkpoints as Parameters<typeof latestCheckpointRef>[0] | null) ?? []);
}

/** A checkpoint from `checkpointMap`'s projection. */
export function toStoredCheckpoint(p: Props): StoredCheckpoint {
  const sessionId = p.sessionId as string;
  const checkpointId = p.checkpointId as string;
  return storedCheckpoint({
    id: checkpointId,
    sessionId,
    label: p.label as string | null,
    createdAt: p.createdAt as string,
    files: p.files as number,
    directories: p.directories as number,
    bytes: p.bytes as number,
    auto: p.auto as boolean,
    seq: p.seq as number,
    beforeActionId: p.beforeActionId as string | null,
    deletedAt: p.deletedAt as string | null,
    deleteReason: p.deleteReason as StoredCheckpoint['deleteReason'] | null,
    restores: (p.restores as { actionId: string | null; restoredAt: string; planId: string | null }[]).map(
      (r) => ({ sessionId, checkpointId, ...r }),
    ),
  });
}

/** A fork from a `FORKED_FROM` edge's properties plus the two session ids. */
export function toFork(p: Props): ForkRecord {
  return forkRecord({
    sessionId: p.sessionId as string,
    fromSessionId: p.fromSessionId as string,
    checkpointId: p.checkpointId as string | null,
    forkedAt: p.forkedAt as string,
    seq: p.seq as number,
  });
}

/**
 * What `SESSION_GRAPH` returns of a session's checkpoints and forks (`checkpoints`, `origin`, `forks`), as
 * `buildGraphView` takes it; `toSession` reads the other sessions' nodes.
 */
export function toCheckpointGraphInput<S>(row: Props, toSession: (p: Props) => S): CheckpointGraphInput<S> {
  type Link = { fork: Props; session: Props };
  const link = (l: Link) => ({ fork: toFork(l.fork), session: toSession(l.session) });
  const [origin] = (row.origin as Link[]).map(link);
  return {
    checkpoints: (row.checkpoints as Props[]).map(toStoredCheckpoint),
    ...(origin && { origin }),
    forks: (row.forks as Link[]).map(link),
  };
}

/** `FAILURE_CONTEXT`'s `ancestorCheckpoints` (each ancestor's id and checkpoints): the latest ref by action id. */
export function toAncestorCheckpoints(rows: Props[]): Map<string, CheckpointRef> {
  return new Map(
    rows.flatMap((a): [string, CheckpointRef][] => {
      const ref = checkpointRefOf(a);
      return ref ? [[a.actionId as string, ref]] : [];
    }),
  );
}
