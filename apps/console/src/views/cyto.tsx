import cytoscape, { type Core, type ElementDefinition } from 'cytoscape';
import { useEffect, useRef, useState } from 'preact/hooks';
import { gridFor, LABEL_MARGIN, layeredLayout, type LayoutEdge, type LayoutNode } from '../graph-layout';
import { GRAPH_STYLE } from '../graph-style';

/** The tallest the drawing's box gets, as a share of the window; a taller graph is panned (or zoomed out). */
const MAX_HEIGHT_SHARE = 0.7;
const MIN_HEIGHT = 220;

interface Hover {
  text: string;
  x: number;
  y: number;
  /** Where the point is across the box, 0 to 1: the tip is shifted as much, so it never leaves the box. */
  across: number;
}

/** The drawing's box: as tall as the layout at zoom 1, within MIN_HEIGHT and a share of the window. */
function boxHeight(layoutHeight: number): number {
  return Math.round(Math.max(MIN_HEIGHT, Math.min(layoutHeight, innerHeight * MAX_HEIGHT_SHARE, 2400)));
}

/**
 * A session's graph drawn by Cytoscape.js in a layered layout by time (graph-layout.ts), at zoom 1 so every label
 * reads; laid out again when the box's width changes. `onSelect` gets the id of a tapped node (undefined on the
 * background); hovering a node or an edge names it. `Fit` shows the whole graph (labels hide when too small).
 */
export function Cyto({
  elements,
  onSelect,
  label,
}: {
  elements: ElementDefinition[];
  onSelect: (id: string | undefined) => void;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const cy = useRef<Core | undefined>(undefined);
  /** Where the drawing starts: zoom 1, the first row at the top, centred when narrower than the box. */
  const home = useRef({ x: 0, y: 0 });
  const [height, setHeight] = useState(MIN_HEIGHT);
  const [hover, setHover] = useState<Hover>();

  useEffect(() => {
    const container = box.current;
    if (!container) return;
    const nodes: LayoutNode[] = [];
    const edges: LayoutEdge[] = [];
    for (const e of elements) {
      const d = e.data as { id: string; kind?: string; seq?: number; source?: string; target?: string };
      if (d.source !== undefined && d.target !== undefined) edges.push({ from: d.source, to: d.target });
      else nodes.push({ id: d.id, kind: d.kind ?? '', seq: d.seq });
    }
    const core = cytoscape({
      container,
      elements,
      style: GRAPH_STYLE,
      layout: { name: 'preset' },
      minZoom: 0.05,
      maxZoom: 3,
      wheelSensitivity: 0.3,
      boxSelectionEnabled: false,
    });
    // For tests and devtools: the drawing behind the box (label boxes, zoom).
    Object.defineProperty(container, 'cy', { value: core, configurable: true });

    let shape = '';
    const arrange = () => {
      const grid = gridFor(container.clientWidth);
      if (`${grid.columns}x${grid.column}` === shape) return;
      shape = `${grid.columns}x${grid.column}`;
      const layout = layeredLayout(nodes, edges, grid.columns, grid.column);
      core
        .style()
        .selector('node')
        .style('text-max-width', `${grid.column - LABEL_MARGIN}px`)
        .update();
      const wrapped = new Set<string>();
      core.batch(() => {
        core.nodes().forEach((n) => {
          const p = layout.positions.get(n.id());
          if (p) n.position(p);
        });
        core.edges('[type = "NEXT"]').forEach((e) => {
          const a = layout.positions.get(e.source().id());
          const b = layout.positions.get(e.target().id());
          if (a && b && a.y !== b.y) wrapped.add(e.id());
        });
        core.edges().forEach((e) => {
          if (wrapped.has(e.id())) e.addClass('wrap');
          else e.removeClass('wrap');
        });
      });
      const h = boxHeight(layout.height);
      setHeight(h);
      // Wait for the box to take its height, then show the start of the graph at zoom 1.
      requestAnimationFrame(() => {
        core.resize();
        home.current = {
          x: Math.max(0, (container.clientWidth - layout.width) / 2),
          y: layout.height < container.clientHeight ? (container.clientHeight - layout.height) / 2 : 0,
        };
        core.zoom(1);
        core.pan(home.current);
        container.dataset.ready = 'true';
      });
    };
    arrange();
    const observer = new ResizeObserver(() => arrange());
    observer.observe(container);

    core.on('tap', (e) =>
      onSelect(e.target === core ? undefined : (e.target as cytoscape.NodeSingular).id()),
    );
    core.on('mouseover', 'node, edge', (e) => {
      const el = e.target as cytoscape.SingularElementArgument;
      el.addClass('hover');
      const at = e.renderedPosition ?? { x: 0, y: 0 };
      const across = Math.max(0, Math.min(1, at.x / Math.max(1, container.clientWidth)));
      setHover({ text: String(el.data('full') ?? el.data('type') ?? el.id()), x: at.x, y: at.y, across });
    });
    core.on('mouseout', 'node, edge', (e) => {
      (e.target as cytoscape.SingularElementArgument).removeClass('hover');
      setHover(undefined);
    });
    core.on('viewport', () => setHover(undefined));
    cy.current = core;
    return () => {
      observer.disconnect();
      core.destroy();
      cy.current = undefined;
    };
  }, [elements]);

  const zoomBy = (factor: number) => {
    const core = cy.current;
    if (!core) return;
    const c = box.current!;
    core.zoom({
      level: core.zoom() * factor,
      renderedPosition: { x: c.clientWidth / 2, y: c.clientHeight / 2 },
    });
  };

  return (
    <div class="graph-box">
      <div class="graph-tools" role="toolbar" aria-label="Graph view">
        <button type="button" onClick={() => zoomBy(1.25)} aria-label="Zoom in">
          +
        </button>
        <button type="button" onClick={() => zoomBy(0.8)} aria-label="Zoom out">
          −
        </button>
        <button type="button" onClick={() => cy.current?.fit(undefined, 16)}>
          Fit
        </button>
        <button
          type="button"
          onClick={() => {
            cy.current?.zoom(1);
            cy.current?.pan(home.current);
          }}
        >
          Start
        </button>
      </div>
      <div class="cyto" ref={box} role="img" aria-label={label} style={{ height: `${height}px` }} />
      {hover && (
        <div
          class="graph-hover"
          role="tooltip"
          style={{
            left: `${hover.x}px`,
            top: `${hover.y}px`,
            transform: `translate(-${Math.round(hover.across * 100)}%, calc(-100% - 14px))`,
          }}
        >
          {hover.text}
        </div>
      )}
    </div>
  );
}
