import { COLUMN, gridFor, layeredLayout, type LayoutEdge, type LayoutNode, ROW } from './graph-layout';

/** A session of `n` actions, each writing its own file, all run in one sandbox; retries and a plan on top. */
function session(n: number) {
  const nodes: LayoutNode[] = [
    { id: 'ses', kind: 'Session' },
    { id: 'sbx', kind: 'Sandbox' },
  ];
  const edges: LayoutEdge[] = [];
  for (let i = 1; i <= n; i++) {
    nodes.push({ id: `a${i}`, kind: 'Action', seq: i }, { id: `f${i}`, kind: 'File' });
    edges.push({ from: `a${i}`, to: `f${i}` }, { from: `a${i}`, to: 'sbx' });
    if (i > 1) edges.push({ from: `a${i - 1}`, to: `a${i}` });
  }
  // The session reaches its actions only through its plan here (the drawing leaves HAS_ACTION out).
  nodes.push({ id: 'plan', kind: 'Plan' }, { id: 'step', kind: 'Step' });
  edges.push({ from: 'ses', to: 'plan' }, { from: 'plan', to: 'step' }, { from: 'step', to: `a${n}` });
  return { nodes, edges };
}

describe('the graph’s layered layout', () => {
  it('puts actions in seq order, left to right, wrapping into bands', () => {
    const { nodes, edges } = session(25);
    const layout = layeredLayout(nodes.reverse(), edges, 10);
    const at = (id: string) => layout.positions.get(id)!;
    expect(at('a2').x - at('a1').x).toBe(COLUMN);
    expect(at('a2').y).toBe(at('a1').y);
    expect(at('a11').x).toBe(at('a1').x);
    expect(at('a11').y).toBeGreaterThan(at('a10').y);
    expect(layout.columns).toBe(10);
  });

  it('puts what actions ran in above them and what they touched below, by their first action', () => {
    const { nodes, edges } = session(25);
    const layout = layeredLayout(nodes, edges, 10);
    const at = (id: string) => layout.positions.get(id)!;
    expect(at('f1').y).toBeGreaterThan(at('a1').y);
    expect(at('f1').x).toBe(at('a1').x);
    expect(at('f13').y).toBeGreaterThan(at('a13').y);
    expect(at('f13').x).toBe(at('a13').x);
    expect(at('sbx').y).toBeLessThan(at('a1').y);
    expect(at('ses').y).toBeLessThan(at('a1').y);
    // The plan reaches its actions only through its step: both go with the last action's band.
    expect(at('step').y).toBeLessThan(at('a25').y);
    expect(at('plan').y).toBeLessThan(at('a25').y);
    expect(at('plan').y).toBeGreaterThan(at('f10').y);
  });

  it('gives every node a cell of its own: no two share a place', () => {
    const { nodes, edges } = session(300);
    // Many files first touched by the same action.
    for (let i = 0; i < 30; i++) {
      nodes.push({ id: `g${i}`, kind: 'File' });
      edges.push({ from: 'a5', to: `g${i}` });
    }
    const layout = layeredLayout(nodes, edges, 8);
    const seen = new Set<string>();
    for (const [, p] of layout.positions) {
      const key = `${p.x},${p.y}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
      expect(p.x).toBeLessThanOrEqual(layout.width);
      expect(p.y).toBeLessThanOrEqual(layout.height);
    }
    expect(layout.positions.size).toBe(nodes.length);
    // Rows are ROW apart: one node's label (under it) never reaches the next row.
    const ys = [...new Set([...layout.positions.values()].map((p) => p.y))].sort((a, b) => a - b);
    for (let i = 1; i < ys.length; i++) expect(ys[i] - ys[i - 1]).toBeGreaterThanOrEqual(ROW);
  });

  it('lays out a graph without actions, and fits columns to the width', () => {
    const layout = layeredLayout([{ id: 'ses', kind: 'Session' }], [], 5);
    expect(layout.positions.get('ses')).toBeDefined();
    expect(gridFor(1280)).toEqual({ columns: 10, column: COLUMN });
    expect(gridFor(372)).toEqual({ columns: 3, column: 100 });
    expect(gridFor(100)).toMatchObject({ columns: 2 });
    expect(gridFor(100_000)).toMatchObject({ columns: 40 });
    const narrow = layeredLayout(
      [
        { id: 'a', kind: 'Action', seq: 1 },
        { id: 'b', kind: 'Action', seq: 2 },
      ],
      [],
      3,
      100,
    );
    expect(narrow.positions.get('b')!.x - narrow.positions.get('a')!.x).toBe(100);
  });
});
