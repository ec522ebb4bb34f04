import {
  approvalProjection,
  callerProjection,
  replicaApprovalEdges,
  startApprovalEdges,
} from './neo4j-approvals';

// Every statement the Neo4j adapter runs. Values always travel as parameters; the only text put together
// here is the fixed projections and fragments below, so no caller input ever reaches the Cypher text.
//
// Model: (:Session)-[:HAS_ACTION]->(:Action), (:Action)-[:NEXT]->(:Action) by seq, (:Action)-[:READ|WROTE]->
// (:File), (:Action)-[:RETRY_OF]->(:Action), (:Action)-[:RAN_IN]->(:Sandbox), (:Action)-[:RAN_IN {executionCount,
// started}]->(:Kernel), (:Action)-[:STARTED]->(:Process), (:Session)-[:HAS_CHECKPOINT]->(:Checkpoint)
// -[:BEFORE]->(:Action), (:Session|Action)-[:RESTORED {restoredAt, planId}]->(:Checkpoint), (:Session)
// -[:FORKED_FROM {forkedAt, seq, checkpointId}]->(:Session), (:Session)-[:HAS_PLAN]->(:Plan)-[:HAS_STEP]->(:Step),
// (:Step)-[:DEPENDS_ON|REPLACES]->(:Step), (:Step)-[:ATTEMPT]->(:Action), and approvals and calls (see
// neo4j-approvals.ts). Actions carry `sessionId` so one
// composite index answers every per-session lookup; the session's `lastSeq` hands out gapless seqs; WROTE edges
// carry the file's id and the writer's seq, indexed, for last-writer lookups.

/** Schema, one statement per transaction (Neo4j does not mix schema and data changes). */
export const SCHEMA: readonly string[] = [
  'CREATE CONSTRAINT session_id IF NOT EXISTS FOR (s:Session) REQUIRE s.id IS UNIQUE',
  'CREATE CONSTRAINT action_id IF NOT EXISTS FOR (a:Action) REQUIRE a.id IS UNIQUE',
  'CREATE CONSTRAINT file_id IF NOT EXISTS FOR (f:File) REQUIRE f.id IS UNIQUE',
  'CREATE CONSTRAINT sandbox_id IF NOT EXISTS FOR (b:Sandbox) REQUIRE b.id IS UNIQUE',
  'CREATE CONSTRAINT kernel_id IF NOT EXISTS FOR (k:Kernel) REQUIRE k.id IS UNIQUE',
  'CREATE CONSTRAINT process_id IF NOT EXISTS FOR (pr:Process) REQUIRE pr.id IS UNIQUE',
  'CREATE CONSTRAINT approval_id IF NOT EXISTS FOR (ap:Approval) REQUIRE ap.id IS UNIQUE',
  'CREATE CONSTRAINT checkpoint_id IF NOT EXISTS FOR (c:Checkpoint) REQUIRE c.id IS UNIQUE',
  'CREATE CONSTRAINT plan_id IF NOT EXISTS FOR (p:Plan) REQUIRE p.id IS UNIQUE',
  'CREATE CONSTRAINT step_id IF NOT EXISTS FOR (st:Step) REQUIRE st.id IS UNIQUE',
  'CREATE INDEX action_session_seq IF NOT EXISTS FOR (a:Action) ON (a.sessionId, a.seq)',
  'CREATE INDEX action_session_started IF NOT EXISTS FOR (a:Action) ON (a.sessionId, a.startedAt)',
  'CREATE INDEX action_status IF NOT EXISTS FOR (a:Action) ON (a.status)',
  'CREATE INDEX session_created IF NOT EXISTS FOR (s:Session) ON (s.createdAt)',
  // "Which earlier action last wrote this file" is one index entry, not a walk over every writer of the file.
  'CREATE INDEX wrote_file_seq IF NOT EXISTS FOR ()-[w:WROTE]-() ON (w.fileId, w.seq)',
];

export const AWAIT_INDEXES = 'CALL db.awaitIndexes(60)';

/** The refs of the checkpoints taken before action `v` (the store keeps the latest). */
const checkpointRefs = (v: string): string =>
  `[(${v})<-[:BEFORE]-(c:Checkpoint) | c {id: c.checkpointId, .label, .createdAt, .auto, .deletedAt}]`;

