import type { FieldProblem } from '../../platform/validation/request-validation.error';

export interface DagStep {
  id: string;
  dependsOn: string[];
}

/**
 * Problems of a step list as a DAG: duplicate ids, unknown or self dependencies, cycles. Each problem names the
 * steps at fault (`steps[i].id` / `steps[i].dependsOn`).
 */
export function dagProblems(steps: DagStep[], known: ReadonlySet<string> = new Set()): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const index = new Map<string, number>();
  steps.forEach((s, i) => {
    if (index.has(s.id)) {
      problems.push({
        field: `steps[${i}].id`,
        message: `duplicate step id "${s.id}" (also steps[${index.get(s.id)}])`,
      });
    } else index.set(s.id, i);
  });
  steps.forEach((s, i) => {
    for (const dep of s.dependsOn) {
      if (dep === s.id)
        problems.push({ field: `steps[${i}].dependsOn`, message: `step "${s.id}" depends on itself` });
      else if (!index.has(dep) && !known.has(dep)) {
        problems.push({
          field: `steps[${i}].dependsOn`,
          message: `step "${s.id}" depends on unknown step "${dep}"`,
        });
      }
    }
  });
  if (problems.length > 0) return problems;
  const cycle = findCycle(steps);
  if (cycle) {
    problems.push({
      field: `steps[${index.get(cycle[0])}].dependsOn`,
      message: cycleMessage(cycle),
    });
  }
  return problems;
}

export const cycleMessage = (cycle: string[]): string =>
  `dependency cycle: ${[...cycle, cycle[0]].join(' → ')}`;

/** A cycle as the list of its step ids, or undefined (iterative DFS: deep plans must not overflow the stack). */
export function findCycle(steps: DagStep[]): string[] | undefined {
  const deps = new Map(steps.map((s) => [s.id, s.dependsOn.filter((d) => d !== s.id)]));
  const state = new Map<string, 'open' | 'done'>();
  for (const root of deps.keys()) {
    if (state.has(root)) continue;
    const path: string[] = [];
    const stack: Array<{ id: string; next: number }> = [{ id: root, next: 0 }];
    state.set(root, 'open');
    path.push(root);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const children = deps.get(top.id) ?? [];
      if (top.next < children.length) {
        const child = children[top.next++];
        if (!deps.has(child)) continue;
        const s = state.get(child);
        if (s === 'open') return path.slice(path.indexOf(child));
        if (s === undefined) {
          state.set(child, 'open');
          path.push(child);
          stack.push({ id: child, next: 0 });
        }
      } else {
        state.set(top.id, 'done');
        path.pop();
        stack.pop();
      }
    }
  }
  return undefined;
}
