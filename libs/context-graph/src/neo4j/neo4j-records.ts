import type {
  ActionError,
  ActionStatus,
  ActionTier,
  ActionType,
  FileTouch,
  RiskAssessment,
} from '@switchyard/common';
import neo4j from 'neo4j-driver';
import { startStatus } from '../context-graph.approvals';
import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  ActionSummary,
  SandboxRef,
} from '../context-graph.types';
import {
  sandboxNodeId,
  type SessionState,
  sortTouches,
  type StoredPlan,
  type StoredPlanStep,
  summarize,
} from '../context-graph.views';
import type { ReplicaAction } from '../replication/replication.types';
import { approvalRefs, replicaApprovalParams } from './neo4j-approvals';
import { checkpointRefOf } from './neo4j-checkpoints';
import { statefulParams, statefulRefs } from './neo4j-stateful';

// Records to parameters and back in the Neo4j store: the property maps its statements (in neo4j-cypher.ts) write
// for sessions, actions and plans, and the port's records rebuilt from the maps its queries return. Kept apart
// from the store so its file holds the connection and the port's calls only.

/** Node properties as they come back (integers already JS numbers). */
type Props = Record<string, unknown>;

/** Integers travel as Neo4j integers (floats would show as `1.0` to Cypher users); other numbers as floats. */
export const num = (n: number | undefined): unknown =>
  n === undefined ? null : Number.isInteger(n) ? neo4j.int(n) : n;

export function startProperties(a: ActionStart): Props {
  return {
    id: a.id,
    sessionId: a.sessionId,
    type: a.type,
    operation: a.operation,
    status: startStatus(a.approval),
    input: JSON.stringify(a.input),
    inputSummary: a.inputSummary,
    inputHash: a.inputHash,
    startedAt: a.startedAt,
    tier: a.tier,
    ...riskProperties(a.risk),
  };
}

function riskProperties(risk: RiskAssessment): Props {
  return { riskScore: num(risk.score), riskLevel: risk.level, riskReasons: risk.reasons };
}

/** Final fields; nulls remove what a completion does not have. */
export function completionProperties(c: ActionCompletion): Props {
  return {
    status: c.status,
    endedAt: c.endedAt,
    durationMs: num(c.durationMs),
    tier: c.tier,
    ...riskProperties(c.risk),
    exitCode: num(c.exitCode),
    ...errorProperties(c.error),
    outputExcerpt: c.outputExcerpt,
    result: JSON.stringify(c.result),
  };
}

function errorProperties(error: ActionError | undefined): Props {
  return {
    errorClass: error?.class ?? null,
    errorMessage: error?.message ?? null,
    errorCode: error?.code ?? null,
  };
}

/** Paths read and written, each once and sorted (one lock order for every writer). */
export function touchParams(files: FileTouch[]): { reads: string[]; writes: string[] } {
  const paths = (access: FileTouch['access']): string[] =>
    [...new Set(files.filter((f) => f.access === access).map((f) => f.path))].sort();
  return { reads: paths('read'), writes: paths('write') };
}

export function sandboxParam(sandbox: SandboxRef): Props {
  return {
    id: sandboxNodeId(sandbox.containerId),
    tier: sandbox.tier,
    containerId: sandbox.containerId,
    runtime: sandbox.runtime ?? null,
  };
}

/** A replica action as parameters: every property (null = absent) and the edges to make. */
export function replicaParam(a: ReplicaAction): Props {
  return {
    id: a.id,
    sessionId: a.sessionId,
    props: {
      ...startProperties(a),
      seq: neo4j.int(a.seq),
      status: a.status,
      endedAt: a.endedAt ?? null,
      durationMs: num(a.durationMs),
      exitCode: num(a.exitCode),
      ...errorProperties(a.error),
      outputExcerpt: a.outputExcerpt ?? null,
      result: a.result === undefined ? null : JSON.stringify(a.result),
    },
    prev: a.prevId === undefined ? [] : [a.prevId],
    retryOf: a.retryOf === undefined ? [] : [a.retryOf],
    retryReason: a.retryReason ?? null,
    ...touchParams(a.files),
    sandbox: a.sandbox ? [sandboxParam(a.sandbox)] : [],
    ...statefulParams(a.kernel, a.startedProcess, a.reached),
    ...replicaApprovalParams(a),
  };
}