/**
 * An action as a map with its files, original, sandbox, kernel, started process, caller, approval and
 * checkpoints: everything an `ActionRecord` holds.
 */
const actionMap = (v: string): string => `${v} {.*,
  files: [(${v})-[r:READ|WROTE]->(f:File) | {path: f.path, access: CASE type(r) WHEN 'READ' THEN 'read' ELSE 'write' END}],
  retryOf: [(${v})-[:RETRY_OF]->(o:Action) | o.id][0],
  retryReason: [(${v})-[r:RETRY_OF]->(:Action) | r.reason][0],
  sandbox: [(${v})-[:RAN_IN]->(b:Sandbox) | b {.tier, .containerId, .runtime}][0],
  kernel: [(${v})-[r:RAN_IN]->(k:Kernel) | {id: k.kernelId, language: k.language, tier: k.tier,
    executionCount: r.executionCount, started: r.started}][0],
  startedProcess: [(${v})-[:STARTED]->(pr:Process) | {id: pr.processId, name: pr.name, command: pr.command,
    tier: pr.tier, startedAt: pr.startedAt}][0],
  ${callerProjection(v)},
  ${approvalProjection(v)},
  checkpoints: ${checkpointRefs(v)}}`;

/** A checkpoint with its `BEFORE` action and every restore of it: everything a `StoredCheckpoint` holds. */
const checkpointMap = (v: string): string => `${v} {.*,
  beforeActionId: [(${v})-[:BEFORE]->(x:Action) | x.id][0],
  restores: [(f)-[r:RESTORED]->(${v}) | {actionId: CASE WHEN f:Action THEN f.id END, restoredAt: r.restoredAt,
    planId: r.planId}]}`;

/**
 * The `Kernel`/`Process` nodes (one per id: MERGE, properties set on creation) and the action's `RAN_IN`
 * (properties set, so a replay converges) and `STARTED` edges; the server a connection reached, as the action's
 * properties `reachedKind`/`reachedId`/`reachedPort` and a `REACHED` edge `{port}` when its node exists. `kernels` and `processes` are lists of zero or
 * one parameter maps (see `neo4j-stateful.ts`); shared by the completion and the replica so they cannot drift.
 */
const statefulEdges = (
  a: string,
  kernels: string,
  processes: string,
  sessionId: string,
  reached: string,
  imports: string,
): string => `
  FOREACH (k IN ${kernels} |
    MERGE (kn:Kernel {id: k.id})
      ON CREATE SET kn.kernelId = k.kernelId, kn.sessionId = ${sessionId}, kn.language = k.language, kn.tier = k.tier
    MERGE (${a})-[r:RAN_IN]->(kn) SET r.executionCount = k.executionCount, r.started = k.started)
  FOREACH (p IN ${processes} |
    MERGE (pn:Process {id: p.id})
      ON CREATE SET pn.processId = p.processId, pn.sessionId = ${sessionId}, pn.name = p.name,
        pn.command = p.command, pn.tier = p.tier, pn.startedAt = p.startedAt
    MERGE (${a})-[:STARTED]->(pn))
  FOREACH (t IN ${reached} | SET ${a}.reachedKind = t.kind, ${a}.reachedId = t.targetId, ${a}.reachedPort = t.port)
  WITH ${imports}
  CALL (${imports}) {
    UNWIND ${reached} AS t
    OPTIONAL MATCH (rp:Process {id: t.id})
    OPTIONAL MATCH (rk:Kernel {id: t.id})
    WITH ${a}, t, coalesce(rp, rk) AS rn WHERE rn IS NOT NULL
    MERGE (${a})-[r:REACHED]->(rn) SET r.port = t.port
  }`;

/** How far an action's status has come: 0 none yet, 1 awaiting approval, 2 running, 3 ended. */
const statusRank = (s: string): string =>
  `CASE WHEN ${s} IS NULL THEN 0 WHEN ${s} = 'awaiting_approval' THEN 1 WHEN ${s} = 'running' THEN 2 ELSE 3 END`;

