import type { GraphNode, KernelRunRef, ProcessGraphRef, ReachedRef } from './context-graph.types';

// Session kernels and background processes as graph nodes, shared by every store (ids, node shapes, and the
// refs as records hand them back), so the three stores cannot drift apart on them.

export const kernelNodeId = (kernelId: string): string => `kernel:${kernelId}`;
export const processNodeId = (processId: string): string => `process:${processId}`;

/** The node a connection reached: its `Process` or `Kernel` node id. */
export const reachedNodeId = (r: ReachedRef): string =>
  r.kind === 'process' ? processNodeId(r.id) : kernelNodeId(r.id);

/** A reached ref as every store hands it back: fixed keys (see `kernelRunRef`). */
export function reachedRef(r: ReachedRef): ReachedRef {
  return { kind: r.kind, id: r.id, port: r.port };
}

/**
 * A kernel ref as every store hands it back: fixed keys, whatever shape the store read it from, so records
 * compare equal (even with `toStrictEqual`) across stores.
 */
export function kernelRunRef(k: KernelRunRef): KernelRunRef {
  return {
    id: k.id,
    language: k.language,
    tier: k.tier,
    executionCount: k.executionCount,
    started: k.started,
  };
}

/** A process ref as every store hands it back: `name` absent (neither null nor undefined) when it was not set. */
export function processGraphRef(
  p: Omit<ProcessGraphRef, 'name'> & { name?: string | null },
): ProcessGraphRef {
  return {
    id: p.id,
    ...(p.name !== undefined && p.name !== null && { name: p.name }),
    command: p.command,
    tier: p.tier,
    startedAt: p.startedAt,
  };
}

/**
 * The `Kernel` node of a kernel an action of `sessionId` ran in. Its `id` property is the engine's kernel id
 * (what the kernel API takes); the node id is `kernel:<id>`.
 */
export function kernelNode(sessionId: string, k: KernelRunRef): GraphNode {
  return {
    id: kernelNodeId(k.id),
    label: 'Kernel',
    properties: { id: k.id, sessionId, language: k.language, tier: k.tier },
  };
}

/** The `Process` node of a process an action of `sessionId` started; `name` only when it was set. */
export function processNode(sessionId: string, p: ProcessGraphRef): GraphNode {
  return {
    id: processNodeId(p.id),
    label: 'Process',
    properties: {
      id: p.id,
      sessionId,
      ...(p.name !== undefined && { name: p.name }),
      command: p.command,
      tier: p.tier,
      startedAt: p.startedAt,
    },
  };
}
