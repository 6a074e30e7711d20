import { edgesOf, type Edge } from './table.js';

interface Diagrammable {
  readonly table: readonly unknown[];
  /** The first state is the initial one. */
  readonly states: readonly string[];
  readonly terminal: readonly string[];
}

/** The label of one edge: the event, then its guard in brackets, as Mermaid shows it. */
export const edgeLabel = (edge: Pick<Edge, 'on' | 'label'>): string => (edge.label === undefined ? edge.on : `${edge.on} [${edge.label}]`);

/**
 * A Mermaid `stateDiagram-v2` of a finite machine, generated from its table: one line per
 * (state, event, guard), `[*] --> initial` first and `terminal --> [*]` last.
 */
export function mermaidFromTable(machine: Diagrammable): string {
  const lines = ['stateDiagram-v2', `  [*] --> ${machine.states[0]}`];
  for (const edge of edgesOf(machine as never)) lines.push(`  ${edge.from} --> ${edge.to} : ${edgeLabel(edge)}`);
  for (const t of machine.terminal) lines.push(`  ${t} --> [*]`);
  return lines.join('\n');
}
