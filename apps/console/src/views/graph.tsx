import type { ElementDefinition } from 'cytoscape';
import { useMemo, useState } from 'preact/hooks';
import type { Graph, GraphNode, GraphQuery } from '../../../../packages/client/src/types';
import { client } from '../api';
import { href } from '../route';
import { Cyto } from './cyto';
import { Legend } from './legend';
import { STATUSES } from './status';
import { Problem, useLoad } from './use-load';

const TYPES = ['code', 'file', 'browser', 'process', 'kernel', 'skill'] as const;
/** On a phone the filters start folded: the drawing comes first. */
const NARROW = matchMedia('(max-width: 720px)');
/** Past this many actions the graph shows the latest ones (the API's `limit`), so a long session stays quick. */
const DEFAULT_LIMIT = 300;

/** A property as text: strings and numbers as they are, anything else as JSON. */
const text = (v: unknown): string =>
  typeof v === 'string' ? v : typeof v === 'number' ? String(v) : JSON.stringify(v);

export function nodeName(node: GraphNode): string {
  const p = node.properties as Record<string, unknown>;
  switch (node.label) {
    case 'Action':
      return `#${text(p.seq)} ${text(p.operation ?? p.type)} ${text(p.status)}`;
    case 'File':
      return text(p.path ?? node.id);
    case 'Plan':
      return `plan ${text(p.goal ?? p.id ?? node.id)}`;
    case 'Step':
      return `step ${text(p.stepId ?? node.id)}`;
    case 'Approval':
      return `approval ${text(p.decision ?? 'pending')}`;
    case 'Session':
    case 'Sandbox':
    case 'Kernel':
    case 'Process':
    case 'Checkpoint':
      return `${node.label} ${text(p.id ?? node.id)}`;
  }
}

/** A short name that fits a column: an action's seq and operation, a file's own name, a node's kind. */
export function shortName(node: GraphNode): string {
  const p = node.properties as Record<string, unknown>;
  switch (node.label) {
    case 'Action':
      return `#${text(p.seq)} ${text(p.operation ?? p.type)}`;
    case 'File':
      return text(p.path ?? node.id)
        .split('/')
        .pop()!;
    case 'Plan':
      return `plan ${text(p.goal ?? '')}`;
    case 'Step':
      return `step ${text(p.stepId ?? '')}`;
    case 'Approval':
      return `approval ${text(p.decision ?? 'pending')}`;
    case 'Process':
      return `process ${text(p.name ?? p.command ?? '')}`;
    case 'Kernel':
      return `kernel ${text(p.language ?? '')}`;
    case 'Sandbox':
      return `sandbox ${text(p.tier ?? '')}`;
    case 'Session':
    case 'Checkpoint':
      return node.label.toLowerCase();
  }
}

/** What hovering a node says: its full name, and for an action what it ran. */
function fullName(node: GraphNode): string {
  const p = node.properties as Record<string, unknown>;
  if (node.label === 'Action') {
    return `${nodeName(node)}${typeof p.inputSummary === 'string' ? `: ${p.inputSummary}` : ''}`;
  }
  return `${node.label}: ${nodeName(node)}`;
}

/**
 * The drawing's elements. `HAS_ACTION` edges are left out of it (every action has one, from the session, and the
 * action row says as much); the list under the graph keeps every edge.
 */
function elementsOf(graph: Graph): ElementDefinition[] {
  const ids = new Set(graph.nodes.map((n) => n.id));
  return [
    ...graph.nodes.map((n) => {
      const p = n.properties as Record<string, unknown>;
      return {
        data: {
          id: n.id,
          kind: n.label,
          short: shortName(n),
          full: fullName(n),
          ...(n.label === 'Action' && { type: text(p.type), status: text(p.status), seq: Number(p.seq) }),
        },
      };
    }),
    ...graph.edges
      .filter((e) => e.type !== 'HAS_ACTION' && ids.has(e.from) && ids.has(e.to))
      .map((e, i) => ({ data: { id: `e${i}`, source: e.from, target: e.to, type: e.type } })),
  ];
}