/** A plan with its steps and their edges: everything a `StoredPlan` holds. */
const planMap = (v: string): string => `${v} {.*, steps: [(${v})-[:HAS_STEP]->(st:Step) | st {.*,
  dependsOn: [(st)-[:DEPENDS_ON]->(d:Step) | d.id],
  attempts: [(st)-[:ATTEMPT]->(x:Action) | x.id],
  replaces: [(st)-[:REPLACES]->(o:Step) | o.id][0]}]}`;

/** What an `ActionSummary` needs, without the input, output and result. */
const summaryMap = (v: string): string => `${v} {.id, .sessionId, .seq, .type, .operation, .status,
  .inputSummary, .inputHash, .startedAt, .endedAt, .durationMs, .tier, .riskScore, .riskLevel, .exitCode,
  .errorClass, .errorMessage, .errorCode, retryOf: [(${v})-[:RETRY_OF]->(o:Action) | o.id][0],
  retryReason: [(${v})-[r:RETRY_OF]->(:Action) | r.reason][0], ${callerProjection(v)}}`;

// The first record of a session id is kept: recording it again (an outbox entry applied twice) changes nothing.
export const RECORD_SESSION = `
MERGE (s:Session {id: $id})
  ON CREATE SET s.tenant = $tenant, s.createdAt = $createdAt, s.metadata = $metadata, s.lastSeq = 0`;

// Every start in a session first takes the session's write lock (the `_lock` write, Neo4j's documented way
// to lock a node), so concurrent starts queue there before holding anything else: seqs come out gapless in
// commit order, and there is no lock cycle to deadlock on. No row back: the session does not exist. An action
// recorded already is left as it is (a start applied again, even after its completion, neither reopens it nor
// takes another seq).
export const RECORD_ACTION_STARTED = `
MATCH (s:Session {id: $sessionId})
SET s._lock = true
REMOVE s._lock
WITH s
OPTIONAL MATCH (o:Action {id: $retryOf}) WHERE o.sessionId = $sessionId
OPTIONAL MATCH (c:Action {id: $callerId}) WHERE c.sessionId = $sessionId
WITH s, o, c, ($retryOf IS NULL OR o IS NOT NULL) AS hasOriginal, ($callerId IS NULL OR c IS NOT NULL) AS hasCaller,
  EXISTS { MATCH (:Action {id: $id}) } AS recorded
CALL (s, o, c, hasOriginal, hasCaller, recorded) {
  WITH s, o, c WHERE hasOriginal AND hasCaller AND NOT recorded
  SET s.lastSeq = coalesce(s.lastSeq, 0) + 1
  WITH s, o, c, s.lastSeq AS seq
  CREATE (a:Action)
  SET a = $props, a.seq = seq
  CREATE (s)-[:HAS_ACTION]->(a)
  FOREACH (_ IN CASE WHEN o IS NULL THEN [] ELSE [1] END | CREATE (a)-[:RETRY_OF {reason: $retryReason}]->(o))
  ${startApprovalEdges('a', 'c')}
  WITH s, a, seq
  OPTIONAL MATCH (p:Action {sessionId: s.id, seq: seq - 1})
  FOREACH (_ IN CASE WHEN p IS NULL THEN [] ELSE [1] END | CREATE (p)-[:NEXT]->(a))
  RETURN collect(seq) AS seqs
}
RETURN hasOriginal, hasCaller, seqs`;

// The `_lock` write takes the action's write lock before its status is read, so two completions of one
// action cannot both see it open (`$open`: running or awaiting approval). Paths come sorted, so concurrent
// completions lock files in one order.
export const RECORD_ACTION_COMPLETED = `
MATCH (a:Action {id: $id})
SET a._lock = true
WITH a, a.status AS before
REMOVE a._lock
WITH a, before
CALL (a, before) {
  WITH a WHERE before IN $open
  SET a += $props
  FOREACH (path IN $reads |
    MERGE (f:File {id: 'file:' + a.sessionId + ':' + path}) ON CREATE SET f.sessionId = a.sessionId, f.path = path
    MERGE (a)-[:READ]->(f))
  FOREACH (path IN $writes |
    MERGE (f:File {id: 'file:' + a.sessionId + ':' + path}) ON CREATE SET f.sessionId = a.sessionId, f.path = path
    MERGE (a)-[w:WROTE]->(f) SET w.fileId = f.id, w.seq = a.seq)
  FOREACH (b IN $sandbox |
    MERGE (x:Sandbox {id: b.id}) ON CREATE SET x.tier = b.tier, x.containerId = b.containerId, x.runtime = b.runtime,
      x.sessionId = a.sessionId
    MERGE (a)-[:RAN_IN]->(x))${statefulEdges('a', '$kernel', '$process', 'a.sessionId', '$reached', 'a')}
}
RETURN before`;

