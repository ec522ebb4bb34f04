import type { ActionRecord, ActionSummary, GraphEdge, GraphNode } from './context-graph.types';
import type { CheckpointRef, CheckpointState, ForkRecord, RestoreRecord } from './checkpoint.types';

// Workspace checkpoints, their restores and session forks as graph nodes and edges, shared by every store (ids,
// node and edge shapes, the refs as records hand them back, and the order `sessionGraph` lists them in), so the
// three stores cannot drift apart on them.

export const checkpointNodeId = (checkpointId: string): string => `checkpoint:${checkpointId}`;

/** A record as a store may read it back: its optional fields null (or absent) where it keeps no value. */
type Nullable<T> = { [K in keyof T]: undefined extends T[K] ? T[K] | null : T[K] };

/** A checkpoint as stored: what was recorded, how it went, and every restore of it. */
export interface StoredCheckpoint extends CheckpointState {
  /** Every `RESTORED` edge to it, in no particular order. */
  restores: RestoreRecord[];
}

/** A stored checkpoint without its restores, as `getCheckpoint` answers. */
export function checkpointState({ restores: _restores, ...state }: StoredCheckpoint): CheckpointState {
  return state;
}

/** A fork between the viewed session and another one, with that other session as the store keeps it. */
export interface ForkLink<S> {
  fork: ForkRecord;
  session: S;
}

/** What `sessionGraph` reads about a session's checkpoints and forks, besides its actions and plans. */
export interface CheckpointGraphInput<S> {
  checkpoints: StoredCheckpoint[];
  /** Where the session was forked from, with the source session. */
  origin?: ForkLink<S>;
  /** The sessions forked from it. */
  forks: ForkLink<S>[];
}

/** Nothing to add: a session without checkpoints or forks. */
export const NO_CHECKPOINTS: CheckpointGraphInput<never> = Object.freeze({ checkpoints: [], forks: [] });

