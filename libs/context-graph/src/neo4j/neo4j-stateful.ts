import neo4j from 'neo4j-driver';
import {
  kernelNodeId,
  kernelRunRef,
  processGraphRef,
  processNodeId,
  reachedNodeId,
  reachedRef,
} from '../context-graph.stateful';
import type { KernelRunRef, ProcessGraphRef, ReachedRef } from '../context-graph.types';

// Session kernels and background processes in the Neo4j store: the parameters `statefulEdges` (in
// neo4j-cypher.ts) reads, and the refs rebuilt from what `actionMap` returns. Kept apart from the store so its
// file does not grow with every new kind of node.

/** Node properties as they come back (integers already JS numbers). */
type Props = Record<string, unknown>;

/**
 * The `$kernel`/`$process` parameters (or a replica action's `kernel`/`process`): a list of zero or one map, so
 * the Cypher `FOREACH` runs once or not at all. Node ids are the graph's (`kernel:<id>`), the engine's ids
 * ride as `kernelId`/`processId`; the execution count is a Cypher integer, as every count is.
 */
export function statefulParams(
  kernel: KernelRunRef | undefined,
  process: ProcessGraphRef | undefined,
  reached: ReachedRef | undefined,
): { kernel: Props[]; process: Props[]; reached: Props[] } {
  return {
    reached: reached
      ? [
          {
            id: reachedNodeId(reached),
            kind: reached.kind,
            targetId: reached.id,
            port: neo4j.int(reached.port),
          },
        ]
      : [],
    kernel: kernel
      ? [
          {
            id: kernelNodeId(kernel.id),
            kernelId: kernel.id,
            language: kernel.language,
            tier: kernel.tier,
            executionCount: neo4j.int(kernel.executionCount),
            started: kernel.started,
          },
        ]
      : [],
    process: process
      ? [
          {
            id: processNodeId(process.id),
            processId: process.id,
            name: process.name ?? null,
            command: process.command,
            tier: process.tier,
            startedAt: process.startedAt,
          },
        ]
      : [],
  };
}

/** The action's kernel and started process from its `actionMap` projection (absent when it has none). */
export function statefulRefs(p: Props): {
  kernel: KernelRunRef | undefined;
  startedProcess: ProcessGraphRef | undefined;
  reached: ReachedRef | undefined;
} {
  const kernel = p.kernel as KernelRunRef | null | undefined;
  const started = p.startedProcess as (ProcessGraphRef & { name: string | null }) | null | undefined;
  return {
    kernel: kernel ? kernelRunRef(kernel) : undefined,
    startedProcess: started ? processGraphRef(started) : undefined,
    reached:
      typeof p.reachedKind === 'string'
        ? reachedRef({
            kind: p.reachedKind as ReachedRef['kind'],
            id: p.reachedId as string,
            port: p.reachedPort as number,
          })
        : undefined,
  };
}