/** The session's context graph, filtered like the API's graph query; a node opens to its properties. */
export function GraphPanel({ sessionId }: { sessionId: string }) {
  const [query, setQuery] = useState<GraphQuery>({ limit: DEFAULT_LIMIT });
  const [draft, setDraft] = useState<GraphQuery>({ limit: DEFAULT_LIMIT });
  const [loaded] = useLoad(() => client().graph.get(sessionId, query), [sessionId, JSON.stringify(query)]);
  const [selected, setSelected] = useState<string>();
  const graph = loaded.state === 'ok' ? loaded.value : undefined;
  const elements = useMemo(() => (graph ? elementsOf(graph) : []), [graph]);
  const node = graph?.nodes.find((n) => n.id === selected);

  return (
    <section aria-labelledby="graph-title" class="stack">
      <h1 id="graph-title">
        Graph <span class="mono muted">{sessionId}</span>
      </h1>
      <details class="filter-box" open={!NARROW.matches}>
        <summary>Filters</summary>
        <form
          class="filters"
          aria-label="Graph filters"
          onSubmit={(e) => {
            e.preventDefault();
            setQuery({ ...draft });
          }}
        >
          <Checkboxes
            legend="Types"
            options={TYPES}
            chosen={draft.types}
            onChange={(types) => setDraft({ ...draft, types })}
          />
          <Checkboxes
            legend="Status"
            options={STATUSES}
            chosen={draft.status}
            onChange={(status) => setDraft({ ...draft, status })}
          />
          <label>
            Since{' '}
            <input
              type="datetime-local"
              step="1"
              value={draft.since ? draft.since.slice(0, 19) : ''}
              onInput={(e) => {
                const v = e.currentTarget.value;
                setDraft({ ...draft, since: v ? new Date(v).toISOString() : undefined });
              }}
            />
          </label>
          <label>
            Latest actions{' '}
            <input
              type="number"
              min={1}
              max={10000}
              value={draft.limit ?? ''}
              onInput={(e) => {
                const n = Number.parseInt(e.currentTarget.value, 10);
                setDraft({ ...draft, limit: Number.isFinite(n) && n > 0 ? n : undefined });
              }}
            />
          </label>
          <button type="submit">Apply</button>
        </form>
      </details>
      {loaded.state === 'loading' && <p class="muted">Loading…</p>}
      {loaded.state === 'error' && <Problem message={loaded.message} />}
      {graph && (
        <>
          <p class="muted" data-testid="graph-summary">
            {graph.nodes.length} nodes, {graph.edges.length} edges
            {query.limit && graph.nodes.filter((n) => n.label === 'Action').length >= query.limit
              ? ` (the latest ${query.limit} actions: raise "Latest actions" to see more)`
              : ''}
          </p>
          {/* The node's details lie over the drawing's corner: beside it, they would narrow it and move every node. */}
          <div class="graph-area stack">
            <Cyto
              elements={elements}
              onSelect={setSelected}
              label={`Context graph of ${sessionId}: ${graph.nodes.length} nodes`}
            />
            <Legend graph={graph} />
            {node && (
              <aside
                class="details card node-details"
                aria-label={`Node ${node.id}`}
                data-testid="node-details"
              >
                <div class="bar">
                  <h2>{node.label}</h2>
                  <button
                    type="button"
                    aria-label="Close the node's details"
                    onClick={() => setSelected(undefined)}
                  >
                    ✕
                  </button>
                </div>
                {node.label === 'Action' && (
                  <p>
                    <a
                      href={href({
                        view: 'timeline',
                        sessionId,
                        actionId: text(node.properties.id ?? node.id),
                      })}
                    >
                      Open in the timeline →
                    </a>
                  </p>
                )}
                {node.label === 'File' && typeof node.properties.path === 'string' && (
                  <p>
                    <a href={href({ view: 'file', sessionId, path: node.properties.path })}>Lineage →</a>
                  </p>
                )}
                <pre class="mono">{JSON.stringify(node.properties, null, 2)}</pre>
              </aside>
            )}
          </div>
          <details>
            <summary>Nodes and edges as a list</summary>
            <div class="lists">
              <ul aria-label="Nodes" data-testid="graph-nodes">
                {graph.nodes.map((n) => (
                  <li key={n.id} data-label={n.label}>
                    <button type="button" class="link" onClick={() => setSelected(n.id)}>
                      {n.label}: {nodeName(n)}
                    </button>
                  </li>
                ))}
              </ul>
              <ul aria-label="Edges" data-testid="graph-edges">
                {graph.edges.map((e, i) => (
                  <li key={i} data-type={e.type}>
                    <span class="mono">{e.from}</span> —{e.type}→ <span class="mono">{e.to}</span>
                  </li>
                ))}
              </ul>
            </div>
          </details>
        </>
      )}
    </section>
  );
}

/** A filter's choices as checkboxes; none checked means no filter (`undefined`). */
function Checkboxes({
  legend,
  options,
  chosen,
  onChange,
}: {
  legend: string;
  options: readonly string[];
  chosen: string[] | undefined;
  onChange: (chosen: string[] | undefined) => void;
}) {
  const toggle = (item: string) => {
    const next = chosen?.includes(item) ? chosen.filter((x) => x !== item) : [...(chosen ?? []), item];
    onChange(next.length > 0 ? next : undefined);
  };
  return (
    <fieldset>
      <legend>{legend}</legend>
      {options.map((o) => (
        <label key={o}>
          <input type="checkbox" checked={chosen?.includes(o) ?? false} onChange={() => toggle(o)} /> {o}
        </label>
      ))}
    </fieldset>
  );
}