// `$open`: running or awaiting approval (an undecided approval stays undecided); `$sessionIds` null for all.
export const MARK_RUNNING_INTERRUPTED = `
MATCH (a:Action) WHERE a.status IN $open AND ($sessionIds IS NULL OR a.sessionId IN $sessionIds)
SET a.status = 'interrupted', a.endedAt = $endedAt, a.errorClass = $errorClass, a.errorMessage = $errorMessage
REMOVE a.errorCode
RETURN count(a) AS n`;

export const END_SESSION = `
MATCH (s:Session {id: $id})
SET s.endedAt = coalesce(s.endedAt, $endedAt), s.endReason = coalesce(s.endReason, $reason)
RETURN count(s) AS n`;

export const GET_ACTION = `
MATCH (a:Action {id: $actionId}) WHERE a.sessionId = $sessionId
RETURN ${actionMap('a')} AS action`;

export const LIST_ACTIONS = `
MATCH (a:Action) WHERE a.sessionId = $sessionId AND a.seq > $after
WITH a ORDER BY a.seq LIMIT $limit
RETURN ${actionMap('a')} AS action`;

// The latest `limit` matching actions (null parameters switch a predicate off), collected newest first.
export const SESSION_GRAPH = `
MATCH (s:Session {id: $sessionId})
CALL (s) {
  MATCH (a:Action) WHERE a.sessionId = s.id
    AND ($since IS NULL OR a.startedAt >= $since)
    AND ($types IS NULL OR a.type IN $types)
    AND ($status IS NULL OR a.status IN $status)
  WITH a ORDER BY a.seq DESC LIMIT $limit
  RETURN collect(${actionMap('a')}) AS actions
}
CALL (s) {
  OPTIONAL MATCH (s)-[:HAS_PLAN]->(p:Plan)
  RETURN collect(${planMap('p')}) AS plans
}
CALL (s) {
  OPTIONAL MATCH (s)-[:HAS_CHECKPOINT]->(c:Checkpoint)
  RETURN collect(${checkpointMap('c')}) AS checkpoints
}
RETURN s {.*} AS session, actions, plans, checkpoints,
  [(s)-[e:FORKED_FROM]->(o:Session) |
    {fork: e {.*, sessionId: s.id, fromSessionId: o.id}, session: o {.*}}] AS origin,
  [(o:Session)-[e:FORKED_FROM]->(s) |
    {fork: e {.*, sessionId: o.id, fromSessionId: s.id}, session: o {.*}}] AS forks`;

// Seqs are gapless, so "the N before" is a range on the (sessionId, seq) index; a file's last earlier writer is
// the first entry of the WROTE (fileId, seq) index read backwards from the action's seq.
export const FAILURE_CONTEXT = `
MATCH (a:Action {id: $actionId}) WHERE a.sessionId = $sessionId
CALL (a) {
  OPTIONAL MATCH (a)-[:RETRY_OF*1..]->(x:Action)
  WITH DISTINCT x
  RETURN collect(${summaryMap('x')}) AS ancestors,
    collect(CASE WHEN x IS NOT NULL THEN {actionId: x.id, checkpoints: ${checkpointRefs('x')}} END)
      AS ancestorCheckpoints
}
CALL (a) {
  OPTIONAL MATCH (x:Action)-[:RETRY_OF*1..]->(a)
  RETURN collect(DISTINCT ${summaryMap('x')}) AS descendants
}
CALL (a) {
  OPTIONAL MATCH (x:Action) WHERE x.sessionId = a.sessionId AND x.seq >= a.seq - $before AND x.seq < a.seq
  RETURN collect(${summaryMap('x')}) AS before
}
CALL (a) {
  OPTIONAL MATCH (a)-[:CALLED_BY*1..]->(x:Action)
  WITH DISTINCT x
  RETURN collect(${summaryMap('x')}) AS callers
}
CALL (a) {
  OPTIONAL MATCH (x:Action)-[:CALLED_BY]->(a)
  RETURN collect(${summaryMap('x')}) AS calls
}
CALL (a) {
  UNWIND [(a)-[:READ|WROTE]->(f:File) | f.id] AS fileId
  WITH DISTINCT fileId
  CALL (a, fileId) {
    MATCH (x)-[w:WROTE]->(f) USING INDEX w:WROTE(fileId, seq) WHERE w.fileId = fileId AND w.seq < a.seq
    WITH x, f, w ORDER BY w.fileId DESC, w.seq DESC LIMIT 1
    RETURN x, f
  }
  RETURN collect({path: f.path, writer: ${summaryMap('x')}}) AS writers
}
RETURN ${actionMap('a')} AS action, ancestors, ancestorCheckpoints, descendants, before, callers, calls, writers,
  [(a)<-[:ATTEMPT]-(st:Step) | st {.planId, .stepId, .version}] AS planSteps`;

