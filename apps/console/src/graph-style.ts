/**
 * How the graph looks: actions are circles coloured by their type, with a ring for how they ended; every other kind
 * of node has its own shape and colour; edges are coloured by their type. The legend under the graph is drawn from
 * the same tables, so it always says what the drawing shows.
 */
import type { StylesheetJson } from 'cytoscape';
import { COLUMN, LABEL_MARGIN } from './graph-layout';

export const ACTION_COLORS: Record<string, string> = {
  code: '#2563eb',
  file: '#0d9488',
  browser: '#7c3aed',
  process: '#db2777',
  kernel: '#0891b2',
  skill: '#ea580c',
};

/** Every other kind of node: its shape (Cytoscape's name) and colour. */
export const KINDS: Record<string, { shape: string; color: string }> = {
  Session: { shape: 'octagon', color: '#475569' },
  File: { shape: 'round-rectangle', color: '#94a3b8' },
  Sandbox: { shape: 'hexagon', color: '#a855f7' },
  Kernel: { shape: 'diamond', color: '#06b6d4' },
  Process: { shape: 'triangle', color: '#ec4899' },
  Plan: { shape: 'star', color: '#d97706' },
  Step: { shape: 'round-tag', color: '#f59e0b' },
  Checkpoint: { shape: 'barrel', color: '#65a30d' },
  Approval: { shape: 'round-diamond', color: '#e11d48' },
};

/** The ring of an action that did not simply succeed. */
export const RINGS: Record<string, { color: string; style: 'solid' | 'dashed' }> = {
  failed: { color: '#dc2626', style: 'solid' },
  error: { color: '#dc2626', style: 'solid' },
  timed_out: { color: '#dc2626', style: 'solid' },
  denied: { color: '#b45309', style: 'solid' },
  cancelled: { color: '#6b7280', style: 'dashed' },
  interrupted: { color: '#6b7280', style: 'dashed' },
  running: { color: '#0ea5e9', style: 'dashed' },
  awaiting_approval: { color: '#be185d', style: 'dashed' },
};

export const EDGE_COLORS: Record<string, string> = {
  NEXT: '#cbd5e1',
  READ: '#38bdf8',
  WROTE: '#16a34a',
  RETRY_OF: '#dc2626',
  RAN_IN: '#c4b5fd',
  STARTED: '#f9a8d4',
  ATTEMPT: '#fbbf24',
  DEPENDS_ON: '#d97706',
  HAS_STEP: '#fcd34d',
  HAS_PLAN: '#fcd34d',
  BEFORE: '#a3e635',
  HAS_APPROVAL: '#fda4af',
  CALLED_BY: '#fb923c',
};

/** Labels are this big at zoom 1, and hidden when drawn smaller than MIN_LABEL px (hover still names a node). */
export const LABEL_SIZE = 11;
export const MIN_LABEL = 8;

export const GRAPH_STYLE: StylesheetJson = [
  {
    selector: 'node',
    style: {
      label: 'data(short)',
      'font-size': LABEL_SIZE,
      'min-zoomed-font-size': MIN_LABEL,
      color: '#1f2937',
      'text-valign': 'bottom',
      'text-margin-y': 4,
      'text-wrap': 'ellipsis',
      // Set again for each layout's column width (views/cyto.tsx).
      'text-max-width': `${COLUMN - LABEL_MARGIN}px`,
      'text-background-color': '#ffffff',
      'text-background-opacity': 0.85,
      'text-background-padding': '1px',
      width: 20,
      height: 20,
      'border-width': 1,
      'border-color': '#ffffff',
      'background-color': '#9ca3af',
    },
  },
  ...Object.entries(KINDS).map(([kind, k]) => ({
    selector: `node[kind = "${kind}"]`,
    style: { shape: k.shape as never, 'background-color': k.color },
  })),
  ...Object.entries(ACTION_COLORS).map(([type, color]) => ({
    selector: `node[kind = "Action"][type = "${type}"]`,
    style: { shape: 'ellipse' as never, 'background-color': color },
  })),
  ...Object.entries(RINGS).map(([status, ring]) => ({
    selector: `node[kind = "Action"][status = "${status}"]`,
    style: { 'border-width': 3, 'border-color': ring.color, 'border-style': ring.style },
  })),
  { selector: 'node.hover, node:selected', style: { 'z-index': 10, 'font-weight': 'bold' } },
  { selector: 'node:selected', style: { 'border-width': 4, 'border-color': '#111827' } },
  {
    selector: 'edge',
    style: {
      width: 1.5,
      'curve-style': 'bezier',
      'target-arrow-shape': 'triangle',
      'arrow-scale': 0.8,
      'line-color': '#cbd5e1',
      'target-arrow-color': '#cbd5e1',
      opacity: 0.8,
    },
  },
  ...Object.entries(EDGE_COLORS).map(([type, color]) => ({
    selector: `edge[type = "${type}"]`,
    style: { 'line-color': color, 'target-arrow-color': color },
  })),
  // A retry points back along the action row: an arc keeps it off the actions between.
  {
    selector: 'edge[type = "RETRY_OF"]',
    style: {
      width: 2,
      'curve-style': 'unbundled-bezier',
      'control-point-distances': [-40],
      'control-point-weights': [0.5],
    },
  },
  { selector: 'edge[type = "NEXT"]', style: { 'target-arrow-shape': 'none' } },
  // The step from the end of one band to the start of the next: the reading order says as much.
  { selector: 'edge.wrap', style: { display: 'none' } },
  {
    selector: 'edge.hover, edge:selected',
    style: { label: 'data(type)', 'font-size': 9, color: '#334155', width: 3, opacity: 1, 'z-index': 10 },
  },
];
