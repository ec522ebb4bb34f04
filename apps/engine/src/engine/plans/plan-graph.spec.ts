import { dagProblems, findCycle } from './plan-graph';

const s = (id: string, ...dependsOn: string[]) => ({ id, dependsOn });

describe('plan DAG checks', () => {
  it('accepts a diamond', () => {
    expect(dagProblems([s('a'), s('b', 'a'), s('c', 'a'), s('d', 'b', 'c')])).toEqual([]);
  });

  it('names duplicate ids, unknown and self dependencies by step', () => {
    expect(dagProblems([s('a'), s('a'), s('b', 'zz'), s('c', 'c')])).toEqual([
      { field: 'steps[1].id', message: 'duplicate step id "a" (also steps[0])' },
      { field: 'steps[2].dependsOn', message: 'step "b" depends on unknown step "zz"' },
      { field: 'steps[3].dependsOn', message: 'step "c" depends on itself' },
    ]);
  });

  it('finds cycles and names the steps in them', () => {
    expect(findCycle([s('a', 'c'), s('b', 'a'), s('c', 'b'), s('d')])).toEqual(['a', 'c', 'b']);
    const [problem] = dagProblems([s('x'), s('a', 'b'), s('b', 'a')]);
    expect(problem.message).toBe('dependency cycle: a → b → a');
    expect(problem.field).toBe('steps[1].dependsOn');
  });

  it('accepts dependencies on steps that already exist (replans)', () => {
    expect(dagProblems([s('d', 'a')], new Set(['a']))).toEqual([]);
  });

  it('handles long chains without recursion', () => {
    const chain = Array.from({ length: 5000 }, (_, i) => (i === 0 ? s('s0') : s(`s${i}`, `s${i - 1}`)));
    expect(findCycle(chain)).toBeUndefined();
  });
});
