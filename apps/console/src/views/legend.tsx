import type { Graph } from '../../../../packages/client/src/types';
import { ACTION_COLORS, EDGE_COLORS, KINDS, RINGS } from '../graph-style';

/** A small picture of a node's shape, in SVG of this page's own making (never of a result's). */
function Shape({
  shape,
  color,
  ring,
}: {
  shape: string;
  color: string;
  ring?: { color: string; style: string };
}) {
  const stroke = ring
    ? {
        stroke: ring.color,
        'stroke-width': 2.5,
        'stroke-dasharray': ring.style === 'dashed' ? '3 2' : undefined,
      }
    : {};
  const fill = { fill: color, ...stroke };
  const points: Record<string, string> = {
    hexagon: '4,1 12,1 15,8 12,15 4,15 1,8',
    diamond: '8,1 15,8 8,15 1,8',
    'round-diamond': '8,1 15,8 8,15 1,8',
    triangle: '8,1 15,15 1,15',
    star: '8,1 10,6 15,6 11,9 13,15 8,11 3,15 5,9 1,6 6,6',
    octagon: '5,1 11,1 15,5 15,11 11,15 5,15 1,11 1,5',
    'round-tag': '1,1 11,1 15,8 11,15 1,15',
  };
  return (
    <svg class="legend-shape" viewBox="0 0 16 16" width="16" height="16" aria-hidden="true">
      {shape === 'ellipse' ? (
        <circle cx="8" cy="8" r="6" {...fill} />
      ) : points[shape] ? (
        <polygon points={points[shape]} {...fill} />
      ) : (
        <rect x="2" y="2" width="12" height="12" rx={shape === 'barrel' ? 5 : 3} {...fill} />
      )}
    </svg>
  );
}

/** What the graph's shapes and colours mean, for the kinds, types, endings and edges this graph has. */
export function Legend({ graph }: { graph: Graph }) {
  const kinds = new Set(graph.nodes.map((n) => n.label));
  const actions = graph.nodes
    .filter((n) => n.label === 'Action')
    .map((n) => n.properties as Record<string, unknown>);
  const types = new Set(actions.map((p) => String(p.type)));
  const statuses = new Set(actions.map((p) => String(p.status)));
  const edges = new Set(graph.edges.map((e) => e.type));
  return (
    <div class="legend" data-testid="graph-legend" aria-label="Legend">
      <ul>
        {Object.entries(ACTION_COLORS)
          .filter(([t]) => types.has(t))
          .map(([t, color]) => (
            <li key={t}>
              <Shape shape="ellipse" color={color} /> {t} action
            </li>
          ))}
        {Object.entries(RINGS)
          .filter(([s]) => statuses.has(s))
          .map(([s, ring]) => (
            <li key={s}>
              <Shape shape="ellipse" color="#e5e7eb" ring={ring} /> {s.replaceAll('_', ' ')}
            </li>
          ))}
        {Object.entries(KINDS)
          .filter(([k]) => kinds.has(k as never))
          .map(([k, { shape, color }]) => (
            <li key={k}>
              <Shape shape={shape} color={color} /> {k}
            </li>
          ))}
      </ul>
      <ul>
        {Object.entries(EDGE_COLORS)
          .filter(([e]) => edges.has(e as never))
          .map(([e, color]) => (
            <li key={e}>
              <span class="legend-edge" style={{ background: color }} />{' '}
              {e.toLowerCase().replaceAll('_', ' ')}
            </li>
          ))}
      </ul>
      <p class="muted small">
        Actions run left to right in order, in rows; above them what they ran in, below the files they
        touched. Hover a node for its name; drag to move, wheel or +/− to zoom.
      </p>
    </div>
  );
}
