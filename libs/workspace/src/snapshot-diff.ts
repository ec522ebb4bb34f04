import type { WorkspaceSnapshot } from './file-op.types';
import { compareSegments } from './workspace-fs';

/**
 * Paths added, modified or deleted between two snapshots, sorted in walk order. A partial snapshot covers a prefix of
 * the walk order, so only paths up to the shorter coverage are compared; otherwise the entries that slid past the cap
 * would show up as bogus deletions. The one diff of the workspace lib: `WorkspaceManager.changedPaths` and the pod
 * workspace's (workspace-tool.protocol.ts) both call it.
 */
export function changedPaths(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[] {
  const bounds = [before, after].filter((s) => s.partial).map((s) => lastKey(s.entries));
  const bound = bounds.reduce<string[] | undefined>((min, b) => {
    if (!b) return min;
    return !min || compareSegments(b, min) < 0 ? b : min;
  }, undefined);
  const inRange = (p: string) => !bound || compareSegments(p.split('/'), bound) <= 0;
  const changed = new Set<string>();
  for (const [p, v] of before.entries) if (after.entries.get(p) !== v && inRange(p)) changed.add(p);
  for (const p of after.entries.keys()) if (!before.entries.has(p) && inRange(p)) changed.add(p);
  return [...changed].sort((a, b) => compareSegments(a.split('/'), b.split('/')));
}

function lastKey(entries: Map<string, string>): string[] | undefined {
  let last: string | undefined;
  for (const k of entries.keys()) last = k;
  return last?.split('/');
}
