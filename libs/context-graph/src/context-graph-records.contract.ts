import type { ActionResult } from '@switchyard/common';
import { randomUUID } from 'node:crypto';
import type { ContextGraph } from './context-graph.port';
import type {
  ActionCompletion,
  ActionRecord,
  ActionStart,
  GraphView,
  SessionRecord,
} from './context-graph.types';

// Records and checks shared by the contract's parts (context-graph.contract*.ts): one place builds the
// sessions, starts and completions every adapter is tested with.

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
/** Contract time: `seconds` after 2025-01-01T00:00:00Z, as ISO 8601. */
export const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();
export const uid = (prefix: string): string => `${prefix}-${randomUUID()}`;

export function session(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: uid('session'),
    tenant: 'acme',
    createdAt: at(0),
    metadata: { agent: 'contract', tags: ['a'] },
    ...overrides,
  };
}

export function start(sessionId: string, overrides: Partial<ActionStart> = {}): ActionStart {
  return {
    id: uid('action'),
    sessionId,
    type: 'code',
    operation: 'python',
    input: { code: 'print(1)', env: { A: '1' } },
    inputSummary: 'print(1)',
    inputHash: 'ab'.repeat(32),
    startedAt: at(1),
    tier: 'subprocess',
    risk: { score: 10, level: 'low', reasons: [] },
    ...overrides,
  };
}

export function completion(a: ActionStart, overrides: Partial<ActionCompletion> = {}): ActionCompletion {
  const base = {
    status: 'succeeded' as const,
    endedAt: at(2),
    durationMs: 1000,
    tier: a.tier,
    risk: a.risk,
    exitCode: 0,
    outputExcerpt: '1\n',
    files: [],
    ...overrides,
  };
  const result: ActionResult = {
    id: a.id,
    sessionId: a.sessionId,
    type: a.type,
    status: base.status,
    exitCode: base.exitCode,
    stdout: base.outputExcerpt,
    stderr: '',
    truncated: { stdout: false, stderr: false },
    durationMs: base.durationMs,
    startedAt: a.startedAt,
    endedAt: base.endedAt,
    tier: base.tier,
    risk: base.risk,
    ...(base.error && { error: base.error }),
  };
  return { result, ...base };
}

/**
 * Expects the write `attempt` to be refused with `error` (and to match `match` when given). With `deferredChecks`
 * (see `ContextGraphContractOptions`) the store acknowledges the write instead and drops it when applying it; the
 * test's reads afterwards show that nothing was recorded either way.
 */
export async function expectRefused(
  deferredChecks: boolean,
  attempt: Promise<unknown>,
  error: abstract new (...args: never[]) => Error,
  match?: Record<string, unknown>,
): Promise<void> {
  if (deferredChecks) {
    await expect(attempt).resolves.toBeUndefined();
    return;
  }
  await expect(attempt).rejects.toBeInstanceOf(error);
  if (match) await expect(attempt).rejects.toMatchObject(match);
}

/** Order-insensitive edge list, for checks that should not pin an adapter's edge order. */
export const edgeSet = (view: GraphView): string[] =>
  view.edges.map((e) => `${e.type} ${e.from} -> ${e.to}`).sort();

export async function listAll(graph: ContextGraph, sessionId: string, limit = 1000): Promise<ActionRecord[]> {
  const items: ActionRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await graph.listActions(sessionId, { limit, cursor });
    expect(page.items.length).toBeLessThanOrEqual(limit);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return items;
}