// The session's own touches of the file, and each fork origin's (`depth` forks up) up to the seq of the fork
// whose source it is: the last edge of the path that reaches it.
export const FILE_LINEAGE = `
MATCH (s:Session {id: $sessionId})
CALL (s) {
  MATCH p = (s)-[:FORKED_FROM*1..]->(o:Session)
  RETURN collect({sessionId: o.id, cut: last(relationships(p)).seq, depth: length(p)}) AS origins
}
UNWIND [{sessionId: s.id, cut: null, depth: 0}] + origins AS source
MATCH (f:File {id: 'file:' + source.sessionId + ':' + $path})<-[r:READ|WROTE]-(x:Action)
WHERE source.cut IS NULL OR x.seq <= source.cut
WITH source, x, collect(CASE type(r) WHEN 'READ' THEN 'read' ELSE 'write' END) AS access
RETURN ${summaryMap('x')} AS action, access, source.depth AS depth`;

// Replication: idempotent upserts of the current state of records (MERGE on ids). A stale copy never undoes
// a newer one: an action only moves on (awaiting approval, then running, then ended: `statusRank`), an
// approval keeps its first decision, and a session keeps its first end.
export const REPLICATE_SESSIONS = `
UNWIND $sessions AS x
MERGE (s:Session {id: x.id})
SET s.tenant = x.tenant, s.createdAt = x.createdAt, s.metadata = x.metadata,
    s.endedAt = coalesce(s.endedAt, x.endedAt), s.endReason = coalesce(s.endReason, x.endReason),
    s.lastSeq = coalesce(s.lastSeq, 0)`;

export const REPLICATE_ACTIONS = `
UNWIND $actions AS x
MERGE (s:Session {id: x.sessionId})
MERGE (a:Action {id: x.id})
WITH s, a, x, ${statusRank('x.props.status')} >= ${statusRank('a.status')} AS newer
SET a += CASE WHEN newer THEN x.props ELSE {} END
SET s.lastSeq = CASE WHEN coalesce(s.lastSeq, 0) < x.props.seq THEN x.props.seq ELSE s.lastSeq END
MERGE (s)-[:HAS_ACTION]->(a)
FOREACH (id IN x.prev | MERGE (p:Action {id: id}) MERGE (p)-[:NEXT]->(a))
FOREACH (id IN x.retryOf | MERGE (o:Action {id: id}) MERGE (a)-[r:RETRY_OF]->(o) SET r.reason = x.retryReason)
FOREACH (path IN x.reads |
  MERGE (f:File {id: 'file:' + x.sessionId + ':' + path}) ON CREATE SET f.sessionId = x.sessionId, f.path = path
  MERGE (a)-[:READ]->(f))
FOREACH (path IN x.writes |
  MERGE (f:File {id: 'file:' + x.sessionId + ':' + path}) ON CREATE SET f.sessionId = x.sessionId, f.path = path
  MERGE (a)-[w:WROTE]->(f) SET w.fileId = f.id, w.seq = x.props.seq)
FOREACH (b IN x.sandbox |
  MERGE (sb:Sandbox {id: b.id}) ON CREATE SET sb.tier = b.tier, sb.containerId = b.containerId, sb.runtime = b.runtime,
    sb.sessionId = x.sessionId
  MERGE (a)-[:RAN_IN]->(sb))${statefulEdges('a', 'x.kernel', 'x.process', 'x.sessionId', 'x.reached', 'a, x')}
${replicaApprovalEdges('a', 'x')}`;