/** Plain string order (UTF-16 code units), the same whichever store sorted first. */
const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const byCreation = (a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number =>
  byString(a.createdAt, b.createdAt) || byString(a.id, b.id);

/**
 * A checkpoint ref as every store hands it back: fixed keys, `label` and `deletedAt` absent (neither null nor
 * undefined) when not set, so records compare equal (even with `toStrictEqual`) across stores.
 */
export function checkpointRef(c: Nullable<CheckpointRef>): CheckpointRef {
  return {
    id: c.id,
    ...(c.label !== undefined && c.label !== null && { label: c.label }),
    createdAt: c.createdAt,
    auto: c.auto,
    ...(c.deletedAt !== undefined && c.deletedAt !== null && { deletedAt: c.deletedAt }),
  };
}

/**
 * Of several checkpoints taken before one action, the latest (by `createdAt`, then id) as a ref; undefined for
 * none.
 */
export function latestCheckpointRef(refs: readonly Nullable<CheckpointRef>[]): CheckpointRef | undefined {
  const latest = [...refs].sort(byCreation).at(-1);
  return latest && checkpointRef(latest);
}

export function storedCheckpoint(
  c: Nullable<Omit<StoredCheckpoint, 'restores'>> & { restores: readonly Nullable<RestoreRecord>[] },
): StoredCheckpoint {
  return {
    id: c.id,
    sessionId: c.sessionId,
    ...(c.label !== undefined && c.label !== null && { label: c.label }),
    createdAt: c.createdAt,
    files: c.files,
    directories: c.directories,
    bytes: c.bytes,
    auto: c.auto,
    seq: c.seq,
    ...(c.beforeActionId !== undefined && c.beforeActionId !== null && { beforeActionId: c.beforeActionId }),
    ...(c.deletedAt !== undefined && c.deletedAt !== null && { deletedAt: c.deletedAt }),
    ...(c.deleteReason !== undefined && c.deleteReason !== null && { deleteReason: c.deleteReason }),
    restores: c.restores.map(restoreRecord),
  };
}

export function restoreRecord(r: Nullable<RestoreRecord>): RestoreRecord {
  return {
    sessionId: r.sessionId,
    checkpointId: r.checkpointId,
    restoredAt: r.restoredAt,
    ...(r.actionId !== undefined && r.actionId !== null && { actionId: r.actionId }),
    ...(r.planId !== undefined && r.planId !== null && { planId: r.planId }),
  };
}

export function forkRecord(f: Nullable<ForkRecord>): ForkRecord {
  return {
    sessionId: f.sessionId,
    fromSessionId: f.fromSessionId,
    ...(f.checkpointId !== undefined && f.checkpointId !== null && { checkpointId: f.checkpointId }),
    forkedAt: f.forkedAt,
    seq: f.seq,
  };
}

/** Whether two fork records say the same thing (a second identical `recordFork` is a no-op). */
export const sameFork = (a: ForkRecord, b: ForkRecord): boolean =>
  a.sessionId === b.sessionId &&
  a.fromSessionId === b.fromSessionId &&
  a.checkpointId === b.checkpointId &&
  a.forkedAt === b.forkedAt &&
  a.seq === b.seq;

/**
 * The `Checkpoint` node. Its `id` property is the engine's checkpoint id (what the checkpoint API takes); the
 * node id is `checkpoint:<id>`. `deletedAt`/`deleteReason` once it is deleted or pruned: the node stays.
 */
export function checkpointNode(c: StoredCheckpoint): GraphNode {
  return {
    id: checkpointNodeId(c.id),
    label: 'Checkpoint',
    properties: {
      id: c.id,
      sessionId: c.sessionId,
      ...(c.label !== undefined && { label: c.label }),
      createdAt: c.createdAt,
      files: c.files,
      directories: c.directories,
      bytes: c.bytes,
      auto: c.auto,
      seq: c.seq,
      ...(c.deletedAt !== undefined && { deletedAt: c.deletedAt, deleteReason: c.deleteReason }),
    },
  };
}

/** Where a `RESTORED` edge starts: the restoring action, else the session. */
export const restoredFrom = (r: RestoreRecord): string => r.actionId ?? r.sessionId;

export const restoredProperties = (r: RestoreRecord): Record<string, unknown> => ({
  restoredAt: r.restoredAt,
  ...(r.planId !== undefined && { planId: r.planId }),
});

export const forkedProperties = (f: ForkRecord): Record<string, unknown> => ({
  forkedAt: f.forkedAt,
  seq: f.seq,
  ...(f.checkpointId !== undefined && { checkpointId: f.checkpointId }),
});

/** The part of a session graph checkpoints and forks add, each list already in its place's order. */
export interface CheckpointGraph<S> {
  /** `Checkpoint` nodes, by `createdAt` then id. */
  nodes: GraphNode[];
  /** `HAS_CHECKPOINT` and `BEFORE` (by the checkpoint's `createdAt` then id), then `RESTORED`. */
  edges: GraphEdge[];
  /** The other ends of `FORKED_FROM`: the source, then the sessions forked from this one. */
  forkSessions: S[];
  /** `FORKED_FROM`: to the source first, then from each fork, by `forkedAt` then session id. */
  forkEdges: GraphEdge[];
}

/**
 * Checkpoints, restores and forks of the session `sessionId` in graph order. Checkpoints are always there;
 * `BEFORE` and an action's `RESTORED` only when that action is `included` (a session's own restores always).
 * `RESTORED` edges come by `restoredAt`, then checkpoint id, then the node they start at.
 */
export function checkpointGraph<S>(
  sessionId: string,
  included: ReadonlySet<string>,
  input: CheckpointGraphInput<S>,
): CheckpointGraph<S> {
  const edge = (
    from: string,
    to: string,
    type: GraphEdge['type'],
    properties: Record<string, unknown> = {},
  ): GraphEdge => ({ from, to, type, properties });
  const checkpoints = [...input.checkpoints].sort(byCreation);
  const restores = checkpoints
    .flatMap((c) => c.restores)
    .filter((r) => r.actionId === undefined || included.has(r.actionId))
    .sort(
      (a, b) =>
        byString(a.restoredAt, b.restoredAt) ||
        byString(a.checkpointId, b.checkpointId) ||
        byString(restoredFrom(a), restoredFrom(b)),
    );
  const forks = [...input.forks].sort(
    (a, b) => byString(a.fork.forkedAt, b.fork.forkedAt) || byString(a.fork.sessionId, b.fork.sessionId),
  );
  const links = [...(input.origin ? [input.origin] : []), ...forks];
  return {
    nodes: checkpoints.map(checkpointNode),
    edges: [
      ...checkpoints.map((c) => edge(sessionId, checkpointNodeId(c.id), 'HAS_CHECKPOINT')),
      ...checkpoints.flatMap((c) =>
        c.beforeActionId !== undefined && included.has(c.beforeActionId)
          ? [edge(checkpointNodeId(c.id), c.beforeActionId, 'BEFORE')]
          : [],
      ),
      ...restores.map((r) =>
        edge(restoredFrom(r), checkpointNodeId(r.checkpointId), 'RESTORED', restoredProperties(r)),
      ),
    ],
    forkSessions: links.map((l) => l.session),
    forkEdges: links.map((l) =>
      edge(l.fork.sessionId, l.fork.fromSessionId, 'FORKED_FROM', forkedProperties(l.fork)),
    ),
  };
}

/**
 * What a retry with `restore: true` would restore (see `FailureContext.checkpoint`): the action's own
 * checkpoint, else that of the nearest action up its `retryOf` chain that has one (`ancestorCheckpoints`, by
 * action id); `null` when none does.
 */
export function restorableCheckpoint(
  action: ActionRecord,
  ancestors: readonly ActionSummary[],
  ancestorCheckpoints: ReadonlyMap<string, CheckpointRef>,
): CheckpointRef | null {
  if (action.checkpoint) return checkpointRef(action.checkpoint);
  const retryOf = new Map(ancestors.map((a) => [a.id, a.retryOf]));
  const seen = new Set<string>();
  for (let id = action.retryOf; id !== undefined && !seen.has(id); id = retryOf.get(id)) {
    seen.add(id);
    const ref = ancestorCheckpoints.get(id);
    if (ref) return checkpointRef(ref);
  }
  return null;
}
