import { edgesOf, type Edge } from './table.js';

interface Diagrammable {
  readonly table: readonly unknown[];
  /** The first state is the initial one. */
  readonly states: readonly string[];
  readonly terminal: readonly string[];
  /** Internal transitions (see `TableDefinition.internal`), drawn as the seed does: no event, no rune. */
  readonly internal?: Readonly<Record<string, string | undefined>>;
}

/** The label of an internal transition's edge, the seed's words for it. */
export const INTERNAL_LABEL = '(internal, no rune)';

/** The label of one edge: the event, then its guard in brackets, as Mermaid shows it. */
export const edgeLabel = (edge: Pick<Edge, 'on' | 'label'>): string => (edge.label === undefined ? edge.on : `${edge.on} [${edge.label}]`);

/**
 * A Mermaid `stateDiagram-v2` of a finite machine, generated from its table: one line per
 * (state, event, guard), then one per internal transition, `[*] --> initial` first and
 * `terminal --> [*]` last.
 */
export function mermaidFromTable(machine: Diagrammable): string {
  const lines = ['stateDiagram-v2', `  [*] --> ${machine.states[0]}`];
  for (const edge of edgesOf(machine as never)) lines.push(`  ${edge.from} --> ${edge.to} : ${edgeLabel(edge)}`);
  for (const [from, to] of Object.entries(machine.internal ?? {})) lines.push(`  ${from} --> ${to} : ${INTERNAL_LABEL}`);
  for (const t of machine.terminal) lines.push(`  ${t} --> [*]`);
  return lines.join('\n');
}