// Upserts plan snapshots (recordPlan, one plan; the replica, each plan of a batch): MERGE on ids, then each
// step's outgoing edges are replaced by the record's, so replaying any snapshot converges on it. Steps are
// all merged before any edge is drawn, so a dependency on a later step of the list finds its node. ATTEMPT only
// reaches an existing action of the plan's session. One row per plan whose session exists.
export const RECORD_PLANS = `
UNWIND $plans AS x
MATCH (s:Session {id: x.sessionId})
MERGE (p:Plan {id: x.id})
SET p += x.props
MERGE (s)-[:HAS_PLAN]->(p)
WITH s, p, x
CALL (p, x) {
  UNWIND x.steps AS y
  MERGE (st:Step {id: y.id})
  SET st += y.props
  MERGE (p)-[:HAS_STEP]->(st)
  WITH st
  OPTIONAL MATCH (st)-[r:DEPENDS_ON|ATTEMPT|REPLACES]->()
  DELETE r
}
CALL (s, x) {
  UNWIND x.steps AS y
  MATCH (st:Step {id: y.id})
  FOREACH (dep IN y.dependsOn | MERGE (d:Step {id: dep}) MERGE (st)-[:DEPENDS_ON]->(d))
  FOREACH (old IN y.replaces | MERGE (o:Step {id: old}) MERGE (st)-[:REPLACES]->(o))
  WITH s, st, y
  UNWIND y.attempts AS actionId
  MATCH (a:Action {id: actionId}) WHERE a.sessionId = s.id
  MERGE (st)-[:ATTEMPT]->(a)
}
RETURN p.id AS id`;

// Checkpoints. The node is created once (MERGE on its id: a second record of an id changes nothing, nor adds
// edges); the row says what was missing, so the adapter can name it.
export const RECORD_CHECKPOINT = `
OPTIONAL MATCH (s:Session {id: $sessionId})
OPTIONAL MATCH (a:Action {id: $beforeActionId}) WHERE a.sessionId = $sessionId
WITH s, a, ($beforeActionId IS NULL OR a IS NOT NULL) AS hasAction
CALL (s, a, hasAction) {
  WITH s, a WHERE s IS NOT NULL AND hasAction
  MERGE (c:Checkpoint {id: $id})
    ON CREATE SET c += $props, c._created = true
  WITH s, a, c, c._created IS NOT NULL AS created
  REMOVE c._created
  WITH s, a, c WHERE created
  CREATE (s)-[:HAS_CHECKPOINT]->(c)
  FOREACH (x IN CASE WHEN a IS NULL THEN [] ELSE [a] END | CREATE (c)-[:BEFORE]->(x))
}
RETURN s IS NOT NULL AS hasSession, hasAction`;

export const LAST_ACTION_SEQ = `
MATCH (a:Action) WHERE a.sessionId = $sessionId
RETURN coalesce(max(a.seq), 0) AS seq`;

// Grouped by session, status and tier (the aggregation's grouping keys); a session without actions is one row
// with null status and tier and a count of 0. Unrecorded ids match no session and give no row.
export const SESSION_ACTIVITY = `
UNWIND $sessionIds AS id
MATCH (s:Session {id: id})
OPTIONAL MATCH (a:Action) WHERE a.sessionId = s.id
RETURN s.id AS sessionId, a.status AS status, a.tier AS tier, count(a) AS actions,
  max(a.startedAt) AS lastStartedAt`;

export const GET_CHECKPOINT = `
MATCH (c:Checkpoint {id: $id}) WHERE c.sessionId = $sessionId
RETURN ${checkpointMap('c')} AS checkpoint`;

export const RECORD_CHECKPOINT_DELETED = `
MATCH (c:Checkpoint {id: $id}) WHERE c.sessionId = $sessionId
SET c.deletedAt = coalesce(c.deletedAt, $deletedAt), c.deleteReason = coalesce(c.deleteReason, $reason)
RETURN count(c) AS n`;

