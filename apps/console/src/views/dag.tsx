import cytoscape, { type Core, type ElementDefinition } from 'cytoscape';
import { useEffect, useRef } from 'preact/hooks';

const COLORS: Record<string, string> = {
  Session: '#6b7280',
  Action: '#2563eb',
  File: '#059669',
  Sandbox: '#9333ea',
  Plan: '#d97706',
  Step: '#f59e0b',
  Kernel: '#0891b2',
  Process: '#db2777',
  Checkpoint: '#65a30d',
  failed: '#dc2626',
  running: '#0ea5e9',
};

/**
 * A small DAG (a plan's steps) drawn by Cytoscape.js with a built-in layout; `onSelect` gets the id of a tapped node
 * (undefined on the background). A session's graph has its own drawing (cyto.tsx).
 */
export function Dag({
  elements,
  layout,
  onSelect,
  label,
}: {
  elements: ElementDefinition[];
  layout: 'breadthfirst' | 'cose' | 'grid';
  onSelect: (id: string | undefined) => void;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const cy = useRef<Core | undefined>(undefined);
  useEffect(() => {
    if (!box.current) return;
    const core = cytoscape({
      container: box.current,
      elements,
      wheelSensitivity: 0.3,
      style: [
        {
          selector: 'node',
          style: {
            label: 'data(label)',
            'font-size': 10,
            'text-valign': 'bottom',
            'text-margin-y': 3,
            width: 18,
            height: 18,
            'background-color': (n: cytoscape.NodeSingular) =>
              COLORS[n.data('tone') as string] ?? COLORS[n.data('kind') as string] ?? '#9ca3af',
          },
        },
        { selector: 'node:selected', style: { 'border-width': 3, 'border-color': '#111827' } },
        {
          selector: 'edge',
          style: {
            width: 1.5,
            'curve-style': 'bezier',
            'target-arrow-shape': 'triangle',
            'line-color': '#cbd5e1',
            'target-arrow-color': '#cbd5e1',
            label: 'data(label)',
            'font-size': 8,
            color: '#64748b',
          },
        },
        {
          selector: 'edge[label = "RETRY_OF"]',
          style: { 'line-color': '#dc2626', 'target-arrow-color': '#dc2626' },
        },
      ],
      layout: { name: layout, directed: true, padding: 20, animate: false } as cytoscape.LayoutOptions,
    });
    core.on('tap', (e) =>
      onSelect(e.target === core ? undefined : (e.target as cytoscape.NodeSingular).id()),
    );
    cy.current = core;
    return () => core.destroy();
  }, [elements, layout]);
  return <div class="cyto dag" ref={box} role="img" aria-label={label} />;
}
