/**
 * Where each node of a session's graph is drawn: a layered layout by time. Actions run left to right in `seq`
 * order and wrap into bands as wide as the view, like lines of text; in each band, what the actions ran in or were
 * part of (the session, sandboxes, kernels, processes, plans, steps, approvals) sits in rows above them, and what
 * they touched (files, checkpoints) in rows below, each node in the column of the first action it is linked to
 * (or the nearest free one). Every node keeps a column of its own in its row, so labels as wide as a column never
 * overlap; the layout is computed here, not by a force simulation, so it is the same at every load.
 */

export interface LayoutNode {
  id: string;
  kind: string;
  /** An action's place in the session (actions only). */
  seq?: number;
}

export interface LayoutEdge {
  from: string;
  to: string;
}

export interface Layout {
  positions: Map<string, { x: number; y: number }>;
  /** The drawing's size in model units, from 0,0. */
  width: number;
  height: number;
  /** Actions per band. */
  columns: number;
}

/** Horizontal distance between columns: a label is at most this wide, less LABEL_MARGIN. */
export const COLUMN = 120;
/** Columns on a phone: narrower, so three fit in 390 px. */
export const NARROW_COLUMN = 100;
export const LABEL_MARGIN = 12;
/** Vertical distance between rows of a band. */
export const ROW = 56;
/** Space between bands, and around the drawing. */
const GAP = 28;
const PAD = 24;

const BELOW = new Set(['File', 'Checkpoint']);

/** How wide a column is and how many fit `width` pixels at zoom 1 (at least 2, at most 40). */
export function gridFor(width: number): { columns: number; column: number } {
  const column = width < 560 ? NARROW_COLUMN : COLUMN;
  return { columns: Math.max(2, Math.min(40, Math.floor((width - 2 * PAD) / column))), column };
}

/** Free slots of one side of a band: rows of `columns` cells, grown as needed. */
class Rows {
  readonly taken: boolean[][] = [];
  constructor(private readonly columns: number) {}

  /** The row and column taken for a node that wants column `want`: the nearest free one, else a new row. */
  place(want: number): [number, number] {
    for (let r = 0; ; r++) {
      if (!this.taken[r]) this.taken[r] = new Array<boolean>(this.columns).fill(false);
      const row = this.taken[r];
      for (let d = 0; d < this.columns; d++) {
        for (const c of d === 0 ? [want] : [want + d, want - d]) {
          if (c >= 0 && c < this.columns && !row[c]) {
            row[c] = true;
            return [r, c];
          }
        }
      }
    }
  }
}

/**
 * Lays out `nodes` in bands of `columns` actions. A node that is not an action goes in the band and column of the
 * earliest action it is linked to, directly or through other nodes (a plan through its steps); one linked to none
 * goes with the first action.
 */
export function layeredLayout(
  nodes: LayoutNode[],
  edges: LayoutEdge[],
  columns: number,
  column = COLUMN,
): Layout {
  const actions = nodes.filter((n) => n.kind === 'Action').sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
  const index = new Map(actions.map((a, i) => [a.id, i]));
  const neighbours = new Map<string, string[]>();
  const link = (a: string, b: string) => {
    const list = neighbours.get(a);
    if (list) list.push(b);
    else neighbours.set(a, [b]);
  };
  for (const e of edges) {
    link(e.from, e.to);
    link(e.to, e.from);
  }

  // The earliest action each node is linked to, spread out from the actions a hop at a time. A session holds them
  // all (its HAS_ACTION edges are not drawn): it goes with the first.
  const anchor = new Map(index);
  for (const n of nodes) if (n.kind === 'Session') anchor.set(n.id, 0);
  let frontier = actions.map((a) => a.id);
  while (frontier.length > 0) {
    const next: string[] = [];
    for (const id of frontier) {
      const at = anchor.get(id)!;
      for (const n of neighbours.get(id) ?? []) {
        if (index.has(n)) continue;
        const was = anchor.get(n);
        if (was === undefined || at < was) {
          anchor.set(n, at);
          next.push(n);
        }
      }
    }
    frontier = next;
  }

  const bands = Math.max(1, Math.ceil(actions.length / columns));
  const above = Array.from({ length: bands }, () => new Rows(columns));
  const below = Array.from({ length: bands }, () => new Rows(columns));
  const cells = new Map<
    string,
    { band: number; side: 'above' | 'below' | 'action'; row: number; col: number }
  >();
  actions.forEach((a, i) =>
    cells.set(a.id, { band: Math.floor(i / columns), side: 'action', row: 0, col: i % columns }),
  );
  // Nodes in a stable order: by anchor, then as the API listed them.
  const others = nodes
    .map((n, order) => ({ n, order }))
    .filter(({ n }) => n.kind !== 'Action')
    .sort((a, b) => (anchor.get(a.n.id) ?? 0) - (anchor.get(b.n.id) ?? 0) || a.order - b.order);
  for (const { n } of others) {
    const at = anchor.get(n.id) ?? 0;
    const band = Math.min(bands - 1, Math.floor(at / columns));
    const side = BELOW.has(n.kind) ? 'below' : 'above';
    const [row, col] = (side === 'below' ? below : above)[band].place(at % columns);
    cells.set(n.id, { band, side, row, col });
  }

  // Each band as tall as its rows; the action row after the rows above it.
  const top: number[] = [];
  let y = PAD;
  for (let b = 0; b < bands; b++) {
    top.push(y);
    y += (above[b].taken.length + 1 + below[b].taken.length) * ROW + GAP;
  }
  const positions = new Map<string, { x: number; y: number }>();
  for (const [id, c] of cells) {
    const rowsAbove = above[c.band].taken.length;
    const line =
      c.side === 'above' ? rowsAbove - 1 - c.row : c.side === 'action' ? rowsAbove : rowsAbove + 1 + c.row;
    positions.set(id, { x: PAD + column / 2 + c.col * column, y: top[c.band] + ROW / 2 + line * ROW });
  }
  const used = Math.min(columns, Math.max(1, actions.length, ...[...cells.values()].map((c) => c.col + 1)));
  return { positions, width: 2 * PAD + used * column, height: y - GAP + PAD, columns };
}