// A restore is known by where it starts, its checkpoint and its time: MERGE on those, the first planId kept.
export const RECORD_RESTORE = `
OPTIONAL MATCH (s:Session {id: $sessionId})
OPTIONAL MATCH (a:Action {id: $actionId}) WHERE a.sessionId = $sessionId
OPTIONAL MATCH (c:Checkpoint {id: $checkpointId}) WHERE c.sessionId = $sessionId
WITH s, a, c, ($actionId IS NULL OR a IS NOT NULL) AS hasAction
CALL (s, a, c, hasAction) {
  WITH s, a, c WHERE s IS NOT NULL AND hasAction AND c IS NOT NULL
  WITH c, coalesce(a, s) AS f
  MERGE (f)-[r:RESTORED {restoredAt: $restoredAt}]->(c)
    ON CREATE SET r.planId = $planId
}
RETURN s IS NOT NULL AS hasSession, hasAction, c IS NOT NULL AS hasCheckpoint`;

// The new session's write lock first (as for starts), so two forks of one session cannot both find it without
// an origin. `existing` is its origin already recorded; `cycle` says the source descends from it (or is it).
export const RECORD_FORK = `
OPTIONAL MATCH (s:Session {id: $sessionId})
SET s._lock = true
REMOVE s._lock
WITH s
OPTIONAL MATCH (o:Session {id: $fromSessionId})
WITH s, o,
  ($checkpointId IS NULL OR
    EXISTS { MATCH (c:Checkpoint {id: $checkpointId}) WHERE c.sessionId = $fromSessionId }) AS hasCheckpoint,
  [(s)-[e:FORKED_FROM]->(x:Session) | e {.*, sessionId: s.id, fromSessionId: x.id}][0] AS existing
WITH s, o, hasCheckpoint, existing,
  CASE WHEN s IS NULL OR o IS NULL THEN false ELSE EXISTS { (o)-[:FORKED_FROM*0..]->(s) } END AS cycle
CALL (s, o, hasCheckpoint, existing, cycle) {
  WITH s, o WHERE s IS NOT NULL AND o IS NOT NULL AND hasCheckpoint AND existing IS NULL AND NOT cycle
  CREATE (s)-[e:FORKED_FROM]->(o)
  SET e = $props
}
RETURN s IS NOT NULL AS hasSession, o IS NOT NULL AS hasSource, hasCheckpoint, existing, cycle`;

// Replication of checkpoints: the node converges on the local one (its deletion kept once set), with its
// HAS_CHECKPOINT, BEFORE and every RESTORED edge MERGEd on what identifies it. An action not copied yet is
// skipped: its outbox entry comes before the one that named it, and a later entry of the checkpoint copies
// the edge again.
export const REPLICATE_CHECKPOINTS = `
UNWIND $checkpoints AS x
MATCH (s:Session {id: x.sessionId})
MERGE (c:Checkpoint {id: x.id})
SET c += x.props,
    c.deletedAt = coalesce(c.deletedAt, x.deletedAt), c.deleteReason = coalesce(c.deleteReason, x.deleteReason)
MERGE (s)-[:HAS_CHECKPOINT]->(c)
FOREACH (r IN x.sessionRestores |
  MERGE (s)-[e:RESTORED {restoredAt: r.restoredAt}]->(c) ON CREATE SET e.planId = r.planId)
WITH c, x
CALL (c, x) {
  UNWIND x.before AS actionId
  MATCH (a:Action {id: actionId}) WHERE a.sessionId = x.sessionId
  MERGE (c)-[:BEFORE]->(a)
}
CALL (c, x) {
  UNWIND x.actionRestores AS r
  MATCH (a:Action {id: r.actionId}) WHERE a.sessionId = x.sessionId
  MERGE (a)-[e:RESTORED {restoredAt: r.restoredAt}]->(c) ON CREATE SET e.planId = r.planId
}`;

export const REPLICATE_FORKS = `
UNWIND $forks AS x
MATCH (s:Session {id: x.sessionId}), (o:Session {id: x.fromSessionId})
MERGE (s)-[e:FORKED_FROM]->(o)
SET e = x.props`;