/** A stored plan as parameters: node properties (null = absent) and the steps' edges as ids. */
export function planParam(p: StoredPlan): Props {
  return {
    id: p.id,
    sessionId: p.sessionId,
    props: {
      sessionId: p.sessionId,
      goal: p.goal ?? null,
      status: p.status,
      maxParallel: num(p.maxParallel),
      createdAt: p.createdAt,
      endedAt: p.endedAt ?? null,
    },
    steps: p.steps.map((s) => ({
      id: s.id,
      props: {
        planId: p.id,
        stepId: s.stepId,
        version: num(s.version),
        status: s.status,
        allowFailure: s.allowFailure,
      },
      dependsOn: s.dependsOn,
      attempts: s.attempts,
      replaces: s.replaces === undefined ? [] : [s.replaces],
    })),
  };
}

const opt = <T>(v: unknown): T | undefined => (v === null || v === undefined ? undefined : (v as T));

function toError(p: Props): ActionError | undefined {
  if (p.errorClass === null || p.errorClass === undefined) return undefined;
  const code = opt<string>(p.errorCode);
  return {
    class: p.errorClass as ActionError['class'],
    message: p.errorMessage as string,
    ...(code !== undefined && { code }),
  };
}

export function toRecord(p: Props): ActionRecord {
  const sandbox = opt<SandboxRef>(p.sandbox);
  return {
    id: p.id as string,
    sessionId: p.sessionId as string,
    seq: p.seq as number,
    type: p.type as ActionType,
    operation: p.operation as string,
    status: p.status as ActionStatus,
    input: JSON.parse(p.input as string) as Record<string, unknown>,
    inputSummary: p.inputSummary as string,
    inputHash: p.inputHash as string,
    startedAt: p.startedAt as string,
    endedAt: opt(p.endedAt),
    durationMs: opt(p.durationMs),
    tier: p.tier as ActionTier,
    risk: {
      score: p.riskScore as number,
      level: p.riskLevel as RiskAssessment['level'],
      reasons: (p.riskReasons as string[] | null) ?? [],
    },
    exitCode: opt(p.exitCode),
    error: toError(p),
    outputExcerpt: opt(p.outputExcerpt),
    retryOf: opt(p.retryOf),
    retryReason: opt(p.retryReason),
    sandbox: sandbox && {
      tier: sandbox.tier,
      containerId: sandbox.containerId,
      ...(sandbox.runtime !== null && sandbox.runtime !== undefined && { runtime: sandbox.runtime }),
    },
    ...statefulRefs(p),
    ...approvalRefs(p),
    checkpoint: checkpointRefOf(p),
    files: sortTouches((p.files as ActionRecord['files'] | undefined) ?? []),
    result:
      p.result === null || p.result === undefined
        ? undefined
        : (JSON.parse(p.result as string) as ActionRecord['result']),
  };
}

/** A summary from the slim projection (no input or result), shaped exactly as `summarize` shapes it. */
export function toSummary(p: Props): ActionSummary {
  return summarize({
    ...toRecord({ ...p, input: '{}', files: [] }),
    risk: { score: 0, level: 'low', reasons: [] },
  });
}

export function toPlan(p: Props, sessionId: string): StoredPlan {
  return {
    id: p.id as string,
    sessionId,
    ...(opt(p.goal) !== undefined && { goal: p.goal as string }),
    status: p.status as string,
    maxParallel: p.maxParallel as number,
    createdAt: p.createdAt as string,
    ...(opt(p.endedAt) !== undefined && { endedAt: p.endedAt as string }),
    steps: (p.steps as Props[]).map((s): StoredPlanStep => ({
      id: s.id as string,
      stepId: s.stepId as string,
      version: s.version as number,
      status: s.status as string,
      allowFailure: s.allowFailure as boolean,
      dependsOn: s.dependsOn as string[],
      attempts: s.attempts as string[],
      ...(opt(s.replaces) !== undefined && { replaces: s.replaces as string }),
    })),
  };
}

export function toSession(p: Props): SessionState {
  return {
    id: p.id as string,
    tenant: p.tenant as string,
    createdAt: p.createdAt as string,
    metadata: JSON.parse(p.metadata as string) as Record<string, unknown>,
    ...(opt(p.endedAt) !== undefined && { endedAt: p.endedAt as string }),
    ...(opt(p.endReason) !== undefined && { endReason: p.endReason as 'deleted' | 'expired' }),
  };
}
