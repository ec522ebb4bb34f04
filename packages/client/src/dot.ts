import type { Graph, GraphNode } from './types';

/** A DOT string literal: quotes, backslashes and line breaks escaped. */
const quote = (s: string): string =>
  `"${s
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/\r?\n|\r/g, '\\n')}"`;

/** What a node shows besides its label: the property that names it best. */
function caption(node: GraphNode): string {
  const p = node.properties;
  for (const key of ['inputSummary', 'path', 'label', 'language', 'stepId', 'goal']) {
    const value = p[key];
    if (typeof value === 'string' && value !== '') {
      const status = typeof p.status === 'string' ? ` [${p.status}]` : '';
      return `${node.label}: ${value.length > 60 ? `${value.slice(0, 57)}...` : value}${status}`;
    }
  }
  return `${node.label} ${node.id}`;
}

/** The session graph in Graphviz DOT: one node per graph node, one labelled edge per relation. */
export function graphToDot(graph: Graph, name = 'switchyard'): string {
  const lines = [`digraph ${quote(name)} {`, '  rankdir=LR;', '  node [shape=box];'];
  for (const node of graph.nodes) lines.push(`  ${quote(node.id)} [label=${quote(caption(node))}];`);
  for (const edge of graph.edges)
    lines.push(`  ${quote(edge.from)} -> ${quote(edge.to)} [label=${quote(edge.type)}];`);
  lines.push('}');
  return `${lines.join('\n')}\n`;
}
