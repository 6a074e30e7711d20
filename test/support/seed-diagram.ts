import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { edgesOf, type Edge, type EventObject, type FiniteState, type PayloadSchemas, type TableMachine } from '../../src/index.js';

/** A transition drawn in a seed's Mermaid diagram: `from --> to : label`. */
export interface DrawnEdge {
  from: string;
  to: string;
  label: string;
}

/** The seed documents, vendored verbatim in test/fixtures/seeds so tests need nothing outside the repo. */
export function readSeed(file: string): string {
  return readFileSync(fileURLToPath(new URL(`../fixtures/seeds/${file}`, import.meta.url)), 'utf8');
}

/**
 * The edges of every `stateDiagram-v2` block in a seed, or of the block that follows `heading`.
 * Composite-state braces, notes and `[*]` edges are skipped: only state-to-state transitions.
 */
export function drawnEdges(seed: string, heading?: string): DrawnEdge[] {
  let text = seed;
  if (heading !== undefined) {
    const at = seed.indexOf(heading);
    if (at < 0) throw new Error(`heading not found: ${heading}`);
    text = seed.slice(at);
    const end = text.indexOf('```', text.indexOf('```mermaid') + 10);
    text = text.slice(0, end);
  }
  const edges: DrawnEdge[] = [];
  const re = /^\s*([A-Za-z_]\w*)\s*-->\s*([A-Za-z_]\w*)\s*(?::\s*(.*))?$/;
  let inNote = false;
  for (const line of text.split('\n')) {
    if (/^\s*note\b/.test(line)) inNote = true;
    if (/^\s*end note/.test(line)) {
      inNote = false;
      continue;
    }
    if (inNote) continue;
    const m = re.exec(line);
    if (m) edges.push({ from: m[1]!, to: m[2]!, label: (m[3] ?? '').trim() });
  }
  return edges;
}

/** The edges of a generated diagram, as `from --> to : label` strings. */
export function generatedEdges(mermaid: string): DrawnEdge[] {
  return drawnEdges(mermaid);
}

/**
 * Asserts that every drawn edge is in the machine's table: for each edge, each event its label
 * stands for (`eventsFor`) has a row from `from` to `to`. Returns the edges checked, for counting.
 */
export function missingDrawnEdges(
  edges: readonly { from: string; on: string; to: string }[],
  drawn: readonly DrawnEdge[],
  eventsFor: (edge: DrawnEdge) => readonly string[],
): string[] {
  const missing: string[] = [];
  for (const d of drawn) {
    const events = eventsFor(d);
    if (events.length === 0) missing.push(`${d.from} --> ${d.to} : ${d.label} (no event mapped)`);
    for (const on of events) {
      if (!edges.some((e) => e.from === d.from && e.to === d.to && e.on === on)) {
        missing.push(`${d.from} --> ${d.to} : ${on} (drawn as "${d.label}")`);
      }
    }
  }
  return missing;
}

/** The events a seed 003 label stands for: its `/`-separated names, each cut before any `(`. */
export function eventsBeforeParens(d: { label: string }): string[] {
  return d.label.split('/').map((name) => name.replace(/\(.*$/, '').trim());
}

/** The events a label stands for, by `labeled[label]`; an unlabeled edge by `unlabeled["from --> to"]`; none if not listed. */
export function eventsByLabel(labeled: Record<string, string[]>, unlabeled: Record<string, string[]> = {}): (d: DrawnEdge) => string[] {
  return (d) => (d.label === '' ? unlabeled[`${d.from} --> ${d.to}`] : labeled[d.label]) ?? [];
}

/** The rows of the table under `heading` (up to the next heading), header skipped: its first cell and its second, without backticks. */
export function runeKindRows(seed: string, heading: string): Array<[string, string]> {
  const at = seed.indexOf(heading);
  if (at < 0) throw new Error(`heading not found: ${heading}`);
  const section = seed.slice(at).split('\n#')[0]!;
  return [...section.matchAll(/^\| ([^|]+?) \| (?:`([^`]+)`|([^|]+?)) \|/gm)].slice(1).map((m) => [m[1]!, (m[2] ?? m[3])!]);
}

/** Where a rune-kind row applies: the spawn, or the edges matching a pattern (any of several). */
export type RuneKindWhere = 'spawn' | Partial<Edge> | readonly Partial<Edge>[];

/** The machine appends `kind` where the row says: as its spawn kind, or on every matching edge of the seed's (at least one); `kind` may depend on the edge. */
export function expectRuneKind<S extends FiniteState, E extends EventObject, I, P extends PayloadSchemas>(
  machine: TableMachine<S, E, I, P>,
  where: RuneKindWhere,
  kind: string | ((edge: Edge) => string),
): void {
  if (where === 'spawn') {
    expect(machine.spawnKind).toBe(kind);
    return;
  }
  const patterns: readonly Partial<Edge>[] = Array.isArray(where) ? where : [where];
  // A seed row speaks of the seed's edges: an extension edge of ours (its own kind) may share its states.
  const edges = edgesOf(machine).filter((e) => e.source !== 'extension' && patterns.some((w) => Object.entries(w).every(([k, v]) => e[k as keyof Edge] === v)));
  expect(edges.length).toBeGreaterThan(0);
  for (const edge of edges) expect(edge.kind).toBe(typeof kind === 'string' ? kind : kind(edge));
}
